"""The help window (`?` or F1): the keys of the whole app and of the tab on show, and where to read more."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from linkscope.tui.screens.text_window import TextWindow

GLOBAL_KEYS: tuple[tuple[str, str], ...] = (
    ("1-6", "switch tab: Links, Topology, Ranks, Bench, Monitor, Steps"),
    ("? F1", "this help"),
    ("h", "next host of a cluster (every tab follows it)"),
    ("tab shift+tab", "move between fields and tables"),
    ("escape", "leave a text field (its tab's keys work again)"),
    ("ctrl+p", "command palette: open a built-in sample, switch tab"),
    ("q ctrl+q", "quit (ctrl+q inside a text field)"),
)
"""Keys that work on every tab."""


def help_text(tab_title: str, tab_keys: Iterable[tuple[str, str]]) -> Text:
    """The whole help: the keys of every tab, then those of `tab_title`."""
    text = Text()
    text.append("Keys on every tab\n", style="bold")
    for key, what in GLOBAL_KEYS:
        text.append(f"  {key:<14}", style="bold")
        text.append(f"{what}\n")
    text.append(f"\nKeys on the {tab_title} tab\n", style="bold")
    for key, what in tab_keys:
        text.append(f"  {key:<14}", style="bold")
        text.append(f"{what}\n")
    text.append("\nThe same facts without the app: linkscope show, check, doctor, bench (linkscope --help).")
    return text


def binding_keys(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """(key, description) of each binding that says what it does."""
    keys = []
    for binding in bindings:
        if isinstance(binding, Binding) and binding.description:
            keys.append((binding.key_display or binding.key, binding.description))
    return keys


class HelpScreen(TextWindow):
    """The keys; Escape, `?`, F1 or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("f1", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]
    HINT = "Escape or ?: close"

    def __init__(self, text: Text) -> None:
        super().__init__(text, box_id="help-box", text_id="help-text")
