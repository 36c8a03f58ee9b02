"""The rich console every command prints through: nothing it prints can act on the terminal.

Host, GPU, NIC and version names from a file or snapshot may carry escape sequences (clear the
screen, set the window title, write the clipboard with OSC 52, plant a hyperlink). Rather than
trusting each renderer to remember, :class:`SafeConsole` passes every text segment it renders
through :func:`topo.common.text.printable_block` (escape sequences removed, other controls shown as
`\\xNN`); only the colours rich itself emits reach the terminal. Markup is off, so a `[link=...]`
in a name is printed as it is. Commands get their console from :func:`console`, never `Console()`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from linkscope.options import piped_columns
from linkscope.topo.common.text import UNPRINTABLE_IN_BLOCK, printable_block

PIPED_TABLE_WIDTH = 120
"""Width of wide result tables when stdout is not a terminal (logs, pipes)."""

class SafeConsole(Console):
    """A rich Console whose rendered text segments are made printable before they are written."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and UNPRINTABLE_IN_BLOCK.search(segment.text):
                yield Segment(printable_block(segment.text), segment.style)
            else:
                yield segment

    def on_broken_pipe(self) -> None:
        """The reader has gone (`| head -1`): raise BrokenPipeError, which `linkscope.cli.main` turns
        into a quiet exit 0 for every command, where rich itself would exit 1."""
        raise BrokenPipeError


def console(stderr: bool = False, **options: Any) -> Console:
    """The console commands print to: no markup, emoji or highlighting of untrusted text."""
    return SafeConsole(stderr=stderr, markup=False, highlight=False, emoji=False, **options)


def table_console() -> Console:
    """A console for wide result tables: the terminal's width, `COLUMNS` when set, else PIPED_TABLE_WIDTH when piped."""
    return console(width=None if sys.stdout.isatty() or piped_columns() is not None else PIPED_TABLE_WIDTH)
