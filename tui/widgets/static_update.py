"""Updating a Static's text without laying out the whole screen again when its height stays the same.

`Static.update` lays out the screen by default, because new text may wrap to more or fewer lines. On the Ranks
tab of a 1,024-host cluster that layout (and the full repaint after it) cost more than the new map itself on
every keystroke, though the finding's detail kept its height; a repaint of the Static alone is enough then.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.widgets import Static

from linkscope.tui.text import same_text


def update_in_place(static: Static, content: Text) -> None:
    """Show `content` in `static` (width from its container, height auto); lay out again only when its wrapped
    height at its current width differs from the height shown, or when it has not been laid out yet; a text it
    shows already is left as it is."""
    if same_text(static.content, content):
        return
    shown = static.content_size
    static.update(content, layout=False)
    if shown.width <= 0 or static.get_content_height(static.container_size, static.app.size, shown.width) != shown.height:
        static.refresh(layout=True)


def update_if_changed(static: Static, content: Text) -> None:
    """Show `content` in `static` (whose height does not depend on it) unless it shows that text already. A Ranks
    keystroke on a 1,024-host cluster mostly leaves the status and suggestion lines as they were, and repainting
    them anyway cost their render and widened the part of the screen that frame composes."""
    if not same_text(static.content, content):
        static.update(content, layout=False)


class WrappedText(Static):
    """A Static of wrapped text whose new height lays the screen out once, as :func:`update_in_place` asks.

    Textual lays the screen out a second time after a layout that gave a widget a new size: the layout sets the
    widget's `virtual_size`, a reactive that asks for a layout. A Static has nothing inside it to place, so that
    second layout moved nothing; it only drew the Ranks tab's scrollbars again after each frame whose finding's
    detail grew or shrank by a line (most tp 4 <-> 8 edits of a 1,024-host cluster with odd nodes)."""

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        """Take the size a layout gave without asking for another layout. Overrides Textual's private hook (no
        public one is called with a widget's new size before the frame); tests/tui/test_static_update.py counts
        the layouts of a new height and fails if this is no longer called."""
        return super()._size_updated(size, virtual_size, container_size, layout=False)
