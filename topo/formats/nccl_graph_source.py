"""Open NCCL's searched graphs from a file: a graph dump (`NCCL_GRAPH_DUMP_FILE`, `NCCL_GRAPH_FILE`) or an NCCL log
with the `Pattern ...` lines of the GRAPH subsystem (the first host's, one rank's)."""

from __future__ import annotations

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nccl_graph import NcclGraphs, looks_like_nccl_graph_xml, read_nccl_graph_xml


def nccl_graphs_of_text(text: str, name: str) -> NcclGraphs:
    """The graphs of a dump or a log; one InputError line when there are none."""
    if looks_like_nccl_graph_xml(text) or text.lstrip().startswith("<"):
        return read_nccl_graph_xml(text, name)
    from linkscope.topo.formats.nccl_log import read_nccl_log_text

    log = read_nccl_log_text(text, name)
    if not log.graphs:
        raise InputError(f"{name}: neither an NCCL graph dump (<graphs>) nor a log with NCCL's `Pattern N, crossNic ...` "
                         "lines (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH)")
    found = log.graphs[0]
    notes = (*found.notes, f"graphs of one rank on one host; the log holds {len(log.graphs)} host(s)") \
        if len(log.graphs) > 1 else found.notes
    return NcclGraphs(name=name, graphs=found.graphs, notes=tuple(notes))


def load_nccl_graphs(path: str) -> NcclGraphs:
    """Read `path` (or `-` for stdin) as NCCL's graphs."""
    from linkscope.topo.formats.source import read_named_text

    return nccl_graphs_of_text(*read_named_text(path))
