"""Open NCCL's view of a machine from a file: its topology XML (a dump or an `NCCL_TOPO_FILE`) or a debug log that
printed the `=== System : maxBw ...` tree."""

from __future__ import annotations

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nccl_topo_model import NcclTopology
from linkscope.topo.formats.nccl_topo_xml import looks_like_nccl_topo_xml, read_nccl_topo_xml


def nccl_topology_of_text(text: str, name: str) -> NcclTopology:
    """NCCL's machine from XML or from a log's topology tree (the first host's); one InputError line otherwise."""
    if looks_like_nccl_topo_xml(text) or text.lstrip().startswith("<"):
        return read_nccl_topo_xml(text, name)
    from linkscope.topo.formats.nccl_log import read_nccl_log_text

    log = read_nccl_log_text(text, name)
    if not log.topologies:
        raise InputError(f"{name}: neither NCCL topology XML nor a log with NCCL's topology "
                         "(`=== System : maxBw ...` lines: run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH)")
    return log.topologies[0]


def load_nccl_topology(path: str) -> NcclTopology:
    """Read `path` (or `-` for stdin) as NCCL's view of a machine."""
    from linkscope.topo.formats.source import read_named_text

    return nccl_topology_of_text(*read_named_text(path))
