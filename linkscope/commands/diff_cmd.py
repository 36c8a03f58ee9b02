"""`linkscope diff A B` and `linkscope diff --odd-one-out FILE...`: what differs between machines.

Compared: GPUs, links and NVLink counts, P2P, PCIe width and generation, NICs (presence, state, rate,
NUMA node), NUMA nodes, versions, IOMMU / peer-memory / fabric state, and measured bandwidth beyond
noise (10%). Exit status: 0 no difference (no odd host), 1 differences (an odd host), 2 bad input.
`--odd-one-out --json` prints `hosts`, `odd` (a list of {`host`, `differences`}) and `split`.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_fail_on_flag, add_json_flag, difference_severity, findings_status
from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.machine.compare import Difference, OddReport, diff_snapshots, members_of, odd_one_out, shown_value
from linkscope.topo.model.snapshot import Snapshot

SHOWN_PER_HOST = 20
"""Differences listed per odd host in the text output (`--json` has them all)."""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `diff` subcommand."""
    parser = subparsers.add_parser(
        "diff",
        help="what differs between two snapshots, or which host of many is the odd one out",
        description=(
            "Compare two snapshots (one machine over time, or two machines of one kind): GPUs, links and NVLink\n"
            "counts, P2P, PCIe width and generation, NICs, NUMA, versions, IOMMU / nvidia_peermem / fabric state,\n"
            "and measured bandwidth beyond 10% noise; each difference says whether it is for the worse.\n"
            "--odd-one-out compares many host snapshots and names the host(s) that differ from the majority."
        ),
        epilog=(
            "examples:\n"
            "  linkscope diff sample:dgx-h100 sample:dgx-h100-degraded\n"
            "  linkscope diff box-last-week.json box.json --json\n"
            "  linkscope diff --odd-one-out hosts/*.json\n"
            "exit status: 0 nothing at or above --fail-on, 1 something is (by default: a difference for the worse, "
            "or an odd host), 2 bad input"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="two snapshots (files, sample:NAME), or with --odd-one-out three or more")
    parser.add_argument("--odd-one-out", action="store_true",
                        help="compare every host of the given snapshots and name those that differ from the majority")
    add_fail_on_flag(parser, "exit 1 when a difference is at or above this severity: one for the worse (and every "
                     "odd host) is a warning, any other an info (default warning)")
    add_json_flag(parser, "print one JSON object")
    parser.set_defaults(run=run)


def _load(spec: str) -> Snapshot:
    from linkscope.topo.formats.source import load_source

    return load_source(spec)


def run(args: argparse.Namespace) -> int:
    """Diff two snapshots, or find the odd host among many."""
    if args.odd_one_out:
        return _run_odd(args)
    if len(args.sources) != 2:
        raise InputError(f"diff: give two snapshots to compare (got {len(args.sources)}); "
                         "for more, use --odd-one-out")
    first, second = (_load(spec) for spec in args.sources)
    differences = diff_snapshots(first, second)
    if args.json:
        _dump({"a": args.sources[0], "b": args.sources[1],
               "differences": [difference.to_json() for difference in differences]})
    else:
        _print_diff(args.sources, first, second, differences)
    return findings_status((difference_severity(difference.worse) for difference in differences), args.fail_on)


def _run_odd(args: argparse.Namespace) -> int:
    with collector_paused():  # a thousand snapshots: millions of objects that live on, and no cycles
        members = members_of((spec, _load(spec)) for spec in args.sources)
    if len(members) < 3:
        raise InputError(f"diff --odd-one-out: needs 3 or more hosts to find a majority (got {len(members)}); "
                         "compare two with `linkscope diff A B`")
    report = odd_one_out(members)
    if args.json:
        _dump({
            "hosts": report.hosts,
            "odd": [{"host": label, "differences": [d.to_json("majority", "value") for d in found]}
                    for label, found in report.odd],
            "split": list(report.split),
        })
    else:
        _print_odd(report)
    return findings_status(["warning" for _ in report.odd], args.fail_on)


def _dump(data: dict[str, Any]) -> None:
    say(json_text(data), block=True)


def _verdict(difference: Difference) -> str:
    return {True: "worse", False: "better", None: ""}[difference.worse]


def _print_diff(names: list[str], first: Snapshot, second: Snapshot, differences: list[Difference]) -> None:
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import table_console

    console = table_console()
    for label, name, snapshot in (("A", names[0], first), ("B", names[1], second)):
        hosts = ", ".join(host.hostname or "?" for host in snapshot.hosts)
        console.print(Text(f"{label}: {name} ({hosts})"))
    if not differences:
        console.print(Text("No differences.", style="green"))
        return
    table = Table(title=f"{len(differences)} difference(s)", title_justify="left", show_edge=False)
    for column in ("what", "A", "B", ""):
        table.add_column(column)
    for difference in differences:
        table.add_row(Text(difference.what), Text(shown_value(difference.before)), Text(shown_value(difference.after)),
                      Text(_verdict(difference), style="bold red" if difference.worse else ""))
    console.print(table)


def _print_odd(report: OddReport) -> None:
    from rich.text import Text

    from linkscope.render.console import table_console

    console = table_console()
    console.print(Text(f"{report.hosts} hosts compared."))
    if not report.odd:
        console.print(Text("No odd one out: every host matches the majority.", style="green"))
    for label, found in report.odd:
        console.print(Text(f"{label}: {len(found)} difference(s) from the majority", style="bold"))
        for difference in found[:SHOWN_PER_HOST]:
            line = Text(f"  {difference.what}: {shown_value(difference.after)} (majority: {shown_value(difference.before)})")
            if difference.worse:
                line.append("  worse", style="bold red")
            console.print(line)
        if len(found) > SHOWN_PER_HOST:
            console.print(Text(f"  ... and {len(found) - SHOWN_PER_HOST} more (--json lists all)"))
    if report.split:
        shown = ", ".join(report.split[:8]) + (", ..." if len(report.split) > 8 else "")
        console.print(Text(f"No majority (hosts split) on {len(report.split)} fact(s): {shown}", style="yellow"))
