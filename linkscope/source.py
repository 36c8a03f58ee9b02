"""Resolve a command's SOURCE argument to a Snapshot (None means: probe this machine)."""

from __future__ import annotations

import argparse

from linkscope.topo.formats.source import load_source
from linkscope.topo.model.snapshot import Snapshot

SOURCE_HELP = "snapshot JSON, `nvidia-smi topo -m` text, `-` for stdin, or sample:NAME; default: this machine"


def add_source_argument(parser: argparse.ArgumentParser, help_text: str = SOURCE_HELP) -> None:
    """The optional positional SOURCE every machine-reading command takes."""
    parser.add_argument("source", nargs="?", metavar="SOURCE", help=help_text)


def open_source(spec: str | None) -> Snapshot:
    """Load `spec` (file, `-`, `sample:NAME`) or, when it is None, probe this machine."""
    if spec is None:
        from linkscope.probes.host import probe_host

        return probe_host()
    return load_source(spec)
