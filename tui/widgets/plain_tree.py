"""A Tree whose string labels are plain text, never markup (device and host names come from files)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Tree


class PlainTree(Tree[str]):
    """Tree that treats `str` labels literally."""

    def process_label(self, label: str | Text) -> Text:
        """Wrap strings in Text without parsing markup."""
        return super().process_label(Text(label) if isinstance(label, str) else label)
