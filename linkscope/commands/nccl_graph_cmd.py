"""`linkscope nccl-graph FILE`: the channels NCCL searched on its topology, from its graph dump or its debug log.

Exit status: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 unreadable input. `--json`
prints `graphs` (each `pattern`, `pattern_code`, `id`, `crossnic`, `nchannels`, `speed_intra_gbps`,
`speed_inter_gbps`, `type_intra`, `type_inter`, `same_channels`, `channels`: lists of GPU `dev` numbers with NET ends
as `netN`; GPUs a log names by rank as `rankN`, by bus id as the bus id), `findings` (with `--snapshot`) and `notes`.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_fail_on_flag, add_json_flag, findings_status
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `nccl-graph` subcommand."""
    parser = subparsers.add_parser(
        "nccl-graph",
        help="read NCCL's searched graphs (NCCL_GRAPH_DUMP_FILE, or a log's Pattern lines): rings, trees, NVLS",
        description=(
            "Read the graphs NCCL searched on its topology: an NCCL_GRAPH_DUMP_FILE (or a vendor's NCCL_GRAPH_FILE),\n"
            "or an NCCL_DEBUG=INFO log with NCCL_DEBUG_SUBSYS=GRAPH (`Pattern 4, crossNic 0, nChannels ...` lines).\n"
            "For each graph (ring, tree, CollNet, NVLS): its channels in GPU and NET order, the bandwidth NCCL planned\n"
            "per channel inside the node and between nodes (GB/s), and the path types it allowed (LOC, NVL, NVB, C2C,\n"
            "PIX, PXB, PXN, PHB, SYS, NET). With --snapshot the channels are set on the machine's links: a path type\n"
            "worse than the links allow, or a plan far below what they deliver, says NCCL saw another machine.\n"
            "Exit status: 0 no finding at or above --fail-on, 1 there is one, 2 unreadable input."
        ),
        epilog="examples:\n  NCCL_GRAPH_DUMP_FILE=graph.xml torchrun ...; linkscope nccl-graph graph.xml --snapshot box.json\n"
        "  linkscope nccl-graph train.log --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the graph dump XML or an NCCL log, or - for stdin")
    parser.add_argument("--snapshot", default=None, metavar="SOURCE",
                        help="set the channels on this machine's links (snapshot JSON, topo text, NCCL topology XML, "
                        "sample:NAME)")
    add_json_flag(parser, "print one JSON object (graphs, findings, notes)")
    add_fail_on_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read the graphs, compare them with the snapshot when given, print them."""
    from linkscope.topo.formats.nccl_graph_source import load_nccl_graphs
    from linkscope.topo.nccl.graphs import GraphFinding, compare_graphs, graph_json

    graphs = load_nccl_graphs(args.file)
    findings: tuple[GraphFinding, ...] = ()
    if args.snapshot is not None:
        from linkscope.topo.formats.source import load_source

        findings = compare_graphs(graphs, load_source(args.snapshot))
    if args.json:
        say(json_text({"file": args.file, "graphs": [graph_json(graph) for graph in graphs.graphs],
                       "findings": [finding.to_json() for finding in findings], "notes": list(graphs.notes)}), block=True)
    else:
        from linkscope.render.nccl_graph_view import print_graphs

        print_graphs(graphs, findings)
    return findings_status((finding.severity for finding in findings), args.fail_on)
