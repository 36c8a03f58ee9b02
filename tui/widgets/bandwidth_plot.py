"""A text plot of bandwidth against message size: one bar per size, log-spaced as measured."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.units import format_gbps

EIGHTHS = " ▁▂▃▄▅▆▇█"
"""Block characters from empty to full, in eighths of a cell."""


EXPECTED_MARK = "◂"
"""Drawn beside a bar at the height of what the model expects for that size."""


def plot_lines(points: tuple[tuple[int, float], ...], height: int, bar_width: int = 3,
               expected: tuple[tuple[int, float], ...] = (), width: int | None = None) -> list[str]:
    """The plot as `height` text lines (bars, tallest first) plus an axis line of sizes.

    `points` are (size_bytes, GB/s) in size order; each bar is `bar_width` cells wide and its
    height is proportional to the bandwidth, in eighths of a line. `expected` (size_bytes, GB/s)
    puts :data:`EXPECTED_MARK` right of the bar of that size, on the line its figure reaches.
    With `width`, no line is wider than that: bars narrow to fit (see :func:`fit_points`).
    """
    if not points or height < 1:
        return []
    if width is not None:
        points, bar_width = fit_points(points, width, bar_width)
    marks = dict(expected)
    peak = max([gbps for _, gbps in points] + [marks.get(size, 0.0) for size, _ in points]) or 1.0
    lines: list[str] = []
    for row in range(height, 0, -1):
        cells = []
        for size, gbps in points:
            eighths = round(gbps / peak * height * 8)
            filled = min(max(eighths - (row - 1) * 8, 0), 8)
            mark = size in marks and max(1, -(-round(marks[size] / peak * height * 8) // 8)) == row
            gap = EXPECTED_MARK if mark else " "
            cells.append(EIGHTHS[filled] * (bar_width - 1) + gap if bar_width > 1 else EIGHTHS[filled])
        lines.append("".join(cells))
    first, last = format_size_bytes(points[0][0]), format_size_bytes(points[-1][0])
    plot_width = len(points) * bar_width
    axis = first + " " * max(plot_width - len(first) - len(last), 1) + last
    if width is not None and len(axis) > width:
        axis = first[:width]
    lines.append(axis)
    return lines


def fit_points(points: tuple[tuple[int, float], ...], width: int,
               bar_width: int = 3) -> tuple[tuple[tuple[int, float], ...], int]:
    """The points to draw in `width` columns and the bar width: bars narrow down to one column, then
    only every k-th size is drawn (the first and the last always), so a long sweep never wraps."""
    width = max(width, 1)
    if len(points) * bar_width <= width:
        return points, bar_width
    if len(points) * 2 <= width:
        return points, 2
    if len(points) <= width:
        return points, 1
    step = -(-(len(points) - 1) // max(width - 1, 1))
    kept = points[::step]
    if kept[-1] != points[-1]:
        kept = (*kept[: width - 1], points[-1])
    return kept, 1


class BandwidthPlot(Widget):
    """Bars of GB/s per size; the parent sets `points` and `title`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"bandwidth-plot--bar", "bandwidth-plot--axis"}

    points: reactive[tuple[tuple[int, float], ...]] = reactive(())
    """(size_bytes, GB/s) per measured size, in size order."""
    expected: reactive[tuple[tuple[int, float], ...]] = reactive(())
    """(size_bytes, GB/s) the cost model expects per size; drawn as marks beside the bars."""
    title: reactive[str] = reactive("")
    """What the bars show, e.g. `all_reduce busbw`."""
    empty_message: reactive[str] = reactive("No results yet: run a benchmark to plot bandwidth against size.")
    """What the plot says while it has no points."""

    def render(self) -> Text:
        """Title with the peak, the bars, and the size axis."""
        if not self.points:
            return Text(self.empty_message)
        peak = max(gbps for _, gbps in self.points)
        width = max(self.content_size.width, 1)
        shown, bar_width = fit_points(self.points, width)
        every = f", {len(shown)} of {len(self.points)} sizes" if len(shown) < len(self.points) else ""
        marked = f", {EXPECTED_MARK} expected" if self.expected and bar_width > 1 else ""
        facts = f"peak {format_gbps(peak, '.1f')}{marked}{every}"
        title = f"{self.title}  ({facts})" if len(self.title) + len(facts) + 4 <= width else f"{self.title}\n{facts}"
        # bars never wrap: a wrapped bar row would fall on the next line and the plot would read wrong
        text = Text(title + "\n", style="bold", no_wrap=True, overflow="crop")
        bar_style = self.get_component_rich_style("bandwidth-plot--bar", partial=True)
        axis_style = self.get_component_rich_style("bandwidth-plot--axis", partial=True)
        height = max(self.content_size.height - 1 - title.count("\n") - 1, 1)
        lines = plot_lines(self.points, height, expected=self.expected, width=width)
        for line in lines[:-1]:
            text.append(line + "\n", style=bar_style)
        text.append(lines[-1], style=axis_style)
        return text
