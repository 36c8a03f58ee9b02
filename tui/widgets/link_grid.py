"""The Links grid: a table of link cells coloured by class, with a cell cursor and scrolling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tui.link_cells import GridCell

CELL_CLASSES = ("self", "nvlink", "switch", "host", "sys", "unknown")


class LinkGrid(DataTable[Text]):
    """Rows are GPUs, columns GPUs or NICs; each cell a :class:`GridCell`, coloured from the stylesheet."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"link-grid--{name}" for name in CELL_CLASSES),
        "link-grid--degraded",
        "link-grid--ring",
    }

    class CellChosen(Message):
        """The cursor moved onto a cell (or a cell was clicked)."""

        def __init__(self, cell: GridCell) -> None:
            self.cell = cell
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="cell", zebra_stripes=False)
        self._cells: list[list[GridCell]] = []

    def show(
        self, cells: list[list[GridCell]], row_labels: Sequence[str], column_labels: Sequence[str], show_expected: bool
    ) -> None:
        """Replace the grid's content, keeping the cursor where it was when it still fits."""
        cursor = self.cursor_coordinate
        self._cells = cells
        self.clear(columns=True)
        rendered = [[self._cell_text(cell, show_expected) for cell in row] for row in cells]
        width = max([4, *(text.cell_len for row in rendered for text in row)])
        for label in column_labels:
            self.add_column(Text(label), width=max(width, len(label)))
        for label, row_texts in zip(row_labels, rendered, strict=True):
            self.add_row(*row_texts, label=Text(label))
        if cells and cells[0] and cursor.row < len(cells) and cursor.column < len(cells[0]):
            self.move_cursor(row=cursor.row, column=cursor.column, animate=False)

    def _cell_text(self, cell: GridCell, show_expected: bool) -> Text:
        style: Style = self.get_component_rich_style(f"link-grid--{cell.colour_class}", partial=True)
        if cell.degraded:
            style += self.get_component_rich_style("link-grid--degraded", partial=True)
        if cell.on_ring:
            style += self.get_component_rich_style("link-grid--ring", partial=True)
        label = cell.text(show_expected)
        if cell.degraded:
            label = f"!{label}"
        if cell.on_ring:
            label = f"*{label}"
        return Text(label, style=style, justify="center")

    def cell_at(self, row: int, column: int) -> GridCell | None:
        """The model of the cell at (row, column), if there is one."""
        if 0 <= row < len(self._cells) and 0 <= column < len(self._cells[row]):
            return self._cells[row][column]
        return None

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        """Turn the table's cursor event into one carrying the cell model."""
        event.stop()
        cell = self.cell_at(event.coordinate.row, event.coordinate.column)
        if cell is not None:
            self.post_message(self.CellChosen(cell))

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        """Enter or a click on a cell chooses it too."""
        event.stop()
        cell = self.cell_at(event.coordinate.row, event.coordinate.column)
        if cell is not None:
            self.post_message(self.CellChosen(cell))
