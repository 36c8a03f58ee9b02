"""The pure core of linkscope: rooms, each importing only the rooms listed before it.

- :mod:`~topo.common`  errors, limits (every cap), numbers, sizes, units, text, JSON in and out, cpulists,
  the garbage collector paused around bulk decoding
- :mod:`~topo.model`   the Snapshot and Measurements (frozen dataclasses), findings, JSON codec, validation
- :mod:`~topo.machine` what a machine's links deliver, PCIe paths, clusters, rings, comparisons of hosts
- :mod:`~topo.samples` the built-in sample machines and their generator
- :mod:`~topo.layout`  a parallel layout, its process groups, their placement on GPUs, per-step volumes
- :mod:`~topo.formats` readers: one per tool's output (nvidia-smi, nccl-tests, nvbandwidth, NCCL logs,
  profiler traces, rank maps) and the one way a SOURCE opens
- :mod:`~topo.cost`    the communication cost model, expected next to measured, explain, calibration
- :mod:`~topo.health`  doctor's rules (a RULES registry), cluster rules included
- :mod:`~topo.checks`  the layout rules of `linkscope check`, `--suggest` and `plan`
- :mod:`~topo.nccl`    analyses of NCCL logs; :mod:`~topo.trace` analyses of profiler traces

Imports nothing that touches hardware or draws (no torch, pynvml, textual or rich).
"""
