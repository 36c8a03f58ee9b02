"""The one progress bar: on stderr, only when stderr is a terminal, gone once the work is done."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(total: int, label: str, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A rich progress bar of `total` steps on stderr (only on a terminal, and only when `enabled`: off
    under --json); yields a callback taking the number of steps done."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from linkscope.render.console import console as safe_console

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=safe_console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda done: progress.update(task, completed=done)
