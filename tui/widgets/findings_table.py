"""The findings list of the Ranks tab: severity, code, dimension and message per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.common.limits import MAX_FINDING_ROWS
from linkscope.tui.text import same_text
from linkscope.tui.widgets.kept_table import KeptTable
from linkscope.tui.widgets.steady_scrollbars import SteadyScrollbars

COLUMNS = ("sev", "code", "dim", "message")
Row = tuple[Text, Text, Text, Text]
"""One finding's cells, in the order of :data:`COLUMNS`."""
CellAt = tuple[RowKey, ColumnKey]
"""A cell of the table: its row's key and its column's key."""


class FindingsTable(KeptTable, SteadyScrollbars):
    """One row per finding; Enter or a click chooses it (the parent draws its group)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"findings--error", "findings--warning", "findings--info"}

    class FindingChosen(Message):
        """A finding row was selected."""

        def __init__(self, finding: LayoutFinding) -> None:
            self.finding = finding
            super().__init__()

    class FindingHighlighted(Message):
        """The cursor moved onto a finding row."""

        def __init__(self, finding: LayoutFinding) -> None:
            self.finding = finding
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._findings: Sequence[LayoutFinding] = ()
        self._checked: bool | None = None
        """Whether the rows show a check's findings; None before the first :meth:`show`."""

    def on_mount(self) -> None:
        self.show((), checked=False)

    def show(self, findings: Sequence[LayoutFinding], checked: bool = True) -> None:
        """Replace the rows with `findings` (the first :data:`MAX_FINDING_ROWS`); `checked` False leaves it empty.

        The columns get the widths of these rows: a DataTable fits its columns to new rows only when it next
        idles (so a picture taken under load caught them at the width of their labels), and a column kept the
        widest cell it ever held, which depended on how fast the earlier checks ran. As many rows as before are
        updated in place (:meth:`_update_rows`); another number of rows rebuilds the table."""
        if checked == self._checked and findings == self._findings:
            self._home()
            return
        self._findings, self._checked = findings, checked
        rows = self._rows(findings) if checked else []
        widths = [max([len(label), *(row[number].cell_len for row in rows)]) for number, label in enumerate(COLUMNS)]
        if len(rows) == self.row_count and len(self.columns) == len(COLUMNS):
            self._update_rows(rows, widths)
            return
        self.clear(columns=True)
        for label, width in zip(COLUMNS, widths, strict=True):
            self.add_column(label, width=width)
        self.add_rows(rows)

    def _update_rows(self, rows: Sequence[Row], widths: Sequence[int]) -> None:
        """Put `rows` into the rows on show and give the columns `widths`, with one repaint and no layout of the
        screen, then home the cursor. A rebuild (clear, add the rows; 5 ms) measured every cell again when the
        table next idled (8-9 ms), on every Ranks keystroke on a 1,024-host cluster whose odd nodes give each
        layout as many findings; writing each cell with `update_cell` repainted the table once per cell (46 rows
        whose messages all change: 5-8 ms of the keystroke), and a new total width laid out the whole screen."""
        cells = self._write_cells(rows)
        columns = self._set_widths(widths)
        if cells or columns:
            self._forget_renders(cells, columns)
            self.refresh()
        self._home()

    def _write_cells(self, rows: Sequence[Row]) -> set[CellAt]:
        """Write the cells of `rows` that differ from the ones on show, as `update_cell` does but without its
        repaint per cell; the cells that changed."""
        changed: set[CellAt] = set()
        for shown, row in zip(self.ordered_rows, rows, strict=True):
            cells = self._data[shown.key]
            for column, cell in zip(self.ordered_columns, row, strict=True):
                if not same_text(cells[column.key], cell):
                    cells[column.key] = cell
                    changed.add((shown.key, column.key))
        return changed

    def _set_widths(self, widths: Sequence[int]) -> set[ColumnKey]:
        """Give the columns `widths`; the columns whose width changed. A new total width moves the horizontal
        scrollbar, not the table: its thumb is set here, where a new `virtual_size` laid out the whole screen (a
        new table width with each tp 4 <-> 8 edit of a 1,024-host cluster with odd nodes). Should the scrollbar
        appear or go, the scrollbar's own reactive lays the screen out."""
        changed: set[ColumnKey] = set()
        for column, width in zip(self.ordered_columns, widths, strict=True):
            if column.width != width:
                column.width = width
                changed.add(column.key)
        table_width = sum(column.get_render_width(self) for column in self.ordered_columns)
        if table_width != self.virtual_size.width:
            size = Size(table_width, self.virtual_size.height)
            self.set_reactive(DataTable.virtual_size, size)
            self._scroll_update(size)
        return changed

    def _forget_renders(self, cells: set[CellAt], columns: set[ColumnKey]) -> None:
        """Drop what DataTable keeps rendered of `cells`, of every cell of `columns` (a new width; their labels
        included) and of the rows and lines that show them, so that the next frame renders those alone.

        DataTable's own way, a new update count, dropped every render: with each tp 4 <-> 8 edit of a 1,024-host
        cluster with odd nodes only the messages change, and the severities, codes, dimensions and the header
        rendered again took half the table's repaint. The caches are DataTable's private ones (Textual has no
        call to drop one cell's render): a cell's key starts with its row key and column key, a row's with its
        row key, a row's cells' with (update count, row index); tests/tui/test_findings_table.py fails if the
        next frame shows a stale cell or renders an unchanged one."""
        rows = {row for row, _ in cells}
        indices = {self._row_locations.get(row) for row in rows}
        for cell_key in list(self._cell_render_cache.keys()):
            if (cell_key[0], cell_key[1]) in cells or cell_key[1] in columns:
                self._cell_render_cache.discard(cell_key)
        for renderables_key in list(self._row_renderable_cache.keys()):
            if renderables_key[1] in indices:
                self._row_renderable_cache.discard(renderables_key)
        if columns:
            self._row_render_cache.clear()
        for row_key in list(self._row_render_cache.keys()):
            if row_key[0] in rows:
                self._row_render_cache.discard(row_key)
        self._line_cache.clear()

    def _home(self) -> None:
        """The cursor and the view back on the first row, as a rebuild leaves them. The same findings keep their
        rows: rebuilding and repainting the table took several ms of a keystroke that changed nothing in it."""
        self.cursor_coordinate = Coordinate(0, 0)
        self.hover_coordinate = Coordinate(0, 0)
        self.scroll_to(0, 0, animate=False, immediate=True)

    def _rows(self, findings: Sequence[LayoutFinding]) -> list[Row]:
        if not findings:
            return [(Text("ok"), Text("-"), Text("-"), Text("no findings: every group sits on the links it needs"))]
        rows: list[Row] = []
        style_of: dict[str, Style | str] = {}  # a few severities in hundreds of rows: each style read once
        for finding in findings[:MAX_FINDING_ROWS]:
            style = style_of.get(finding.severity)
            if style is None:
                found = self.get_component_rich_style(f"findings--{finding.severity}", partial=True, default=None)
                style = style_of[finding.severity] = found or ""
            rows.append((Text(finding.severity, style=style), Text(finding.code), Text(finding.dim or "-"),
                         Text(finding.message)))
        if len(findings) > MAX_FINDING_ROWS:
            rows.append((Text("..."), Text(""), Text(""), Text(f"{len(findings) - MAX_FINDING_ROWS} more findings not listed")))
        return rows

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Turn the row selection into a message carrying the finding."""
        event.stop()
        if 0 <= event.cursor_row < min(len(self._findings), MAX_FINDING_ROWS):
            self.post_message(self.FindingChosen(self._findings[event.cursor_row]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Tell the parent which finding the cursor is on (its detail shows it whole)."""
        event.stop()
        if 0 <= event.cursor_row < min(len(self._findings), MAX_FINDING_ROWS):
            self.post_message(self.FindingHighlighted(self._findings[event.cursor_row]))
