"""Expected next to measured on the console: the cells each result table adds, a table of its own,
and the lines that say what calibration changed. Every command renders :mod:`topo.cost.expect` through here."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.expect import Expected, placement_lines, summary, worst_rows

VERDICT_STYLES: dict[str, str] = {"ok": "", "slow": "bold yellow", "far below": "bold red",
                                  "faster than model": "bold magenta"}

EXPECTED_COLUMNS: tuple[str, ...] = ("expect", "ratio", "verdict")
"""The columns a result table adds for its expectation."""


def expected_cells(expected: Expected | None) -> tuple[str, str, Text]:
    """The expected GB/s, the ratio and the verdict of one row (dashes where unknown)."""
    if expected is None or expected.expected_gbps is None:
        return "-", "-", Text("-")
    ratio = expected.ratio
    name = expected.verdict
    label = name if name is not None else "not judged"
    return (f"{expected.expected_gbps:.3g}" if expected.expected_gbps < 100 else f"{expected.expected_gbps:.0f}",
            "-" if ratio is None else f"{ratio:.2f}", Text(label, style=VERDICT_STYLES.get(label, "dim")))


def add_expected_columns(table: Table) -> None:
    """Add the expectation columns to a result table."""
    for column in EXPECTED_COLUMNS:
        table.add_column(column, justify="left" if column == "verdict" else "right", no_wrap=True)


def expected_table(rows: Sequence[Expected], title: str) -> Table:
    """A table of rows next to their expectations: what, link, measured, expected, ratio, verdict."""
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("measured", "link", "GB/s"):
        table.add_column(column, justify="right" if column == "GB/s" else "left", overflow="fold")
    add_expected_columns(table)
    for row in rows:
        table.add_row(Text(row.subject), Text(row.link), f"{row.measured_gbps:.3g}" if row.measured_gbps < 100
                      else f"{row.measured_gbps:.0f}", *expected_cells(row))
    return table


def print_verdict_summary(console: Console, asked: Sequence[Expected | None], against: str) -> None:
    """How the judged rows compare with what `against` should deliver: where the ranks were placed, the
    counts, and the decisive rows (the most bytes moved among those off the model), each with the part of its
    path the shortfall points at. `asked` holds every row the model was asked about, None where it could not
    price one (counted as not judged)."""
    rows = [row for row in asked if row is not None]
    for line in placement_lines(rows):
        console.print(Text(f"placed: {line}"))
    judged = any(row.verdict is not None for row in rows)
    console.print(Text(f"against what the cost model expects on {against}: {summary(asked)}",
                       style="" if judged else "bold yellow"))
    for row in worst_rows(rows):
        part = f" ({row.limiting_part})" if row.limiting_part not in ("", row.limited_by) else ""
        where = f" [limited by {row.limited_by}{part}: {' -> '.join(row.path)}]" if row.path else ""
        console.print(Text(f"  {row.verdict}: {row.subject} over {row.link}{where}: {row.metric} "
                           f"{format_gbps(row.measured_gbps, '.3g')}, model {row.expected_gbps:.3g} ({row.ratio:.0%})"
                           + (f"; {row.note}" if row.note else ""),
                           style=VERDICT_STYLES[row.verdict or "ok"]))
