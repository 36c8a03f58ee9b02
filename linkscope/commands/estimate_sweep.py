"""`linkscope estimate OP --ranks N --sweep MIN:MAX`: the estimate over a range of sizes, as a table and a
text plot of each algorithm's bus bandwidth (flat ring against hierarchical, where both apply).

Small sizes are latency-bound, so an algorithm with fewer steps gains most there; large sizes are
bandwidth-bound and every algorithm approaches its floor. JSON (`--json`): `op`, `ranks`, `nodes`,
`sizes` (each `size_bytes`, `algo` (the cheapest), `time_s`, `busbw_gbps`, and `algorithms`: name ->
`time_s`, `busbw_gbps`).
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_SWEEP_SIZES
from linkscope.topo.common.sizes import format_size_bytes, geometric_sizes, parse_size_bytes
from linkscope.topo.common.text import say
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.collectives import GroupLinks, collective_cost
from linkscope.topo.model.busbw import bus_factor

SWEEP_FACTOR = 2
"""Sizes double from MIN to MAX, as nccl-tests' `-f 2`."""
PLOT_WIDTH = 40
PLOT_MARKS = {"ring": "#", "tree": "+", "hierarchical": "="}


def add_sweep_argument(parser: argparse.ArgumentParser) -> None:
    """Register `--sweep MIN:MAX` (it replaces `--bytes`)."""
    parser.add_argument("--sweep", default=None, metavar="MIN:MAX",
                        help="instead of --bytes: every size from MIN to MAX (doubling), as a table and a plot of "
                        "flat ring against hierarchical")
    for action in parser._actions:
        if action.dest == "bytes":
            action.required = False


def sweep_sizes(text: str) -> list[int]:
    """`1K:1G` as the sizes from 1 KiB to 1 GiB, doubling; InputError naming --sweep otherwise."""
    low_text, sep, high_text = text.partition(":")
    if not sep:
        raise InputError(f"--sweep: {text!r} is not MIN:MAX (example: 1K:1G)")
    low, high = parse_size_bytes(low_text, "--sweep MIN"), parse_size_bytes(high_text, "--sweep MAX")
    if low < 1 or high < low:
        raise InputError(f"--sweep: {text!r} needs 1 <= MIN <= MAX")
    sizes = geometric_sizes(low, high, SWEEP_FACTOR, MAX_SWEEP_SIZES)
    if len(sizes) > MAX_SWEEP_SIZES:
        raise InputError(f"--sweep: {text!r} spans more than {MAX_SWEEP_SIZES} sizes")
    return sizes


def run_sweep_if_asked(args: argparse.Namespace, op: str, links: GroupLinks) -> int | None:
    """Print the sweep over `links` and return the exit status when `--sweep` was given; None otherwise."""
    if args.sweep is None:
        return None
    if args.bytes is not None:
        raise InputError("--sweep replaces --bytes: give one of them")
    rows = sweep_rows(op, links, sweep_sizes(args.sweep))
    if args.json:
        from linkscope.topo.common.jsonio import json_text

        say(json_text({"op": op, "ranks": args.ranks, "nodes": args.nodes, "sizes": rows}), block=True)
    else:
        say("\n".join(sweep_lines(op, args.ranks, args.nodes, rows)), block=True)
    return 0


def sweep_rows(op: str, links: GroupLinks, sizes: list[int]) -> list[dict[str, Any]]:
    """Per size: the cheapest algorithm and every algorithm's time and busbw."""
    factor = bus_factor(op, links.ranks) if links.ranks > 1 else 0.0
    rows = []
    for size in sizes:
        algorithms: dict[str, dict[str, float]] = {}
        for algo in ("ring", "tree", "hierarchical"):
            try:
                cost = collective_cost(op, links, size, algo)
            except InputError:
                continue
            algorithms[algo] = {"time_s": cost.time_s, "busbw_gbps": size / cost.time_s / 1e9 * factor if cost.time_s else 0.0}
        best = collective_cost(op, links, size)
        rows.append({"size_bytes": size, "algo": best.algo, "time_s": best.time_s,
                     "busbw_gbps": algorithms.get(best.algo, {}).get("busbw_gbps", best.busbw_gbps), "algorithms": algorithms})
    return rows


def sweep_lines(op: str, ranks: int, nodes: int, rows: list[dict[str, Any]]) -> list[str]:
    """The table (time per algorithm, the cheapest) and the plot (busbw bars per algorithm), as text lines."""
    from linkscope.topo.common.units import format_seconds

    names = [name for name in ("ring", "tree", "hierarchical") if any(name in row["algorithms"] for row in rows)]
    lines = [f"{op} over {ranks} ranks on {nodes} node(s): time per call", ""]
    header = f"{'size':>9}  " + "  ".join(f"{name:>12}" for name in names) + "  cheapest"
    lines += [header, "-" * len(header)]
    for row in rows:
        cells = [format_seconds(row["algorithms"][name]["time_s"]) if name in row["algorithms"] else "-" for name in names]
        lines.append(f"{format_size_bytes(row['size_bytes']):>9}  " + "  ".join(f"{cell:>12}" for cell in cells)
                     + f"  {row['algo']}")
    peak = max((each["busbw_gbps"] for row in rows for each in row["algorithms"].values()), default=0.0) or 1.0
    legend = ", ".join(f"{PLOT_MARKS[name]} {name}" for name in names)
    lines += ["", f"busbw GB/s per size ({legend}; full width = {format_gbps(peak, '.3g')})"]
    for row in rows:
        for number, name in enumerate(names):
            if name not in row["algorithms"]:
                continue
            gbps = row["algorithms"][name]["busbw_gbps"]
            label = format_size_bytes(row["size_bytes"]) if number == 0 else ""
            bar = PLOT_MARKS[name] * max(1 if gbps > 0 else 0, round(gbps / peak * PLOT_WIDTH))
            lines.append(f"{label:>9} {bar:<{PLOT_WIDTH}} {gbps:.3g}")
    if "hierarchical" not in names:
        lines.append("(no hierarchical algorithm here: it needs several nodes with several ranks each)")
    return lines
