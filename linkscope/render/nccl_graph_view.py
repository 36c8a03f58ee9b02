"""Text rendering of `linkscope nccl-graph`: one table row per graph, its channels, the findings.

Names from the file go through `printable` and are printed as plain Text, never as markup.
"""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from linkscope.render.console import table_console
from linkscope.topo.common.text import printable
from linkscope.topo.formats.nccl_graph import NcclGraphs
from linkscope.topo.nccl.graphs import GraphFinding

CHANNELS_SHOWN = 8
"""Channels listed per graph (--json lists every one)."""

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def print_graphs(graphs: NcclGraphs, findings: tuple[GraphFinding, ...]) -> None:
    """Print every graph, its first channels and the findings."""
    console = table_console()
    console.print(Text(f"{printable(graphs.name)}: {len(graphs.graphs)} graph(s)", style="bold"))
    table = Table(box=box.SIMPLE, show_edge=False)
    for column in ("graph", "channels", "GB/s intra", "GB/s inter", "type intra", "type inter", "crossNic"):
        table.add_column(column)
    for graph in graphs.graphs:
        table.add_row(Text(graph.pattern), str(graph.nchannels), _number(graph.speed_intra_gbps),
                      _number(graph.speed_inter_gbps), Text(printable(graph.type_intra or "-")),
                      Text(printable(graph.type_inter or "-")), str(graph.crossnic if graph.crossnic is not None else "-"))
    console.print(table)
    for graph in graphs.graphs:
        for number, channel in enumerate(graph.channels[:CHANNELS_SHOWN]):
            console.print(Text(f"  {graph.pattern} channel {number}: " + " ".join(hop.label for hop in channel)))
        if len(graph.channels) > CHANNELS_SHOWN:
            console.print(Text(f"  ... {len(graph.channels) - CHANNELS_SHOWN} more {graph.pattern} channel(s)"))
    for note in graphs.notes:
        console.print(Text(f"note: {printable(note)}"))
    for finding in findings:
        console.print(Text(f"{finding.severity.upper():8}{finding.code}", style=_SEVERITY_STYLE[finding.severity]))
        console.print(Text(f"  {printable(finding.message)}"))
        for line in finding.evidence:
            console.print(Text(f"    - {printable(line)}"))


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
