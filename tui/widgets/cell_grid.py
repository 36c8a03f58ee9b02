"""A scrolling grid of fixed-width cells drawn with the line API: row labels, a fixed header, a cursor.

Only the visible lines and columns are rendered, so a 72 x 72 link grid or a 1,024-node rank map
costs the same per frame as a small one. Subclasses say what each cell shows
(:meth:`CellGrid.render_cell`) and what moving or selecting means (:meth:`cursor_moved`,
:meth:`cell_selected`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip

from linkscope.tui.widgets.steady_scrollbars import SteadyScrollbars

LABEL_MAX = 14
"""Row labels (host names) longer than this are shortened."""


def _common_start(texts: Sequence[str]) -> int:
    """Characters every text starts with."""
    shortest = min(texts, key=len)
    for index, char in enumerate(shortest):
        if any(text[index] != char for text in texts):
            return index
    return len(shortest)


def short_labels(labels: Sequence[str], width: int) -> list[str]:
    """`labels` cut to `width` characters, each still telling its row apart: a long label keeps its head
    and the end that differs from the others (`dgx-h100-de~#1`, `gpu-nod~-017`); labels that would still
    collide get their row number."""
    if all(len(label) <= width for label in labels):
        return list(labels)
    sample = labels[:4096]
    prefix = _common_start(sample) if len(sample) > 1 else 0
    suffix = _common_start([label[::-1] for label in sample]) if len(sample) > 1 else 0
    shown: list[str] = []
    for label in labels:
        if len(label) <= width or prefix == 0:  # short, or different from the start: its head tells it apart
            shown.append(label if len(label) <= width else label[: width - 1] + "~")
            continue
        start = min(prefix, len(label))
        while start > 0 and label[start - 1].isalnum():  # back to the start of the token that differs
            start -= 1
        start = max(start - 1, 0)  # with its separator (`#1`, `-017`)
        tail = label[start:]
        if len(tail) > width - 4:
            tail = label[start : max(start + 1, len(label) - suffix)][: width - 4]
        shown.append(label[: width - 1 - len(tail)] + "~" + tail)
    if len(set(shown)) < len(shown):
        shown = [label if len(label) <= width else f"{label[: width - len(str(row)) - 2]}~#{row}"
                 for row, label in enumerate(labels)]
    return shown


class CellGrid(SteadyScrollbars, can_focus=True):
    """Rows x columns of cells; arrows move the cursor, Enter or a click selects a cell."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"cell-grid--label", "cell-grid--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1, 0)", "Up", show=False),
        Binding("down", "move(1, 0)", "Down", show=False),
        Binding("left", "move(0, -1)", "Left", show=False),
        Binding("right", "move(0, 1)", "Right", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1000000, 0)", "First row", show=False),
        Binding("end", "move(1000000, 0)", "Last row", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    cursor: reactive[tuple[int, int]] = reactive((0, 0), always_update=True)
    """(row, column) under the cursor."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._row_labels: list[str] = []
        self._column_labels: list[str] = []
        self._label_width = 1
        self._cell_width = 4
        self._frame_styles: tuple[Style, Style] | None = None
        """:meth:`_line_styles` while a frame's lines are drawn (:meth:`render_lines`), else None."""

    @property
    def row_count(self) -> int:
        """Number of rows."""
        return len(self._row_labels)

    @property
    def column_count(self) -> int:
        """Number of columns."""
        return len(self._column_labels)

    def set_shape(self, row_labels: Sequence[str], column_labels: Sequence[str], cell_width: int) -> None:
        """Set the labels and the cell width (content is read through :meth:`render_cell` when drawn)."""
        self._row_labels = short_labels(row_labels, LABEL_MAX)
        self._column_labels = list(column_labels)
        self._label_width = max([4, *(len(label) for label in self._row_labels[:4096])]) + 3
        self._cell_width = max([cell_width, *(len(label) + 1 for label in self._column_labels)])
        self.virtual_size = Size(self._label_width + len(self._column_labels) * self._cell_width, len(self._row_labels) + 1)
        row, column = self.cursor
        self.set_reactive(CellGrid.cursor, (min(row, max(self.row_count - 1, 0)), min(column, max(self.column_count - 1, 0))))
        self.refresh()

    def render_cell(self, row: int, column: int) -> tuple[str, Style]:
        """Text (at most the cell width less one) and style of a cell; subclasses override."""
        return "", Style()

    def cursor_moved(self, row: int, column: int) -> None:
        """Called when the cursor lands on a cell; subclasses post their message."""

    def cell_selected(self, row: int, column: int) -> None:
        """Called on Enter or a click on a cell; subclasses post their message."""

    def render_lines(self, crop: Region) -> list[Strip]:
        """Read the styles every line shares once per frame, not once per line: `rich_style` walks the CSS of
        every ancestor, and a screenful of a 1,024-node rank map, redrawn on each keystroke in the Ranks form,
        spent a third of its time there."""
        self._frame_styles = self._line_styles()
        try:
            return super().render_lines(crop)
        finally:
            self._frame_styles = None

    def _line_styles(self) -> tuple[Style, Style]:
        """The widget's own style (the background of empty space) and the row and column labels' style."""
        return self.rich_style, self.get_component_rich_style("cell-grid--label")

    def render_line(self, y: int) -> Strip:
        """The header (y = 0, fixed) or one row; the label column stays put when scrolling sideways."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base, label_style = self._frame_styles or self._line_styles()
        cells_width = max(width - self._label_width, 0)
        first = scroll_x // self._cell_width
        last = min(self.column_count, (scroll_x + cells_width) // self._cell_width + 1)
        offset = scroll_x - first * self._cell_width
        if y == 0:
            header = [
                Segment(f"{self._column_labels[column]:^{self._cell_width - 1}} "[: self._cell_width], label_style)
                for column in range(first, last)
            ]
            body = Strip(header).crop_extend(offset, offset + cells_width, base)
            label_strip, body = self._side_hints(Strip([Segment(" " * self._label_width, label_style)]), body,
                                                 scroll_x, cells_width)
            return Strip.join([label_strip, body]).crop(0, width)
        row = scroll_y + y - 1
        if row >= self.row_count:
            return Strip.blank(width, base)
        label = f" {self._row_labels[row]:<{self._label_width - 1}}"
        cursor_row, cursor_column = self.cursor
        if cursor_row != row or not self.has_focus:
            cursor_column = -1
        cells = [self._cell_segment(row, column, column == cursor_column) for column in range(first, last)]
        return self._row_strip(Segment(label, label_style), cells, offset, cells_width, base, width)

    def _row_strip(self, label: Segment, cells: list[Segment], offset: int, cells_width: int, base: Style,
                   width: int) -> Strip:
        """A row's line: `label`, then `cells` from `offset` on, `cells_width` columns of them (padded with
        `base`), `width` columns in all. Built at once when nothing needs cutting (no sideways scroll, the label
        and the cells one column per character and all in view): the general way (:meth:`_cut_row`) makes four
        Strips a line (cells, padded, label, joined), each with its seven caches, for a screenful of lines of a
        1,024-node rank map on every keystroke in the Ranks form. Both give the same segments."""
        cells_length = len(cells) * self._cell_width
        fits = (offset == 0 and cells_length <= cells_width and len(label.text) + cells_width == width
                and len(label.text) == self._label_width and label.text.isascii()
                and all(cell.text.isascii() for cell in cells))
        if not fits:
            return self._cut_row(label, cells, offset, cells_width, base, width)
        padding = [Segment(" " * (cells_width - cells_length), base)] if cells_length < cells_width else []
        return Strip([label, *cells, *padding], width)

    @staticmethod
    def _cut_row(label: Segment, cells: list[Segment], offset: int, cells_width: int, base: Style,
                 width: int) -> Strip:
        """:meth:`_row_strip` for any row: the cells cut to the view, after the label, cut to `width`."""
        body = Strip(cells).crop_extend(offset, offset + cells_width, base)
        return Strip.join([Strip([label]), body]).crop(0, width)

    def _side_hints(self, label: Strip, header: Strip, scroll_x: int, cells_width: int) -> tuple[Strip, Strip]:
        """Marks where more columns lie out of view, so a grid wider than the terminal (a dozen NICs at 80
        columns) says it goes on: `◂ more` in the corner above the row labels, `▸` at the header's right end.
        Neither covers a column's name."""
        style = self.get_component_rich_style("cell-grid--label") + Style(reverse=True)
        if scroll_x > 0 and self._label_width >= 7:
            label = Strip([Segment("◂ more", style), Segment(" " * (self._label_width - 6))])
        if scroll_x + cells_width < self.column_count * self._cell_width and cells_width > 1:
            header = Strip.join([header.crop(0, cells_width - 1), Strip([Segment("▸", style)])])
        return label, header

    def _cell_segment(self, row: int, column: int, under_cursor: bool) -> Segment:
        text, style = self.render_cell(row, column)
        if under_cursor:
            style = style + self.get_component_rich_style("cell-grid--cursor", partial=True)
        return Segment(f"{text:^{self._cell_width - 1}} "[: self._cell_width], style)

    def watch_cursor(self, cursor: tuple[int, int]) -> None:
        """Keep the cursor's cell in view and tell the subclass."""
        row, column = cursor
        scroll_x, scroll_y = self.scroll_offset
        view = self.scrollable_content_region
        visible_rows = max(view.height - 1, 1)
        if row < scroll_y:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= scroll_y + visible_rows:
            self.scroll_to(y=row - visible_rows + 1, animate=False, immediate=True)
        left = column * self._cell_width
        visible_width = max(view.width - self._label_width, self._cell_width)
        if left < scroll_x:
            self.scroll_to(x=left, animate=False, immediate=True)
        elif left + self._cell_width > scroll_x + visible_width:
            self.scroll_to(x=left + self._cell_width - visible_width, animate=False, immediate=True)
        self.refresh()
        if self.row_count and self.column_count:
            self.cursor_moved(row, column)

    def action_move(self, rows: int, columns: int) -> None:
        """Move the cursor by (rows, columns), clamped to the grid."""
        row, column = self.cursor
        row = min(max(row + rows, 0), max(self.row_count - 1, 0))
        column = min(max(column + columns, 0), max(self.column_count - 1, 0))
        self.cursor = (row, column)

    def action_page(self, pages: int) -> None:
        """Move the cursor by a screenful of rows."""
        self.action_move(pages * max(self.scrollable_content_region.height - 2, 1), 0)

    def action_select(self) -> None:
        """Select the cell under the cursor."""
        if self.row_count and self.column_count:
            self.cell_selected(*self.cursor)

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor to the cell and selects it."""
        if event.y < 1 or event.x < self._label_width:
            return
        row = self.scroll_offset.y + event.y - 1
        column = (self.scroll_offset.x + event.x - self._label_width) // self._cell_width
        if 0 <= row < self.row_count and 0 <= column < self.column_count:
            self.cursor = (row, column)
            self.action_select()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
