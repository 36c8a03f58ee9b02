"""The bottom line of key bindings, drawn as one line of text.

Textual's Footer mounts a widget per binding and rebuilds them on every focus change, which
costs tens of milliseconds per tab switch here; this bar only re-renders its text. Clicking a
key presses it, as with the Footer.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input


class KeyBar(Widget):
    """The shown bindings of the focused widget, its ancestors and the app: key, then what it does
    (in a text field, the keys that do not type: ctrl+q to quit, escape to leave the field)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-bar--key", "key-bar--description"}

    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; }
    """

    keys: reactive[tuple[tuple[str, str, str], ...]] = reactive(())
    """(key, key as shown, description) per shown binding, in footer order."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        # while a field takes typing, a one-letter key types that letter: show the keys that still work
        typing = isinstance(screen.focused, Input)
        seen: set[str] = set()
        keys = []
        for _node, binding, enabled, _tooltip in screen.active_bindings.values():
            if not binding.show or not enabled or binding.action in seen:
                continue
            seen.add(binding.action)
            if typing and len(binding.key) == 1:
                continue
            keys.append((binding.key, self.app.get_key_display(binding), binding.description))
        if typing:
            keys.extend((("escape", "esc", "Leave field"), ("ctrl+q", "^q", "Quit")))
        if self.app.ENABLE_COMMAND_PALETTE:
            keys.append((self.app.COMMAND_PALETTE_BINDING, "^p", "palette"))
        self.keys = tuple(keys)

    def render(self) -> Text:
        """`k description` pairs separated by spaces."""
        key_style = self.get_component_rich_style("key-bar--key", partial=True)
        text_style = self.get_component_rich_style("key-bar--description", partial=True)
        text = Text(no_wrap=True, overflow="ellipsis")
        for _key, shown, description in self.keys:
            text.append(f" {shown} ", style=key_style)
            text.append(f"{description} ", style=text_style)
        return text

    def key_at(self, x: int) -> str | None:
        """The key drawn at column `x`, if any."""
        position = 0
        for key, shown, description in self.keys:
            width = len(shown) + 2 + len(description) + 1
            if position <= x < position + width:
                return key
            position += width
        return None

    def on_click(self, event: events.Click) -> None:
        """Press the key that was clicked."""
        key = self.key_at(event.x)
        if key is not None:
            self.app.simulate_key(key)
