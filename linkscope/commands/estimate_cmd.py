"""`linkscope estimate OP --bytes SIZE --ranks N [SOURCE]`: the predicted time of one collective.

With SOURCE the ranks are placed on that machine (repeated `--nodes` times, the same number of
ranks on each node, block order) and priced on the links they cross, as `check` prices a group;
without it, on uniform `--intra` / `--inter` links (the alpha-beta what-if of DOMAIN.md).
JSON (`--json`): `op`, `size_bytes`, `ranks`, `nodes`, `algo`, `time_s`, `algbw_gbps`, `busbw_gbps`
(nccl-tests conventions), `channels`, `links` (the links used) and `algorithms` (the time of each
algorithm that applies).
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.commands.estimate_sweep import add_sweep_argument, run_sweep_if_asked
from linkscope.options import add_json_flag
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_HOSTS, MAX_WORLD_RANKS
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.common.sizes import format_size_bytes, parse_size_bytes
from linkscope.topo.common.text import say
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.collectives import (
    ALGORITHMS,
    PRICED_OPS,
    WHAT_IF_INTER,
    WHAT_IF_INTRA,
    GroupLinks,
    algorithm_times,
    collective_cost,
    parse_alpha_beta,
    parse_op,
    uniform_links,
)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `estimate` subcommand."""
    parser = subparsers.add_parser(
        "estimate",
        help="what-if: predicted time, algbw and busbw of one collective on a machine or on given links",
        description=(
            "Predict one collective as NCCL would run it. With SOURCE the ranks are placed on that machine "
            "(--nodes copies of it, the same number of ranks on each, block order) and priced on the links "
            "they cross: several rings over direct NVLink meshes, NVLink SHARP on Hopper NVSwitch boxes, "
            "NIC rails between nodes, host memory where PCIe has no P2P. Without SOURCE every hop inside a "
            "node costs the --intra latency and bandwidth and every hop between nodes the --inter ones "
            "(per GPU: each GPU has its own NIC rail). auto picks NCCL's cheapest algorithm for the size; "
            "--algo forces one, as NCCL_ALGO does. algbw and busbw follow nccl-tests."
        ),
        epilog=(
            "examples:\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 8 --intra 1:300 --algo ring\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 8 --nodes 8 --inter 5:12.5 --algo ring\n"
            "  linkscope estimate all_reduce --bytes 8G --ranks 8 sample:dgx-h100 --json\n"
            "  linkscope estimate all_reduce --bytes 8G --ranks 16 --nodes 2 sample:dgx-h100\n"
            "  linkscope estimate all_reduce --bytes 1G --ranks 16 sample:gb200-nvl72"
        ),
    )
    parser.add_argument("op", metavar="OP", help=f"collective: {', '.join(PRICED_OPS)}")
    parser.add_argument("source", nargs="?", metavar="SOURCE",
                        help="machine to place the ranks on: snapshot JSON, `nvidia-smi topo -m` text, `-`, sample:NAME "
                             "(default: uniform --intra/--inter links)")
    parser.add_argument("--bytes", required=True, metavar="SIZE",
                        help="buffer size: bytes, or 64K / 1M / 1G (powers of 1024), 1GiB, 1GB (10^9)")
    parser.add_argument("--ranks", required=True, type=whole_number(2, MAX_WORLD_RANKS), metavar="N",
                        help="ranks in the group (2 or more: over one rank a collective moves nothing between GPUs)")
    parser.add_argument("--nodes", type=whole_number(1, MAX_HOSTS), default=1, metavar="N",
                        help="nodes the ranks spread over evenly (default 1)")
    parser.add_argument("--intra", default=None, metavar="ALPHA_US:GBPS",
                        help=f"without SOURCE: hop inside a node (default {WHAT_IF_INTRA})")
    parser.add_argument("--inter", default=None, metavar="ALPHA_US:GBPS",
                        help=f"without SOURCE: hop between nodes, per GPU (default {WHAT_IF_INTER})")
    parser.add_argument("--algo", choices=ALGORITHMS, default="auto",
                        help="algorithm (default auto: NCCL's cheapest for the size)")
    add_json_flag(parser, "print one JSON object")
    add_sweep_argument(parser)
    parser.set_defaults(run=run)
    _accept_source_after_options(parser)


def _accept_source_after_options(parser: argparse.ArgumentParser) -> None:
    """Let SOURCE follow the options (`estimate OP --bytes 1G --ranks 8 SOURCE`), as argparse's intermixed
    parsing allows; the plain parser would have bound the optional SOURCE, empty, right after OP."""

    class IntermixedParser(type(parser)):  # type: ignore[misc]
        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            if self.__dict__.get("_intermixing"):
                return super().parse_known_args(args, namespace)
            self._intermixing = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False

    parser.__class__ = IntermixedParser


