"""A text plot of bandwidth against message size: one bar per size, log-spaced as measured."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from topo.sizes import format_size_bytes

EIGHTHS = " ▁▂▃▄▅▆▇█"
"""Block characters from empty to full, in eighths of a cell."""


EXPECTED_MARK = "◂"
"""Drawn beside a bar at the height of what the model expects for that size."""


def plot_lines(points: tuple[tuple[int, float], ...], height: int, bar_width: int = 3,
               expected: tuple[tuple[int, float], ...] = ()) -> list[str]:
    """The plot as `height` text lines (bars, tallest first) plus an axis line of sizes.

    `points` are (size_bytes, GB/s) in size order; each bar is `bar_width` cells wide and its
    height is proportional to the bandwidth, in eighths of a line. `expected` (size_bytes, GB/s)
    puts :data:`EXPECTED_MARK` right of the bar of that size, on the line its figure reaches.
    """
    if not points or height < 1:
        return []
    marks = dict(expected)
    peak = max([gbps for _, gbps in points] + [marks.get(size, 0.0) for size, _ in points]) or 1.0
    lines: list[str] = []
    for row in range(height, 0, -1):
        cells = []
        for size, gbps in points:
            eighths = round(gbps / peak * height * 8)
            filled = min(max(eighths - (row - 1) * 8, 0), 8)
            mark = size in marks and max(1, -(-round(marks[size] / peak * height * 8) // 8)) == row
            cells.append(EIGHTHS[filled] * (bar_width - 1) + (EXPECTED_MARK if mark else " "))
        lines.append("".join(cells))
    first, last = format_size_bytes(points[0][0]), format_size_bytes(points[-1][0])
    width = len(points) * bar_width
    axis = first + " " * max(width - len(first) - len(last), 1) + last
    lines.append(axis)
    return lines


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
        marked = f", {EXPECTED_MARK} expected" if self.expected else ""
        text = Text(f"{self.title}  (peak {peak:.1f} GB/s{marked})\n", style="bold")
        bar_style = self.get_component_rich_style("bandwidth-plot--bar", partial=True)
        axis_style = self.get_component_rich_style("bandwidth-plot--axis", partial=True)
        lines = plot_lines(self.points, max(self.size.height - 3, 1), expected=self.expected)
        for line in lines[:-1]:
            text.append(line + "\n", style=bar_style)
        text.append(lines[-1], style=axis_style)
        return text
