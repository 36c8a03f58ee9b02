"""A modal window of text over the app, scrolling when it is longer than the terminal; Escape closes it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class TextWindow(ModalScreen[None]):
    """`text` in a bordered box with a hint on how to close it; subclasses add their own closing keys."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "Close")]
    HINT = "Escape: close"

    def __init__(self, text: Text, *, box_id: str, text_id: str) -> None:
        super().__init__()
        self.text = text
        self._ids = (box_id, text_id)

    def compose(self) -> ComposeResult:
        box_id, text_id = self._ids
        with VerticalScroll(id=box_id, classes="text-window"):
            yield Static(self.text, id=text_id, markup=False)
            yield Static(self.HINT, classes="dialog-hint", markup=False)
