"""`linkscope import FILE`: read other tools' results (nccl-tests, nvbandwidth, p2pBandwidthLatencyTest)."""

from __future__ import annotations

import argparse
from typing import Any

from topo.model import Measurements


def register(subparsers: Any) -> None:
    """Add the `import` subcommand."""
    parser = subparsers.add_parser(
        "import",
        help="read nccl-tests, nvbandwidth or p2pBandwidthLatencyTest output into Measurements",
        description="Read results you already have into linkscope Measurements: nccl-tests logs (any collective, "
        "several runs in one file, truncated tables), nvbandwidth matrices and p2pBandwidthLatencyTest output. "
        "The format is detected from the content. A table that does not read cleanly is rejected with file:line.",
        epilog="example: linkscope import all_reduce.log --json > measurements.json",
    )
    parser.add_argument("file", metavar="FILE", help="a text file, or - for stdin")
    parser.add_argument("--op", default=None, help="collective of an nccl-tests table whose log does not name it")
    parser.add_argument("--json", action="store_true", help="print Measurements JSON instead of tables")
    parser.add_argument("-o", "--output", default=None, metavar="OUT", help="write Measurements JSON to OUT")
    parser.add_argument("--attach", default=None, metavar="SOURCE",
                        help="with -o: write SOURCE's snapshot carrying these measurements instead (opens in the app)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read, then print tables or JSON, and write -o."""
    from linkscope.files import load_measurements, open_output, write_measurements
    from topo.codec import measurements_to_json

    attached = open_output(args)
    measurements = load_measurements(args.file, args.op)
    if args.output:
        write_measurements(args.output, measurements, attached)
    if args.json:
        print(measurements_to_json(measurements))
    else:
        _print(measurements)
    return 0


def _print(measurements: Measurements) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import table_console
    from topo.sizes import format_size_bytes

    console = table_console()
    console.print(Text(measurements.source, style="bold"))
    if measurements.collectives:
        table = Table(title="collectives (time us, bandwidth GB/s)", box=box.SIMPLE_HEAD)
        for column in ("op", "size", "dtype", "ranks", "place", "time", "algbw", "busbw", "wrong"):
            table.add_column(column, justify="left" if column in ("op", "dtype", "place") else "right",
                             min_width=14 if column == "op" else None, no_wrap=column in ("op", "size"))
        for row in measurements.collectives:
            table.add_row(Text(row.op), format_size_bytes(row.size_bytes), Text(row.dtype), str(row.nranks or "?"),
                          "in" if row.in_place else "out", f"{row.time_us:g}", f"{row.algbw_gbps:.2f}",
                          f"{row.busbw_gbps:.2f}", "N/A" if row.wrong is None else str(row.wrong))
        console.print(table)
    if measurements.peer_copies:
        table = Table(title="GPU peer copies")
        for column in ("src", "dst", "p2p", "uni (GB/s)", "bi (GB/s)", "latency (us)"):
            table.add_column(column, justify="right")
        for copy in measurements.peer_copies:
            table.add_row(str(copy.src), str(copy.dst), {True: "yes", False: "no", None: "?"}[copy.p2p_enabled],
                          _fmt(copy.unidir_gbps), _fmt(copy.bidir_gbps), _fmt(copy.latency_us))
        console.print(table)
    if measurements.host_copies:
        table = Table(title="host <-> GPU copies")
        for column in ("GPU", "direction", "GB/s"):
            table.add_column(column, justify="right")
        for host in measurements.host_copies:
            table.add_row(str(host.gpu), host.direction, f"{host.gbps:.2f}")
        console.print(table)
    for note in measurements.notes:
        console.print(Text(f"note: {note}"))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
