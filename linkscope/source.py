"""Resolve a command's SOURCE argument to a Snapshot (None means: probe this machine)."""

from __future__ import annotations

from topo.model import Snapshot
from topo.sources import load_source


def open_source(spec: str | None) -> Snapshot:
    """Load `spec` (file, `-`, `sample:NAME`) or, when it is None, probe this machine."""
    if spec is None:
        from probes.host import probe_host

        return probe_host()
    return load_source(spec)
