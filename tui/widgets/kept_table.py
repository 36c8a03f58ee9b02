"""A DataTable (a row cursor) that keeps its rendered rows when it is shown again at the size it had."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widgets import DataTable


class KeptTable(DataTable[Text]):
    """A switch back to a tab sends each of its widgets a Resize, at the size they had. DataTable drops every
    render on any Resize, so each table of the tab rendered whole again in the switch's frame (the Monitor tab's
    GPU table: 10-25 ms). Its renders do not depend on the table's size (the lines' cache has the width in its
    key), so only a new size goes to DataTable's handler (a private one, `_on_resize`, the only Resize handler in
    its classes); tests/tui/test_findings_table.py counts the renders dropped by a switch there and back."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row")
        self._resized_to: Size | None = None
        """The size of the table's last Resize."""

    def _on_resize(self, event: events.Resize) -> None:
        if event.size == self._resized_to:
            event.prevent_default()
        self._resized_to = event.size
