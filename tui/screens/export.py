"""A modal that shows the checked layout as a `linkscope check` command and as JSON, ready to copy."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TextArea


class ExportScreen(ModalScreen[None]):
    """The command and the JSON document; `y` copies the command, `j` the JSON, Escape closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("y", "copy_command", "Copy command"),
        Binding("j", "copy_json", "Copy JSON"),
    ]

    def __init__(self, command: str, document: str) -> None:
        super().__init__()
        self.command = command
        self.document = document

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static("linkscope check command:", classes="export-heading", markup=False)
            yield Static(self.command, id="export-command", markup=False)
            yield Static("JSON (groups, placement, findings):", classes="export-heading", markup=False)
            yield TextArea(self.document, id="export-json", read_only=True, language=None)
        yield Footer()

    def action_copy_command(self) -> None:
        """Ask the terminal to copy the command (OSC 52)."""
        self._copy(self.command, "the command")

    def action_copy_json(self) -> None:
        """Ask the terminal to copy the JSON document (OSC 52)."""
        self._copy(self.document, "the JSON")

    def _copy(self, text: str, what: str) -> None:
        """Send `text` to the terminal's clipboard and say only what is known: the request went out
        (terminals, tmux and ssh may drop it, and nothing tells the app), and where else the text is."""
        self.app.copy_to_clipboard(text)
        self.notify(f"Asked the terminal to copy {what} (OSC 52; tmux and ssh may drop it). If nothing "
                    f"arrived, select {what} shown here with the mouse (shift+drag in most terminals).",
                    markup=False, timeout=8)
