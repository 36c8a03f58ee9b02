"""Each distinct line of an NCCL log read once: a long log repeats its lines (every channel's connection for
every new communicator, proxy and timing chatter through the whole run), and a line already read and recorded
adds nothing the second time but a count, while its process's communicators stand.

:class:`OnceReader` is :class:`~topo.formats.nccl_log_reader.LogReader` with that memo in front of it.
"""

from __future__ import annotations

import re
from collections import Counter

from linkscope.topo.common.limits import MAX_PARSED_LINES
from linkscope.topo.formats.nccl_log_lines import matters_without_nccl
from linkscope.topo.formats.nccl_log_reader import LogReader
from linkscope.topo.formats.nccl_log_topology import TOPOLOGY_STARTS

Process = tuple[str, int]
"""(host, pid) of a line with NCCL's own prefix."""


def inert(message: str) -> bool:
    """True for an INFO message no part of the reader looks at (`[Service thread] ...`, `[Proxy Progress] ...`,
    timings): what :meth:`LogReader.info` reads starts with C, R, T, N, names a `comm 0x`, is an error trace with
    ` -> `, or may be one of NCCL's topology and graph lines (:data:`TOPOLOGY_STARTS`: a space, `=`, `+`, `P` or a
    digit)."""
    first = message[:1]
    return bool(first) and first not in "CRTN" and first not in TOPOLOGY_STARTS and "comm 0x" not in message \
        and " -> " not in message


class OnceReader(LogReader):
    """A LogReader that reads each distinct line once (bounded memo, cleared when full)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.repeats: dict[str, tuple[Process, list[tuple[str, int, int]], int]] = {}
        """Line -> its process, that process's communicators (the reader's own list, which grows) and how many it
        had when the line was read: a new one may claim the same text, so the memo holds only while the count
        stands."""
        self.process: Process = ("", 0)
        self.recorded = False
        """Set while reading a line whose second reading would only count it."""

    def keep(self, raw: str) -> bool:
        repeat = self.repeats.get(raw) if "NCCL" in raw else None
        if repeat is not None and len(repeat[1]) == repeat[2]:
            self.lines += 1
            self.nccl_lines += 1
            self.hosts.saw(*repeat[0])
            return False
        self.recorded = False
        kept = super().keep(raw)
        if self.recorded:  # read here at once (NCCL's own prefix, nothing to clean), and recorded
            if len(self.repeats) >= MAX_PARSED_LINES:
                self.repeats.clear()  # bounded: the lines that recur come back at once
            comms = self.process_comms.setdefault(self.process, [])
            self.repeats[raw] = (self.process, comms, len(comms))
        return kept

    def take(self, batch: list[str], start: int, before: int) -> int:
        """:data:`~topo.formats.lines.Take`: the lines of `batch` from `start` on, read here in one loop (most of a
        long log is lines without NCCL's name and repeats, which only count), up to the first one the cleaner must
        see; its index, or `len(batch)`."""
        repeats = self.repeats
        again: list[Process] = []
        """The process of each repeat read here, counted into the host book when the loop ends."""
        handed = len(batch)
        for index in range(start, handed):
            raw = batch[index]
            if "NCCL" not in raw:
                if matters_without_nccl(raw):
                    handed = index
                    break
                continue
            repeat = repeats.get(raw)
            if repeat is not None and len(repeat[1]) == repeat[2]:
                again.append(repeat[0])
                continue
            self.lines = before + index
            if self.keep(raw):
                handed = index
                break
        self.lines = before + min(handed + 1, len(batch))
        self.nccl_lines += len(again)
        self.hosts.saw_again(Counter(again))
        return handed

    def feed_prefixed(self, text: str, leading: re.Match[str], number: int) -> None:
        self.process = (leading.group(1), int(leading.group(2)))
        super().feed_prefixed(text, leading, number)

    def info(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> None:
        if inert(message):
            self.suffix = None
            self.recorded = True
            return
        super().info(message, host, pid, dev, number)

    def connection(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> bool:
        dropped = self.edges_dropped
        found = super().connection(message, host, pid, dev, number)
        self.recorded = found and self.edges_dropped == dropped  # among the edges now: a repeat adds nothing
        return found
