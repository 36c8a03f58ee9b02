"""The cyclic garbage collector paused while many objects that live on are built.

Decoding a cluster's snapshots or answering for a thousand hosts makes millions of small objects and no
reference cycles: left running, the collector rescans them again and again, which took longer than
building them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block; leave it as it was after (nested blocks are fine)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
