"""Readers of other tools' output, one module per tool (streaming where inputs are large), rank maps, and
the one way a SOURCE opens (:mod:`~topo.formats.source`). Pasted text goes through :mod:`~topo.formats.lines`."""
