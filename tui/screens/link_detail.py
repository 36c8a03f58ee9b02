"""A modal with the whole detail of one Links cell, scrollable: what the pane under the grid may cut at 80x24."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class LinkDetailScreen(ModalScreen[None]):
    """Everything known about one link; Escape, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("enter", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, detail: Text) -> None:
        super().__init__()
        self.detail = detail

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="link-detail-box"):
            yield Static(self.detail, id="link-detail-full", markup=False)
            yield Static("Escape or Enter: back to the grid", classes="dialog-hint", markup=False)
