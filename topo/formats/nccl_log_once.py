"""Each distinct line of an NCCL log read once: a long log repeats its lines (every channel's connection for
every new communicator, proxy and timing chatter through the whole run), and a line already read and recorded
adds nothing the second time but a count, while its process's communicators stand.

:class:`OnceReader` is :class:`~topo.formats.nccl_log_reader.LogReader` with that memo in front of it.
"""

from __future__ import annotations

from collections import Counter

from linkscope.topo.common.limits import MAX_PARSED_LINES
from linkscope.topo.formats.nccl_log_lines import CONNECTION_LINE, connection_of, matters_without_nccl
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
        self.repeats: dict[str, Process] = {}
        """Line -> the process that wrote it. A line says the same again only while no process has joined a
        communicator since (a new one may claim the same text), so the memo is emptied whenever one joins."""
        self.memo_joins = 0
        """:attr:`joins` when the memo was last emptied."""

    def memo(self) -> dict[str, Process]:
        """The memo, emptied first when a process joined a communicator since it was last emptied."""
        if self.joins != self.memo_joins:
            self.repeats.clear()
            self.memo_joins = self.joins
        return self.repeats

    def keep(self, raw: str) -> bool:
        process = self.memo().get(raw) if "NCCL" in raw else None
        if process is not None:
            self.lines += 1
            self.nccl_lines += 1
            self.hosts.saw(*process)
            return False
        return self.read(raw)

    def read(self, raw: str) -> bool:
        """:meth:`keep` for a line the memo does not hold."""
        self.settled = False
        dropped = self.edges_dropped
        kept = super().keep(raw)
        if self.settled and self.edges_dropped == dropped:  # read at once (NCCL's own prefix), and all it says is kept
            self.remember(raw, (self.prefix[0], self.prefix[1]))
        return kept

    def remember(self, raw: str, process: Process) -> None:
        """`raw`, written by `process`, says nothing new when it comes again (bounded: when full, the memo is
        emptied, and the lines that recur come back at once)."""
        repeats = self.memo()
        if len(repeats) >= MAX_PARSED_LINES:
            repeats.clear()
        repeats[raw] = process

    def read_connection_line(self, raw: str, number: int) -> bool:
        """Read `raw` at once when it is a whole clean connection line (:data:`CONNECTION_LINE`), as
        :meth:`read` would; False, having done nothing, for any other line."""
        whole = CONNECTION_LINE.match(raw) if " via " in raw else None
        if whole is None:
            return False
        host, pid_text, dev_text, *connection = whole.groups()
        parsed = connection_of(*connection)
        if not parsed:
            return False
        pid = int(pid_text)
        self.lines = number
        self.nccl_lines += 1
        self.hosts.saw(host, pid)
        self.suffix = None
        dropped = self.edges_dropped
        self.add_connection(parsed, host, pid, int(dev_text), number)
        if self.edges_dropped == dropped:
            self.remember(raw, (host, pid))
        return True

    def take(self, batch: list[str], start: int, before: int) -> int:
        """:data:`~topo.formats.lines.Take`: the lines of `batch` from `start` on, read here in one loop (most of a
        long log is lines without NCCL's name and repeats, which only count), up to the first one the cleaner must
        see; its index, or `len(batch)`."""
        repeats = self.memo()
        joins = self.joins
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
            process = repeats.get(raw)
            if process is not None:
                again.append(process)
                continue
            if self.read_connection_line(raw, before + index + 1):
                continue
            self.lines = before + index
            if self.read(raw):
                handed = index
                break
            if self.joins != joins:  # the memo was emptied
                repeats = self.memo()
                joins = self.joins
        self.lines = before + min(handed + 1, len(batch))
        self.nccl_lines += len(again)
        self.hosts.saw_again(Counter(again))
        return handed

    def info(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> None:
        if inert(message):
            self.suffix = None
            self.settled = True
            return
        super().info(message, host, pid, dev, number)
