"""`linkscope estimate OP --bytes SIZE --ranks N`: the what-if calculator of the alpha-beta cost model.

JSON (`--json`): `op`, `size_bytes`, `ranks`, `nodes`, `algo`, `time_s`, `algbw_gbps`, `busbw_gbps`
(nccl-tests conventions) and `algorithms` (the time of each algorithm that applies).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from topo.cost.collectives import ALGORITHMS, OPS, GroupLinks, collective_cost, parse_alpha_beta, uniform_links
from topo.errors import InputError
from topo.sizes import format_size_bytes, parse_size_bytes

DEFAULT_INTRA = "1:300"
"""NVLink 3 (A100) as in the DOMAIN worked example: 1 us per hop, 300 GB/s."""
DEFAULT_INTER = "5:12.5"
"""A 100 Gb/s network port per GPU: 5 us per hop, 12.5 GB/s."""


def _op_name(text: str) -> str:
    name = text.lower().replace("-", "_")
    aliases = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "alltoall": "all_to_all", "sendrecv": "send_recv", "bcast": "broadcast", "p2p": "send_recv"}
    name = aliases.get(name, name)
    if name not in OPS:
        raise InputError(f"estimate: unknown operation {text!r} (known: {', '.join(OPS)})")
    return name


def links_on(spec: str, ranks: int, nodes: int) -> tuple[GroupLinks, int]:
    """The links a group of the first `ranks` GPUs of SOURCE `spec` rides (block placement), and its node count."""
    from linkscope.source import open_source
    from topo.cost.groups import GroupPricer
    from topo.cost.params import CostModel
    from topo.placement import cluster_hosts, place_ranks

    hosts, classes = cluster_hosts(open_source(spec), nodes)
    try:
        placement = place_ranks(hosts, classes, ranks)
    except InputError as exc:
        raise InputError(f"--ranks {ranks} --on {spec}: {exc}") from None
    return GroupPricer(placement, CostModel()).links(range(ranks)), len(set(placement.node_of_rank))


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `estimate` subcommand."""
    parser = subparsers.add_parser(
        "estimate",
        help="what-if: predicted time, algbw and busbw of one collective on given links",
        description=(
            "Predict one collective with the alpha-beta model: ranks spread evenly over nodes, each hop "
            "inside a node costs the --intra latency and bandwidth, each hop between nodes the --inter ones "
            "(bandwidth per GPU: each GPU has its own NIC rail). Ring, tree and hierarchical algorithms; "
            "auto picks the cheapest. algbw and busbw follow nccl-tests."
        ),
        epilog=(
            "examples:\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 8 --intra 1:300 --algo ring\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 8 --nodes 8 --inter 5:12.5 --algo ring\n"
            "  linkscope estimate all_gather --bytes 64M --ranks 64 --nodes 8 --json\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 16 --on sample:gb200-nvl72"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("op", metavar="OP", help=f"collective: {', '.join(OPS)}")
    parser.add_argument("--bytes", required=True, metavar="SIZE",
                        help="buffer size: bytes, or 64K / 1M / 1G (powers of 1024), 1GiB, 1GB (10^9)")
    parser.add_argument("--ranks", required=True, type=int, metavar="N", help="ranks in the group")
    parser.add_argument("--nodes", type=int, default=1, metavar="K", help="nodes the ranks spread over evenly (default 1)")
    parser.add_argument("--intra", default=None, metavar="ALPHA_US:GBPS",
                        help=f"hop inside a node (default {DEFAULT_INTRA})")
    parser.add_argument("--inter", default=None, metavar="ALPHA_US:GBPS",
                        help=f"hop between nodes, per GPU (default {DEFAULT_INTER})")
    parser.add_argument("--on", default=None, metavar="SOURCE",
                        help="price on the links of a machine or cluster instead (snapshot, cluster file from collect or "
                             "merge, sample:NAME): the group is its first N GPUs in torchrun block order, a multi-host "
                             "NVLink domain counting as one node; --nodes repeats a single host")
    parser.add_argument("--algo", choices=ALGORITHMS, default="auto", help="algorithm (default auto: the cheapest)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Price the collective and print it."""
    op = _op_name(args.op)
    size_bytes = parse_size_bytes(args.bytes, "--bytes")
    if size_bytes < 1:
        raise InputError("--bytes: must be at least 1 byte")
    if args.ranks < 1:
        raise InputError(f"--ranks: must be at least 1, got {args.ranks}")
    if args.nodes < 1:
        raise InputError(f"--nodes: must be at least 1, got {args.nodes}")
    nodes = args.nodes
    if args.on is not None:
        if args.intra is not None or args.inter is not None:
            raise InputError("--on: the links come from the SOURCE; leave out --intra and --inter")
        links, nodes = links_on(args.on, args.ranks, args.nodes)
    else:
        links = uniform_links(args.ranks, args.nodes, parse_alpha_beta(args.intra or DEFAULT_INTRA, "--intra"),
                              parse_alpha_beta(args.inter or DEFAULT_INTER, "--inter"))
    cost = collective_cost(op, links, size_bytes, args.algo)
    algorithms: dict[str, float] = {}
    for algo in ("ring", "tree", "hierarchical"):
        try:
            algorithms[algo] = collective_cost(op, links, size_bytes, algo).time_s
        except InputError:
            continue
    if args.json:
        print(json.dumps({
            "op": op, "size_bytes": size_bytes, "ranks": args.ranks, "nodes": nodes, "algo": cost.algo,
            "time_s": cost.time_s, "algbw_gbps": cost.algbw_gbps, "busbw_gbps": cost.busbw_gbps,
            "algorithms": algorithms,
        }, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    from linkscope.render.check_view import format_seconds

    table = Table(title=f"{op} of {format_size_bytes(size_bytes)} over {args.ranks} ranks on {nodes} node(s)",
                  title_justify="left", show_edge=False)
    for column in ("algorithm", "time", "algbw", "busbw"):
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    for algo, time_s in algorithms.items():
        each = collective_cost(op, links, size_bytes, algo)
        marker = " *" if each.algo == cost.algo else ""
        table.add_row(each.algo + marker, format_seconds(time_s), f"{each.algbw_gbps:.1f} GB/s", f"{each.busbw_gbps:.1f} GB/s")
    console = Console()
    console.print(table)
    console.print(f"{cost.algo}: {format_seconds(cost.time_s)}, algbw {cost.algbw_gbps:.2f} GB/s, "
                  f"busbw {cost.busbw_gbps:.2f} GB/s")
    return 0
