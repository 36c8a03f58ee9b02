"""The always-visible key to the Links grid colours."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
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

    def render(self) -> Text:
        """Swatches styled from the stylesheet, separated by spaces."""
        text = Text()
        for name, label in LEGEND_ENTRIES:
            text.append(label, style=self.get_component_rich_style(f"link-grid--{name}", partial=True))
            text.append(" ")
        return text
