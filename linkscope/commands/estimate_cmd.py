"""`linkscope estimate OP --bytes SIZE --ranks N`: the what-if calculator of the alpha-beta cost model.

JSON (`--json`): `op`, `size_bytes`, `ranks`, `nodes`, `algo`, `time_s`, `algbw_gbps`, `busbw_gbps`
(nccl-tests conventions) and `algorithms` (the time of each algorithm that applies).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from linkscope.argtypes import whole_number
from topo.cost.collectives import ALGORITHMS, OPS, collective_cost, parse_alpha_beta, uniform_links
from topo.errors import InputError
from topo.jsonio import json_text
from topo.limits import MAX_HOSTS, MAX_WORLD_RANKS
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
            "  linkscope estimate all_gather --bytes 64M --ranks 64 --nodes 8 --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("op", metavar="OP", help=f"collective: {', '.join(OPS)}")
    parser.add_argument("--bytes", required=True, metavar="SIZE",
                        help="buffer size: bytes, or 64K / 1M / 1G (powers of 1024), 1GiB, 1GB (10^9)")
    parser.add_argument("--ranks", required=True, type=whole_number(1, MAX_WORLD_RANKS), metavar="N", help="ranks in the group")
    parser.add_argument("--nodes", type=whole_number(1, MAX_HOSTS), default=1, metavar="K",
                        help="nodes the ranks spread over evenly (default 1)")
    parser.add_argument("--intra", default=DEFAULT_INTRA, metavar="ALPHA_US:GBPS",
                        help=f"hop inside a node (default {DEFAULT_INTRA})")
    parser.add_argument("--inter", default=DEFAULT_INTER, metavar="ALPHA_US:GBPS",
                        help=f"hop between nodes, per GPU (default {DEFAULT_INTER})")
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
    links = uniform_links(args.ranks, args.nodes, parse_alpha_beta(args.intra, "--intra"),
                          parse_alpha_beta(args.inter, "--inter"))
    cost = collective_cost(op, links, size_bytes, args.algo)
    algorithms: dict[str, float] = {}
    for algo in ("ring", "tree", "hierarchical"):
        try:
            algorithms[algo] = collective_cost(op, links, size_bytes, algo).time_s
        except InputError:
            continue
    if args.json:
        print(json_text({
            "op": op, "size_bytes": size_bytes, "ranks": args.ranks, "nodes": args.nodes, "algo": cost.algo,
            "time_s": cost.time_s, "algbw_gbps": cost.algbw_gbps, "busbw_gbps": cost.busbw_gbps,
            "algorithms": algorithms,
        }))
        return 0
    from rich.table import Table

    from linkscope.render.check_view import format_seconds
    from linkscope.render.console import console as safe_console

    table = Table(title=f"{op} of {format_size_bytes(size_bytes)} over {args.ranks} ranks on {args.nodes} node(s)",
                  title_justify="left", show_edge=False)
    for column in ("algorithm", "time", "algbw", "busbw"):
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    for algo, time_s in algorithms.items():
        each = collective_cost(op, links, size_bytes, algo)
        marker = " *" if each.algo == cost.algo else ""
        table.add_row(each.algo + marker, format_seconds(time_s), _gbps(each.algbw_gbps, 1), _gbps(each.busbw_gbps, 1))
    console = safe_console()
    console.print(table)
    console.print(f"{cost.algo}: {format_seconds(cost.time_s)}, algbw {_gbps(cost.algbw_gbps, 2)}, "
                  f"busbw {_gbps(cost.busbw_gbps, 2)}")
    return 0


def _gbps(value: float, decimals: int) -> str:
    """A bandwidth for people; one over no time (a single rank moves nothing) has no finite value: `-`."""
    return f"{value:.{decimals}f} GB/s" if math.isfinite(value) else "- GB/s"
