"""The Links grid: link cells coloured by class, with a cursor, scrolling, and a fixed header."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.message import Message

from linkscope.topo.model.host import LinkKind
from linkscope.tui.link_cells import GridCell
from linkscope.tui.widgets.cell_grid import CellGrid

CELL_CLASSES = ("self", "nvlink", "switch", "host", "sys", "unknown")


def first_link(cells: list[list[GridCell]]) -> tuple[int, int]:
    """(row, column) of the first cell that is a link between two devices (not a GPU with itself)."""
    for row in cells:
        for cell in row:
            if cell.kind is not LinkKind.SELF:
                return cell.row, cell.col
    return 0, 0


class LinkGrid(CellGrid):
    """Rows are GPUs, columns GPUs or NICs; each cell a :class:`GridCell`, coloured from the stylesheet."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Detail")]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"link-grid--{name}" for name in CELL_CLASSES),
        "link-grid--degraded",
        "link-grid--reduced",
        "link-grid--ring",
        "link-grid--transport-below-link",
    }

    class CellChosen(Message):
        """The cursor moved onto a cell (or a cell was clicked)."""

        def __init__(self, cell: GridCell) -> None:
            self.cell = cell
            super().__init__()

    class CellOpened(Message):
        """Enter or a click on a cell: show everything about it."""

        def __init__(self, cell: GridCell) -> None:
            self.cell = cell
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cells: list[list[GridCell]] = []
        self._texts: list[list[str]] = []
        self._labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    def show(
        self, cells: list[list[GridCell]], row_labels: Sequence[str], column_labels: Sequence[str], show_expected: bool
    ) -> None:
        """Replace the grid's content, keeping the cursor where it was when it still fits; a new grid (another
        host, GPUs or NICs) starts on its first link, not on a GPU's own diagonal cell."""
        self._cells = cells
        self._texts = [[self._label(cell, show_expected) for cell in row] for row in cells]
        width = max([4, *(len(text) for row in self._texts for text in row)]) + 1
        labels = (tuple(row_labels), tuple(column_labels))
        if labels != self._labels:
            self._labels = labels
            self.set_reactive(CellGrid.cursor, first_link(cells))
        self.set_shape(row_labels, column_labels, width)
        chosen = self.cell_at(*self.cursor)
        if chosen is not None:
            self.post_message(self.CellChosen(chosen))

    @staticmethod
    def _label(cell: GridCell, show_expected: bool) -> str:
        label = cell.text(show_expected)
        if cell.degraded:
            label = f"!{label}"
        if cell.on_ring:
            label = f"*{label}"
        return label

    def render_cell(self, row: int, column: int) -> tuple[str, Style]:
        """The cell's text, styled by link class, degraded measurement, ring membership and an NCCL
        transport below the link (SHM or NET where P2P should be)."""
        cell = self.cell_at(row, column)
        if cell is None:
            return "", Style()
        style = self.get_component_rich_style(f"link-grid--{cell.colour_class}")
        if cell.reduced:
            style = style + self.get_component_rich_style("link-grid--reduced", partial=True)
        if cell.degraded:
            style = style + self.get_component_rich_style("link-grid--degraded", partial=True)
        if cell.on_ring:
            style = style + self.get_component_rich_style("link-grid--ring", partial=True)
        if cell.transport_below_link:
            style = style + self.get_component_rich_style("link-grid--transport-below-link", partial=True)
        return self._texts[row][column], style

    def cell_at(self, row: int, column: int) -> GridCell | None:
        """The model of the cell at (row, column), if there is one."""
        if 0 <= row < len(self._cells) and 0 <= column < len(self._cells[row]):
            return self._cells[row][column]
        return None

    def cursor_moved(self, row: int, column: int) -> None:
        """Tell the parent which cell the cursor is on."""
        cell = self.cell_at(row, column)
        if cell is not None:
            self.post_message(self.CellChosen(cell))

    def cell_selected(self, row: int, column: int) -> None:
        """Enter or a click opens the cell's whole detail (the parent shows it)."""
        cell = self.cell_at(row, column)
        if cell is not None:
            self.post_message(self.CellOpened(cell))
