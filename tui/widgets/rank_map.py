"""The rank map: nodes x GPUs, each cell the global rank placed there, coloured by its group.

Draws with the line API and renders only the visible lines, so a 1,024-node cluster (8,192 cells)
costs no more per frame than a single box.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

LABEL_MAX = 14
"""Node labels (host names) longer than this are shortened."""

GROUP_COLOURS = 6
"""Number of distinct group colours; group i uses `rank-map--g{i % GROUP_COLOURS}`."""


class RankMap(ScrollView, can_focus=True):
    """Rows are nodes, columns GPU positions; the cursor picks a cell, Enter picks its group."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"rank-map--g{index}" for index in range(GROUP_COLOURS)),
        "rank-map--picked",
        "rank-map--cursor",
        "rank-map--empty",
        "rank-map--label",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1, 0)", "Up", show=False),
        Binding("down", "move(1, 0)", "Down", show=False),
        Binding("left", "move(0, -1)", "Left", show=False),
        Binding("right", "move(0, 1)", "Right", show=False),
        Binding("pageup", "move(-10, 0)", "Page up", show=False),
        Binding("pagedown", "move(10, 0)", "Page down", show=False),
        Binding("enter", "pick", "Pick group"),
    ]

    cursor: reactive[tuple[int, int]] = reactive((0, 0))
    """(node, GPU position) under the cursor."""

    class RankPicked(Message):
        """Enter or a click on a cell picked the rank placed there."""

        def __init__(self, rank: int) -> None:
            self.rank = rank
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._labels: list[str] = []
        self._gpus = 0
        self._rank_at: list[int] = []
        self._group_of_rank: Sequence[int] = ()
        self.picked_group: int | None = None
        self._label_width = 6
        self._cell_width = 4

    def show(self, labels: list[str], gpus_per_node: int, rank_at: list[int], group_of_rank: Sequence[int]) -> None:
        """Set the map: `rank_at[node * gpus_per_node + gpu]` is a rank or -1; `group_of_rank[rank]` its group."""
        self._labels = [label if len(label) <= LABEL_MAX else label[: LABEL_MAX - 1] + "~" for label in labels]
        self._gpus = gpus_per_node
        self._rank_at = rank_at
        self._group_of_rank = group_of_rank
        self._label_width = max([6, *(len(label) for label in self._labels[:2048])]) + 1
        self._cell_width = max(3, len(str(max(rank_at, default=0)))) + 1
        self.virtual_size = Size(self._label_width + gpus_per_node * self._cell_width, len(labels) + 1)
        node, gpu = self.cursor
        self.cursor = (min(node, max(len(labels) - 1, 0)), min(gpu, max(gpus_per_node - 1, 0)))
        self.refresh()

    def set_picked_group(self, group: int | None) -> None:
        """Mark the cells of group `group` (of the colouring dimension), or none."""
        self.picked_group = group
        self.refresh()

    def rank_at(self, node: int, gpu: int) -> int:
        """The rank on (node, gpu), or -1 when none."""
        index = node * self._gpus + gpu
        if 0 <= gpu < self._gpus and 0 <= index < len(self._rank_at):
            return self._rank_at[index]
        return -1

    def render_line(self, y: int) -> Strip:
        """The header (y = 0, fixed) or one node's row; the label column stays put when scrolling sideways."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        label_style = self.get_component_rich_style("rank-map--label")
        base = self.rich_style
        if y == 0:
            label = Segment(" " * self._label_width, label_style)
            cells = [Segment(f"{gpu:>{self._cell_width - 1}} ", label_style) for gpu in range(self._gpus)]
        else:
            node = scroll_y + y - 1
            if node >= len(self._labels):
                return Strip.blank(width, base)
            label = Segment(f"{self._labels[node]:<{self._label_width}}", label_style)
            cells = [self._cell(node, gpu) for gpu in range(self._gpus)]
        body = Strip(cells).crop_extend(scroll_x, scroll_x + max(width - self._label_width, 0), base)
        return Strip.join([Strip([label]), body]).crop(0, width)

    def _cell(self, node: int, gpu: int) -> Segment:
        rank = self.rank_at(node, gpu)
        if rank < 0:
            style = self.get_component_rich_style("rank-map--empty")
            text = "-"
        else:
            group = self._group_of_rank[rank] if rank < len(self._group_of_rank) else -1
            style = self.get_component_rich_style(f"rank-map--g{group % GROUP_COLOURS}" if group >= 0 else "rank-map--empty")
            if self.picked_group is not None and group == self.picked_group:
                style = style + self.get_component_rich_style("rank-map--picked", partial=True)
            text = str(rank)
        if (node, gpu) == self.cursor and self.has_focus:
            style = style + self.get_component_rich_style("rank-map--cursor", partial=True)
        return Segment(f"{text:>{self._cell_width - 1}} ", style or Style())

    def watch_cursor(self, cursor: tuple[int, int]) -> None:
        """Keep the cursor's row and column in view."""
        node, gpu = cursor
        _, scroll_y = self.scroll_offset
        visible_rows = max(self.size.height - 1, 1)
        if node < scroll_y:
            self.scroll_to(y=node, animate=False)
        elif node >= scroll_y + visible_rows:
            self.scroll_to(y=node - visible_rows + 1, animate=False)
        left = gpu * self._cell_width
        visible_width = max(self.size.width - self._label_width, self._cell_width)
        if left < self.scroll_offset.x:
            self.scroll_to(x=left, animate=False)
        elif left + self._cell_width > self.scroll_offset.x + visible_width:
            self.scroll_to(x=left + self._cell_width - visible_width, animate=False)
        self.refresh()

    def action_move(self, rows: int, columns: int) -> None:
        """Move the cursor by (rows, columns), clamped to the map."""
        node, gpu = self.cursor
        node = min(max(node + rows, 0), max(len(self._labels) - 1, 0))
        gpu = min(max(gpu + columns, 0), max(self._gpus - 1, 0))
        self.cursor = (node, gpu)

    def action_pick(self) -> None:
        """Pick the rank under the cursor (the parent draws its group)."""
        rank = self.rank_at(*self.cursor)
        if rank >= 0:
            self.post_message(self.RankPicked(rank))

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor to the cell and picks it."""
        if event.y < 1 or event.x < self._label_width:
            return
        node = self.scroll_offset.y + event.y - 1
        gpu = (self.scroll_offset.x + event.x - self._label_width) // self._cell_width
        if 0 <= node < len(self._labels) and 0 <= gpu < self._gpus:
            self.cursor = (node, gpu)
            self.action_pick()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