def _links_on_source(spec: str, ranks: int, nodes: int) -> tuple[GroupLinks, str, int]:
    """The links a group of `ranks` crosses on `nodes` copies of the SOURCE machine (or on the hosts of a
    cluster, a multi-host NVLink domain counting as one node), where they sit, and how many nodes they span."""
    from linkscope.topo.cost.groups import GroupPricer
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.formats.source import load_source
    from linkscope.topo.layout.placement import LayoutMismatch, cluster_hosts, place_ranks

    snapshot = load_source(spec)
    hosts, classes = cluster_hosts(snapshot, nodes)
    if ranks % len(hosts):
        raise InputError(f"--ranks {ranks} does not spread evenly over {len(hosts)} node(s)")
    per_node = ranks // len(hosts)
    smallest = min(len(host.gpus) for host in hosts)
    if per_node > smallest:
        raise InputError(f"--ranks {ranks} over {len(hosts)} node(s) needs {per_node} GPUs per node; "
                         f"{spec} has {smallest}")
    devices = [gpu.index for gpu in hosts[0].gpus[:per_node]]
    try:
        placement = place_ranks(hosts, classes, ranks, "block", devices)
    except LayoutMismatch as mismatch:
        raise InputError(f"{spec}: {mismatch.message}") from None
    where = f"on {snapshot.source or spec}, {placement.description}"
    return GroupPricer(placement, CostModel()).links(range(ranks)), where, len(set(placement.node_of_rank))


def run(args: argparse.Namespace) -> int:
    """Price the collective and print it."""
    op = parse_op(args.op, "estimate")
    if args.sweep is None and args.bytes is None:
        raise InputError("estimate: give --bytes SIZE or --sweep MIN:MAX")
    if args.ranks < 1:
        raise InputError(f"--ranks: must be at least 1, got {args.ranks}")
    if args.nodes < 1:
        raise InputError(f"--nodes: must be at least 1, got {args.nodes}")
    if args.source is not None:
        if args.intra is not None or args.inter is not None:
            raise InputError("--intra/--inter describe links without a machine: drop them or drop SOURCE")
        links, where, nodes = _links_on_source(args.source, args.ranks, args.nodes)
    else:
        links = uniform_links(args.ranks, args.nodes, parse_alpha_beta(args.intra or WHAT_IF_INTRA, "--intra"),
                              parse_alpha_beta(args.inter or WHAT_IF_INTER, "--inter"))
        where, nodes = "on uniform links", args.nodes
    if (status := run_sweep_if_asked(args, op, links)) is not None:
        return status
    size_bytes = parse_size_bytes(args.bytes, "--bytes")
    if size_bytes < 1:
        raise InputError("--bytes: must be at least 1 byte")
    cost = collective_cost(op, links, size_bytes, args.algo)
    algorithms = algorithm_times(op, links, size_bytes)
    if args.json:
        say(json_text({
            "op": op, "size_bytes": size_bytes, "ranks": args.ranks, "nodes": nodes, "algo": cost.algo,
            "time_s": cost.time_s, "algbw_gbps": cost.algbw_gbps, "busbw_gbps": cost.busbw_gbps,
            "channels": cost.channels, "links": list(cost.links_used), "algorithms": algorithms,
        }), block=True)
        return 0
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import console as safe_console
    from linkscope.topo.common.units import format_seconds

    title = f"{op} of {format_size_bytes(size_bytes)} over {args.ranks} ranks on {nodes} node(s)"
    table = Table(title=Text(title), title_justify="left", show_edge=False)
    for column in ("algorithm", "time", "algbw", "busbw"):
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    for algo in algorithms:
        each = collective_cost(op, links, size_bytes, algo)
        marker = " *" if algo == args.algo or (args.algo == "auto" and each.algo == cost.algo) else ""
        table.add_row(each.algo + marker, format_seconds(each.time_s), _gbps(each.algbw_gbps, 1), _gbps(each.busbw_gbps, 1))
    console = safe_console()
    console.print(table)
    console.print(Text(where))
    if cost.links_used:
        console.print(Text(f"links: {', '.join(cost.links_used)}; channels: {cost.channels}"))
    console.print(f"{cost.algo}: {format_seconds(cost.time_s)}, algbw {_gbps(cost.algbw_gbps, 2)}, "
                  f"busbw {_gbps(cost.busbw_gbps, 2)}")
    return 0


def _gbps(value: float, decimals: int) -> str:
    """A bandwidth for people; one over no time (a single rank moves nothing) has no finite value: `-`."""
    return format_gbps(value, f".{decimals}f", infinite="- GB/s")
