"""`linkscope explain OP --bytes SIZE --ranks N --time T [SOURCE]`: which links explain an observed time.

The cost model run backwards (:mod:`topo.cost.explain`). JSON (`--json`): `op`, `size_bytes`, `ranks`,
`observed_s`, `observed_busbw_gbps`, `best` and `scenarios` (each `scenario`, `link`, `algo`,
`predicted_s`, `speed_ratio`, `verdict`, `fits`, `bottleneck_gbps`, `implied_gbps`) and, with a SOURCE,
`layout` (the same fields for the links the placed ranks cross, plus `placement`, the placement line, and
`assumed`, whether the hosts were assumed rather than given by --nodes).
Exit status: 0, or 1 when with a SOURCE the observed time is slow or far below what its layout's
links should give; 2 bad input.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from linkscope.options import add_fail_on_flag, add_json_flag, verdicts_status
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_HOSTS, MAX_WORLD_RANKS
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.common.text import say
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.collectives import ALGORITHMS, WHAT_IF_INTER, WHAT_IF_INTRA, parse_op
from linkscope.topo.cost.explain import (
    Fit,
    Scenario,
    describe_fit,
    explain,
    fit,
    link_name,
    observed_busbw_gbps,
    parse_duration_s,
    what_if_scenarios,
)
from linkscope.topo.layout.placement import DISTRIBUTIONS, parse_visible_devices

if TYPE_CHECKING:
    from linkscope.topo.layout.measured import MeasuredPlacement

DEFAULT_PCIE = "2:25.8"
"""A PCIe Gen4 x16 path as peer copies reach it (~82% of 31.5 GB/s), 2 us per hop."""



def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `explain` subcommand."""
    parser = subparsers.add_parser(
        "explain",
        help="the cost model backwards: which links and placement explain an observed collective time",
        description=(
            "Given how long one collective call took, find what explains it: every placement of the ranks\n"
            "(all in one node on --intra, fewer per node down to one per node over --inter, one node over\n"
            "--pcie) is priced with the cost model, the nearest prediction is the explanation, and the\n"
            "bandwidth its slowest link would need for the observed time is shown. With a SOURCE the ranks\n"
            "are placed on that machine (--nodes, --distribution, --visible-devices as for `check`) and\n"
            "the time is judged against the links they cross: it fits, or it points at a slow link (exit 1)."
        ),
        epilog=(
            "examples:\n"
            "  linkscope explain all_reduce --bytes 1G --ranks 8 --time 150ms\n"
            "  linkscope explain all_reduce --bytes 1G --ranks 8 --time 150ms sample:dgx-h100\n"
            "  linkscope explain all_gather --bytes 256M --ranks 16 --time 9ms sample:dgx-a100 --nodes 2 --json"
        ),
    )
    parser.__class__ = _intermixed(type(parser))
    parser.add_argument("op", metavar="OP",
                        help="the collective: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv")
    parser.add_argument("source", nargs="?", metavar="SOURCE",
                        help="the machine to place the ranks on: snapshot JSON, `nvidia-smi topo -m` text, sample:NAME")
    parser.add_argument("--bytes", required=True, metavar="SIZE", help="buffer size: 1G, 256M, 1GiB, 1GB (10^9)")
    parser.add_argument("--ranks", required=True, type=whole_number(1, MAX_WORLD_RANKS), metavar="N", help="ranks in the group")
    parser.add_argument("--time", required=True, metavar="DURATION", help="observed time of one call: 150ms, 6.3ms, 0.15s, 40us")
    parser.add_argument("--nodes", type=whole_number(1, MAX_HOSTS), default=None, metavar="N",
                        help="with SOURCE: nodes the ranks run on (default: as few as hold them)")
    parser.add_argument("--distribution", choices=DISTRIBUTIONS, default="block", help="with SOURCE: rank placement")
    parser.add_argument("--visible-devices", default=None, metavar="LIST", help="with SOURCE: CUDA_VISIBLE_DEVICES per node")
    parser.add_argument("--intra", default=WHAT_IF_INTRA, metavar="ALPHA_US:GBPS",
                        help=f"what-if intra-node link (default {WHAT_IF_INTRA}, NVLink)")
    parser.add_argument("--inter", default=WHAT_IF_INTER, metavar="ALPHA_US:GBPS",
                        help=f"what-if network per GPU (default {WHAT_IF_INTER}, 100 Gb/s)")
    parser.add_argument("--pcie", default=DEFAULT_PCIE, metavar="ALPHA_US:GBPS",
                        help=f"what-if PCIe path between GPUs (default {DEFAULT_PCIE}, Gen4 x16)")
    parser.add_argument("--algo", choices=ALGORITHMS, default="auto", help="algorithm (default auto: the cheapest)")
    add_fail_on_flag(parser, "exit 1 when the layout on SOURCE is slow (a warning) or far below (an error) at or "
                     "above this severity (default warning)")
    add_json_flag(parser, "print one JSON object")
    parser.set_defaults(run=run)


def _intermixed(base: type[argparse.ArgumentParser]) -> type[argparse.ArgumentParser]:
    """`base` reading positionals wherever they stand (`explain OP --bytes 1G ... SOURCE`): argparse would give
    all positionals out at the first one."""

    class Intermixed(base):  # type: ignore[valid-type, misc]
        _inside = False

        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            if self._inside:
                return super().parse_known_args(args, namespace)
            self._inside = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._inside = False

    return Intermixed


