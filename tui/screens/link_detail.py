"""A window with the whole detail of one Links cell: what the pane under the grid may cut at 80x24."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from linkscope.tui.screens.text_window import TextWindow


class LinkDetailScreen(TextWindow):
    """Everything known about one link; Escape, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]
    HINT = "Escape or Enter: back to the grid"

    def __init__(self, detail: Text) -> None:
        super().__init__(detail, box_id="link-detail-box", text_id="link-detail-full")
