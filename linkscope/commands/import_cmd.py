"""`linkscope import FILE`: read other tools' results (nccl-tests, nvbandwidth, p2pBandwidthLatencyTest)."""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_fail_on_flag, add_force_flag, add_json_flag, add_output_flag, asked_rows, findings_status
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.cost.expect import RowExpectations, judged_counts, placement_lines, row_expectations, severities
from linkscope.topo.model.measurements import Measurements


def register(subparsers: Any) -> None:
    """Add the `import` subcommand."""
    parser = subparsers.add_parser(
        "import",
        help="read nccl-tests, nvbandwidth or p2pBandwidthLatencyTest output into Measurements",
        description="Read results you already have into linkscope Measurements: nccl-tests logs (any collective, "
        "table formats since 2019, several runs or ranks in one file, tails without a header, NCCL log lines "
        "between rows), nvbandwidth matrices and p2pBandwidthLatencyTest output, also fragments. The format is "
        "detected from the content; launcher/logging prefixes, colours and quotes are ignored. The op of an "
        "nccl-tests table comes from its command line, nccl-tests' own header, --op, or its columns, and the "
        "output says which. A table that does not read cleanly is rejected with file:line. "
        "With --expect SOURCE (or --attach SOURCE) every row is shown next to what the cost model expects on SOURCE "
        "(expected GB/s, measured/expected, verdict ok / slow / far below / faster than model), its ranks placed "
        "once (said in one line) and the part of the path that limits it; measurements of a different kind of "
        "machine (another GPU model, more GPUs than SOURCE has) are refused unless --force. Exit status with "
        "--expect: 1 when a row is at or above --fail-on (far below: error; slow, faster than model: warning) or "
        "when no row could be judged (a warning).",
        epilog="example: linkscope import all_reduce.log --attach sample:dgx-h100 -o box.json",
    )
    parser.add_argument("file", metavar="FILE", help="a text file, or - for stdin")
    parser.add_argument("--op", default=None, metavar="OP",
                        help="collective of every nccl-tests table (overrides what the log says; all_reduce, "
                        "all_gather, reduce_scatter, all_to_all, broadcast, reduce or send_recv)")
    add_json_flag(parser, "print Measurements JSON instead of tables")
    add_output_flag(parser, "write Measurements JSON to OUT")
    parser.add_argument("--attach", default=None, metavar="SOURCE",
                        help="compare every row with what SOURCE should deliver; with -o: write SOURCE's snapshot "
                        "carrying these measurements instead (opens in the app)")
    parser.add_argument("--expect", default=None, metavar="SOURCE",
                        help="compare every row with what SOURCE should deliver (default: the --attach SOURCE)")
    add_force_flag(parser, "attach measurements of a different kind of machine anyway")
    add_fail_on_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read, then print tables or JSON, and write -o."""
    from linkscope.files import check_measured_on, load_measurements, open_output, write_measurements
    from linkscope.topo.model.codec import to_jsonable
    from linkscope.topo.model.snapshot import SCHEMA_VERSION

    attached = open_output(args)
    measurements = load_measurements(args.file, args.op)
    expected = RowExpectations()
    if attached is not None:
        check_measured_on(attached, measurements, args.force, "--attach")
    against = attached
    if args.expect is not None:
        from linkscope.source import open_source

        against = open_source(args.expect)
        check_measured_on(against, measurements, args.force, "--expect")
    if against is not None:
        expected = row_expectations(measurements, against)
    if args.output:
        write_measurements(args.output, measurements, attached)
        what = f"{attached.source}'s snapshot carrying the measurements" if attached is not None else "measurements"
        say(f"{what} written to {args.output}", stderr=True)
    if args.json:
        payload: dict[str, Any] = {"schema": SCHEMA_VERSION, "measurements": to_jsonable(measurements)}
        if against is not None:
            payload["expected_on"] = against.source
            payload["expected"] = [row.to_json() for row in expected.all()]
            payload["judged"] = judged_counts(asked_rows(expected))
            payload["placement"] = placement_lines(expected.all())
        say(json_text(payload), block=True)
    else:
        _print(measurements, expected, against.source if against is not None else None)
    if against is None:
        return 0
    return findings_status(severities(asked_rows(expected)), args.fail_on)


def _print(measurements: Measurements, expected: RowExpectations, against: str | None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import table_console
    from linkscope.render.expected import add_expected_columns, expected_cells, print_verdict_summary
    from linkscope.topo.common.sizes import format_size_bytes
    from linkscope.topo.model.provenance import describe

    console = table_console()
    console.print(Text(measurements.source, style="bold"))
    console.print(Text(f"measured on {describe(measurements.identity)}"))
    compare = against is not None
    if measurements.collectives:
        table = Table(title="collectives (time us, bandwidth GB/s)", box=box.SIMPLE_HEAD)
        grouped = any(row.group for row in measurements.collectives)
        columns = ("from",) * grouped + ("op", "op from", "size", "dtype", "ranks", "ranks from", "place", "time",
                                         "algbw", "busbw", "wrong")
        cell_rows: list[tuple[dict[str, Text | str], tuple[Any, ...]]] = []
        for row, expect in zip(measurements.collectives, expected.collectives or [None] * len(measurements.collectives),
                               strict=True):
            cells: dict[str, Text | str] = {
                "from": Text(row.group or "-"), "op": Text(row.op), "op from": Text(row.op_source or "-"),
                "size": format_size_bytes(row.size_bytes), "dtype": Text(row.dtype), "ranks": str(row.nranks or "?"),
                "ranks from": Text(row.nranks_source or "-"), "place": "in" if row.in_place else "out",
                "time": f"{row.time_us:g}", "algbw": f"{row.algbw_gbps:.2f}", "busbw": f"{row.busbw_gbps:.2f}",
                "wrong": "N/A" if row.wrong is None else str(row.wrong)}
            cell_rows.append((cells, expected_cells(expect) if compare else ()))
        # every column at its widest cell, 3 characters of padding each (the expectation columns ~26 in all)
        needed = sum(max(len(column), *(len(str(cells[column])) for cells, _ in cell_rows)) + 3 for column in columns)
        narrow = needed + (26 if compare else 0) > console.width
        shown = [column for column in columns if not (narrow and column in NARROW_LEFT_OUT)]
        for column in shown:
            table.add_column(column, justify="left" if column in ("from", "op", "op from", "dtype", "ranks from", "place")
                             else "right", no_wrap=True)
        if compare:
            add_expected_columns(table)
        rows: list[list[Text | str]] = [[*(cells[column] for column in shown), *extra] for cells, extra in cell_rows]
        for index, name in enumerate(shown):
            if name in ("op", "from"):  # names are not cut either
                table.columns[index].min_width = max(len(str(row[index])) for row in rows)
        if narrow:
            console.print(Text(f"(too narrow for every column: {', '.join(NARROW_LEFT_OUT)} left out; --json or a wider "
                               "terminal has them)", style="dim"))
        _add_rows(table, rows)
        console.print(table)
    if measurements.peer_copies:
        copies = [[str(copy.src), str(copy.dst), {True: "yes", False: "no", None: "?"}[copy.p2p_enabled],
                   _fmt(copy.unidir_gbps), _fmt(copy.bidir_gbps), _fmt(copy.latency_us)] for copy in measurements.peer_copies]
        console.print(_copies_table("GPU peer copies", ("src", "dst", "p2p", "uni (GB/s)", "bi (GB/s)", "latency (us)"),
                                    copies, expected.peer_copies if compare else None))
    if measurements.host_copies:
        copies = [[str(host.gpu), host.direction, f"{host.gbps:.2f}"] for host in measurements.host_copies]
        console.print(_copies_table("host <-> GPU copies", ("GPU", "direction", "GB/s"), copies,
                                    expected.host_copies if compare else None))
    if against is not None:
        print_verdict_summary(console, asked_rows(expected), against)
    else:
        console.print(Text("note: --expect SOURCE (or --attach) compares every row with what that machine should deliver"))
    for note in measurements.notes:
        console.print(Text(f"note: {note}"))


def _copies_table(title: str, columns: tuple[str, ...], rows: list[list[Any]], expected: Any) -> Any:
    """A table of copy rows; with `expected` (one expectation or None per row) the link and expectation columns."""
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.expected import add_expected_columns, expected_cells

    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right")
    if expected is not None:
        table.add_column("link")
        add_expected_columns(table)
        expectations = expected or [None] * len(rows)
        rows = [[*row, Text(expect.link if expect else "?"), *expected_cells(expect)]
                for row, expect in zip(rows, expectations, strict=True)]
    _add_rows(table, rows)
    return table


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


NARROW_LEFT_OUT = ("op from", "dtype", "ranks from", "place", "algbw", "wrong")
"""Columns the collectives table leaves out when the terminal is too narrow for all (--json keeps them)."""


def _add_rows(table: Any, rows: list[list[Any]]) -> None:
    """Add `rows` to `table`, its number columns sized so no measured figure is cut short."""
    from linkscope.render.tables import fit_numbers

    fit_numbers(table, rows)
    for row in rows:
        table.add_row(*row)