def _layout_fit(args: argparse.Namespace, op: str, size_bytes: int, observed_s: float) -> tuple[Fit, MeasuredPlacement]:
    """The ranks placed on SOURCE once, as every judgement of a measured figure places them
    (:func:`topo.layout.measured.place_measured`), priced against the observed time."""
    from linkscope.source import open_source
    from linkscope.topo.cost.groups import GroupPricer
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.layout.measured import place_measured

    snapshot = open_source(args.source)
    if not snapshot.hosts or not snapshot.host.gpus:
        raise InputError(f"{args.source}: the snapshot describes no GPU to place ranks on")
    visible = parse_visible_devices(args.visible_devices) if args.visible_devices is not None else None
    measured = place_measured(args.ranks, snapshot, nodes=args.nodes, distribution=args.distribution, devices=visible,
                              named_by="the command line names")
    if measured.placement is None:
        raise InputError(f"{args.source}: the ranks do not fit: {measured.line}")
    links = GroupPricer(measured.placement, CostModel()).links(range(args.ranks))
    return fit(op, Scenario(f"this layout on {snapshot.source or 'SOURCE'}", links), size_bytes, observed_s,
               args.algo), measured


def run(args: argparse.Namespace) -> int:
    """Explain the observed time; print the fits (or JSON)."""
    from linkscope.topo.common.sizes import parse_size_bytes
    from linkscope.topo.cost.collectives import parse_alpha_beta

    op = parse_op(args.op, "explain")
    size_bytes = parse_size_bytes(args.bytes, "--bytes")
    if size_bytes < 1:
        raise InputError("--bytes: must be at least 1 byte")
    if args.ranks < 2:
        raise InputError(f"--ranks: a collective needs at least 2 ranks, got {args.ranks}")
    observed_s = parse_duration_s(args.time, "--time")
    scenarios = what_if_scenarios(args.ranks, parse_alpha_beta(args.intra, "--intra"), parse_alpha_beta(args.inter, "--inter"),
                                  parse_alpha_beta(args.pcie, "--pcie"))
    fits = explain(op, size_bytes, args.ranks, observed_s, scenarios, args.algo)
    layout: tuple[Fit, MeasuredPlacement] | None = None
    if args.source is not None:
        layout = _layout_fit(args, op, size_bytes, observed_s)
    elif args.nodes is not None or args.visible_devices is not None or args.distribution != "block":
        raise InputError("--nodes, --distribution and --visible-devices place ranks on a SOURCE: name one")
    busbw = observed_busbw_gbps(op, size_bytes, args.ranks, observed_s)
    if args.json:
        payload: dict[str, Any] = {"op": op, "size_bytes": size_bytes, "ranks": args.ranks, "observed_s": observed_s,
                                   "observed_busbw_gbps": busbw, "best": fits[0].to_json(),
                                   "scenarios": [each.to_json() for each in fits], "layout": None}
        if layout is not None:
            payload["layout"] = {**layout[0].to_json(), "placement": layout[1].line, "assumed": layout[1].assumed}
        say(json_text(payload), block=True)
    else:
        _print(op, size_bytes, args.ranks, observed_s, busbw, fits, layout)
    return verdicts_status([layout[0].verdict] if layout is not None else [], args.fail_on)


def _print(op: str, size_bytes: int, ranks: int, observed_s: float, busbw: float, fits: list[Fit],
           layout: tuple[Fit, MeasuredPlacement] | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import console as safe_console
    from linkscope.topo.common.sizes import format_size_bytes
    from linkscope.topo.common.units import format_seconds

    console = safe_console()
    console.print(Text(f"{op} of {format_size_bytes(size_bytes)} over {ranks} ranks in {format_seconds(observed_s)}: "
                       f"busbw {format_gbps(busbw, '.3g')}", style="bold"))
    best = fits[0]
    console.print(Text(f"Best explained by {best.scenario.name}: {describe_fit(best)}."))
    if best.speed_ratio > 2:
        console.print(Text("No placement is that fast: check the timing (a call timed without synchronising the GPU "
                           "returns before the data moved) and the size.", style="bold"))
    fastest = min(fits, key=lambda each: each.cost.time_s)
    if fastest is not best:
        console.print(Text(f"With {fastest.scenario.name} it would take {format_seconds(fastest.cost.time_s)} "
                           f"({observed_s / fastest.cost.time_s:.3g}x faster)."))
    table = Table(title="what-if placements, nearest first", title_justify="left", show_edge=False)
    for column in ("placement and links", "algo", "predicted", "observed / predicted"):
        table.add_column(column, justify="left" if column in ("placement and links", "algo") else "right")
    for each in fits:
        table.add_row(Text(each.scenario.name), each.cost.algo, format_seconds(each.cost.time_s),
                      f"{observed_s / each.cost.time_s:.3g}x")
    console.print(table)
    if layout is not None:
        each, placement = layout
        console.print(Text(f"\nplaced: {placement.line}"))
        console.print(Text(f"On {each.scenario.name.removeprefix('this layout on ')} the group crosses "
                           f"{link_name(each.scenario.links)}: {describe_fit(each)}."))
        if each.verdict in ("slow", "far below"):
            console.print(Text(f"Verdict: {each.verdict} - the time points at a slow link: "
                               f"{link_name(each.scenario.links)} (or what shares it) delivers about "
                               f"{each.speed_ratio:.0%} of what it should.", style="bold"))
        elif each.fits:
            console.print(Text("Verdict: ok - the time fits the links this layout crosses."))
        else:
            console.print(Text(f"Verdict: faster than the links this layout crosses allow ({each.speed_ratio:.3g}x): the "
                               "ranks do not sit where this layout puts them, the timing stopped early, or this machine's "
                               "links are faster than the source says (a topology text does not give NIC rates).",
                               style="bold"))
