"""Updating a Static's text without laying out the whole screen again when its height stays the same.

`Static.update` lays out the screen by default, because new text may wrap to more or fewer lines. On the Ranks
tab of a 1,024-host cluster that layout (and the full repaint after it) cost more than the new map itself on
every keystroke, though the finding's detail kept its height; a repaint of the Static alone is enough then.
"""

from __future__ import annotations

from rich.text import Text
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
