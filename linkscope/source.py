"""Resolve a command's SOURCE argument to a Snapshot (None means: probe this machine)."""

from __future__ import annotations

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.source import load_source
from linkscope.topo.model.snapshot import Snapshot


def open_source(spec: str | None) -> Snapshot:
    """Load `spec` (file, `-`, `sample:NAME`) or, when it is None, probe this machine."""
    if spec is None:
        from linkscope.probes.host import probe_host

        return probe_host()
    return load_source(spec)


def open_gpu_source(spec: str | None, command: str) -> Snapshot:
    """:func:`open_source` for a command that places ranks on GPUs: on this machine without a GPU, say to give a
    SOURCE instead of failing on an empty host."""
    snapshot = open_source(spec)
    if spec is None and not any(host.gpus for host in snapshot.hosts):
        raise InputError(f"{command}: this machine has no NVIDIA GPU to place ranks on: give a SOURCE "
                         "(sample:NAME, a saved topology such as a `linkscope probe -o` file)")
    return snapshot
