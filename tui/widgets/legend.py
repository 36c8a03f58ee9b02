"""The always-visible key to the Links grid colours."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from linkscope.topo.cost.expect import SLOW_FRACTION

LEGEND_ENTRIES: tuple[tuple[str, str], ...] = (
    ("nvlink", " NV# NVLink "),
    ("switch", " PIX/PXB PCIe switch "),
    ("host", " PHB/NODE via CPU "),
    ("sys", " SYS across sockets "),
    ("reduced", " below the box's best "),
    ("degraded", f" !n measured < {SLOW_FRACTION:.0%} of typical "),
    ("ring", " *n ring hop "),
)
"""(component class, label) per swatch, in the order shown."""


class Legend(Widget):
    """One or two lines of coloured swatches naming each link class; wraps on narrow terminals."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"link-grid--{name}" for name, _ in LEGEND_ENTRIES}

    DEFAULT_CSS = """
    Legend { height: auto; }
    """

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """As many lines as the swatches need at `width`."""
        return len(legend_lines(width))

    def render(self) -> Text:
        """Swatches styled from the stylesheet, separated by spaces; a line breaks between swatches, never inside one."""
        text = Text(no_wrap=True)
        for number, line in enumerate(legend_lines(self.size.width or 80)):
            if number:
                text.append("\n")
            for name, label in line:
                text.append(label, style=self.get_component_rich_style(f"link-grid--{name}", partial=True))
                text.append(" ")
        return text


def legend_lines(width: int) -> list[list[tuple[str, str]]]:
    """The swatches laid out in lines of at most `width` columns (one swatch a line when even that is wider)."""
    lines: list[list[tuple[str, str]]] = [[]]
    used = 0
    for name, label in LEGEND_ENTRIES:
        if lines[-1] and used + len(label) + 1 > width:
            lines.append([])
            used = 0
        lines[-1].append((name, label))
        used += len(label) + 1
    return lines
