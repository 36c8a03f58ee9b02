"""The rank map: nodes x GPUs, each cell the global rank placed there, coloured by its group.

A :class:`~tui.widgets.cell_grid.CellGrid`, so only visible lines are drawn: a 1,024-node
cluster (8,192 cells) costs no more per frame than a single box.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip

from linkscope.tui.widgets.cell_grid import CellGrid

GROUP_COLOURS = 6
"""Number of distinct group colours; group i uses `rank-map--g{i % GROUP_COLOURS}`."""
GROUP_PATTERNS: tuple[Style, ...] = (Style(), Style(underline=True), Style(italic=True), Style(bold=True),
                                     Style(underline=True, italic=True), Style(underline=True, bold=True))
"""Text styles that tell apart groups of the same colour: group i has pattern `(i // GROUP_COLOURS) % len(...)`, so
13 groups are 13 distinct looks, not colour alone repeating; the status line names the group under the cursor."""


def group_style(group: int) -> tuple[str, Style]:
    """The colour class and the text pattern of group `group`."""
    return f"rank-map--g{group % GROUP_COLOURS}", GROUP_PATTERNS[(group // GROUP_COLOURS) % len(GROUP_PATTERNS)]


class RankMap(CellGrid):
    """Rows are nodes, columns GPU positions; Enter or a click picks the rank on a cell."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"rank-map--g{index}" for index in range(GROUP_COLOURS)),
        "rank-map--picked",
        "rank-map--empty",
    }

    class RankUnderCursor(Message):
        """The cursor moved onto a cell: the parent names the rank's group (colour alone does not)."""

        def __init__(self, rank: int) -> None:
            self.rank = rank
            super().__init__()

    class RankPicked(Message):
        """Enter or a click on a cell picked the rank placed there."""

        def __init__(self, rank: int) -> None:
            self.rank = rank
            super().__init__()

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._gpus = 0
        self._rank_at: list[int] = []
        self._group_of_rank: Sequence[int] = ()
        self.picked_group: int | None = None
        self._style_of_group: dict[int, Style] = {}
        """Styles of the groups met so far in the frame being drawn: a screenful shows a few groups in some 200
        cells, redrawn on every keystroke in the form, and each cell composed its group's style anew."""

    def show(self, labels: list[str], gpus_per_node: int, rank_at: list[int], group_of_rank: Sequence[int]) -> None:
        """Set the map: `rank_at[node * gpus_per_node + gpu]` is a rank or -1; `group_of_rank[rank]` its group."""
        self._gpus = gpus_per_node
        self._rank_at = rank_at
        self._group_of_rank = group_of_rank
        self._style_of_group.clear()
        self.set_shape(labels, [str(gpu) for gpu in range(gpus_per_node)], len(str(max(rank_at, default=0))) + 2)

    def set_picked_group(self, group: int | None) -> None:
        """Mark the cells of group `group` (of the colouring dimension), or none."""
        self.picked_group = group
        self._style_of_group.clear()
        self.refresh()

    def rank_at(self, node: int, gpu: int) -> int:
        """The rank on (node, gpu), or -1 when none."""
        index = node * self._gpus + gpu
        if 0 <= gpu < self._gpus and 0 <= index < len(self._rank_at):
            return self._rank_at[index]
        return -1

    def render_lines(self, crop: Region) -> list[Strip]:
        """A frame starts with the groups' styles read afresh (the theme or the picked group may have changed)."""
        self._style_of_group.clear()
        return super().render_lines(crop)

    def render_cell(self, row: int, column: int) -> tuple[str, Style]:
        """The rank, coloured by its group; the picked group in reverse."""
        rank = self.rank_at(row, column)
        if rank < 0:
            return "-", self.get_component_rich_style("rank-map--empty")
        group = self._group_of_rank[rank] if rank < len(self._group_of_rank) else -1
        if group < 0:
            return str(rank), self.get_component_rich_style("rank-map--empty")
        style = self._style_of_group.get(group)
        if style is None:
            style = self._style_of_group[group] = self._group_rich_style(group)
        return str(rank), style

    def _group_rich_style(self, group: int) -> Style:
        """Group `group`'s colour and pattern, reversed when it is the picked group."""
        colour, pattern = group_style(group)
        style = self.get_component_rich_style(colour) + pattern
        if self.picked_group is not None and group == self.picked_group:
            style = style + self.get_component_rich_style("rank-map--picked", partial=True)
        return style

    def cursor_moved(self, row: int, column: int) -> None:
        """Tell the parent which rank the cursor is on."""
        rank = self.rank_at(row, column)
        if rank >= 0:
            self.post_message(self.RankUnderCursor(rank))

    def cell_selected(self, row: int, column: int) -> None:
        """Pick the rank on the cell (the parent draws its group)."""
        rank = self.rank_at(row, column)
        if rank >= 0:
            self.post_message(self.RankPicked(rank))
