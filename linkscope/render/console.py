"""The rich console commands print to: plain text when piped, wide tables kept readable in logs."""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_TABLE_WIDTH = 120
"""Width of wide result tables when stdout is not a terminal (logs, pipes)."""


def table_console() -> Console:
    """A console for wide result tables: the terminal's width, or PIPED_TABLE_WIDTH when piped."""
    return Console(width=None if sys.stdout.isatty() else PIPED_TABLE_WIDTH, highlight=False, emoji=False)
