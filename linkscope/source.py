"""Resolve a command's SOURCE argument to a Snapshot (None means: probe this machine)."""

from __future__ import annotations

from linkscope.topo.formats.source import load_source
from linkscope.topo.model.snapshot import Snapshot


def open_source(spec: str | None) -> Snapshot:
    """Load `spec` (file, `-`, `sample:NAME`) or, when it is None, probe this machine."""
    if spec is None:
        from linkscope.probes.host import probe_host

        return probe_host()
    return load_source(spec)
