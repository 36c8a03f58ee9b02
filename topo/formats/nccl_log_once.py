"""Each distinct line of an NCCL log read once: a long log repeats its lines (every channel's connection for
every new communicator, proxy and timing chatter through the whole run), and a line already read and recorded
adds nothing the second time but a count, while its process's communicators stand.

:class:`OnceReader` is :class:`~topo.formats.nccl_log_reader.LogReader` with that memo in front of it, and a quick
reading of the lines that make up most of a large log's distinct ones: NCCL's clean INFO lines that state a
connection, or that no part of the reader looks at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Generic, TypeVar

from linkscope.topo.common.limits import MAX_PARSED_LINES
from linkscope.topo.formats.nccl_log_lines import (
    CLEAN_CHANNEL,
    CLEAN_ENDS,
    CLEAN_PREFIX,
    ends_of,
    matters_without_nccl,
)
from linkscope.topo.formats.nccl_log_reader import Link, LogReader
from linkscope.topo.formats.nccl_log_topology import TOPOLOGY_STARTS

Process = tuple[str, int]
"""(host, pid) of a line with NCCL's own prefix."""
CleanPrefix = tuple[str, int, int]
"""(host, pid, cudaDev) of a :data:`~topo.formats.nccl_log_lines.CLEAN_PREFIX`."""
INFO_MARKER = " NCCL INFO "
_Known = TypeVar("_Known")


def inert(message: str) -> bool:
    """True for an INFO message no part of the reader looks at (`[Service thread] ...`, `[Proxy Progress] ...`,
    timings): what :meth:`LogReader.info` reads starts with C, R, T, N, names a `comm 0x`, is an error trace with
    ` -> `, or may be one of NCCL's topology and graph lines (:data:`TOPOLOGY_STARTS`: a space, `=`, `+`, `P` or a
    digit)."""
    first = message[:1]
    return bool(first) and first not in "CRTN" and first not in TOPOLOGY_STARTS and "comm 0x" not in message \
        and " -> " not in message


def clean_prefix(text: str) -> CleanPrefix | None:
    """What `text`, the part of a raw line before its first ` NCCL INFO `, says when it is a whole
    :data:`~topo.formats.nccl_log_lines.CLEAN_PREFIX`; None otherwise."""
    whole = CLEAN_PREFIX.fullmatch(text)
    return None if whole is None else (whole.group(1), int(whole.group(2)), int(whole.group(3)))


def clean_channel(text: str) -> int | None:
    """The channel `text` names when it is a whole :data:`~topo.formats.nccl_log_lines.CLEAN_CHANNEL`; None
    otherwise."""
    whole = CLEAN_CHANNEL.fullmatch(text)
    return None if whole is None else int(whole.group(1))


def plain_info(raw: str, message: str) -> bool:
    """Whether `raw`, whose INFO `message` follows a clean prefix, needs no cleaning and is one process's line:
    ASCII, no escape or carriage return, no trailing space, no second NCCL marker."""
    return raw.isascii() and raw[-1] > " " and "\x1b" not in raw and "\r" not in raw \
        and "NCCL INFO" not in message and "NCCL WARN" not in message


class TextMemo(dict[str, _Known], Generic[_Known]):
    """What `read` says of each text, read at the first look-up of the text and then known by it (bounded: once
    MAX_PARSED_LINES texts are known, a new one is read at each look-up). `get` only looks."""

    def __init__(self, read: Callable[[str], _Known]) -> None:
        super().__init__()
        self.read = read

    def __missing__(self, text: str) -> _Known:
        known = self.read(text)
        if len(self) < MAX_PARSED_LINES:
            self[text] = known
        return known


class OnceReader(LogReader):
    """A LogReader that reads each distinct line once (bounded memo, cleared when full)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.repeats: dict[str, Process] = {}
        """Line -> the process that wrote it. A line says the same again only while no process has joined a
        communicator since (a new one may claim the same text), so the memo is emptied whenever one joins."""
        self.memo_joins = 0
        """:attr:`joins` when the memo was last emptied."""
        self.processes: dict[Process, Process] = {}
        """Each process's (host, pid), the one tuple that stands for it in the memo."""
        self.clean_prefixes: TextMemo[CleanPrefix | None] = TextMemo(clean_prefix)
        """The text before ` NCCL INFO ` -> what it says as a :data:`CleanPrefix`, or None when it is not one."""
        self.clean_channels: TextMemo[int | None] = TextMemo(clean_channel)
        """A connection message's text before ` : ` -> the channel it names, or None when it is not one."""
        self.links: dict[tuple[str, str], tuple[Link, Process]] = {}
        """(prefix text, connection text after ` : `) -> what such a clean connection line says on any channel, and
        its process; emptied with the memo (the communicator is the printer's at the time)."""

    def memo(self) -> dict[str, Process]:
        """The memo, emptied first when a process joined a communicator since it was last emptied."""
        if self.joins != self.memo_joins:
            self.repeats.clear()
            self.links.clear()
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
            self.remember(raw, self.process_of(self.prefix[0], self.prefix[1]))
        return kept

    def process_of(self, host: str, pid: int) -> Process:
        """(host, pid), one tuple for all the lines of a process while there is room (the repeats are counted by
        it: a tuple known by its identity is found without comparing it)."""
        key = (host, pid)
        if len(self.processes) < MAX_PARSED_LINES:
            return self.processes.setdefault(key, key)
        return self.processes.get(key, key)

    def remember(self, raw: str, process: Process) -> None:
        """`raw`, written by `process`, says nothing new when it comes again (bounded: when full, the memo is
        emptied, and the lines that recur come back at once)."""
        repeats = self.repeats  # (a process that joined a communicator since empties it at the next look)
        if len(repeats) >= MAX_PARSED_LINES:
            repeats.clear()
        repeats[raw] = process

    def read_clean_line(self, raw: str, number: int) -> Process | None:
        """Read `raw`, line `number`, at once when it is NCCL's clean INFO line that states a connection or that no
        part of the reader looks at (:func:`inert`), as :meth:`read` would but for the count of NCCL's lines and of
        its process's, which the caller makes: the process that wrote it. None, having done nothing, for any other
        line. A clean connection line whose prefix and ends were read before, while no process joined a
        communicator, costs a lookup of its pieces."""
        prefix_text, _, message = raw.partition(INFO_MARKER)
        channel_text, _, ends_text = message.partition(" : ")
        known = self.links.get((prefix_text, ends_text))
        channel = self.clean_channels.get(channel_text)
        if known is None or channel is None:
            return self.read_new_clean_line(raw, number)
        link, process = known
        if self.add_link(link, channel, number):
            self.remember(raw, process)
        return process

    def read_new_clean_line(self, raw: str, number: int) -> Process | None:
        """:meth:`read_clean_line` for a line whose pieces are not known together: each read (and kept when it is a
        connection's) or refused."""
        marker = raw.find(INFO_MARKER)
        prefix = self.clean_prefixes[raw[:marker]] if marker > 0 else None
        if prefix is None:
            return None
        message = raw[marker + len(INFO_MARKER):]
        channel_text, colon, ends_text = message.partition(" : ")
        channel = self.clean_channels[channel_text] if colon else None
        host, pid, dev = prefix
        process = self.process_of(host, pid)
        if channel is not None:
            whole = CLEAN_ENDS.fullmatch(ends_text)
            ends = ends_of(*whole.groups()) if whole is not None else ()
            if not ends:
                return None
            self.suffix = None  # no clean connection line ends with a communicator (one the last line named is gone)
            link = self.link_of(ends, host, pid, dev)
            if len(self.links) < MAX_PARSED_LINES:
                self.links[(raw[:marker], ends_text)] = (link, process)
            self.hosts.meet(host, pid)
            if self.add_link(link, channel, number):
                self.remember(raw, process)
            return process
        if not (inert(message) and plain_info(raw, message)):
            return None
        self.hosts.meet(host, pid)
        self.suffix = None
        self.remember(raw, process)
        return process

    def take(self, batch: list[str], start: int, before: int) -> int:
        """:data:`~topo.formats.lines.Take`: the lines of `batch` from `start` on, read here in one loop (most of a
        long log is lines without NCCL's name and repeats, which only count), up to the first one the cleaner must
        see; its index, or `len(batch)`."""
        repeats = self.memo()
        joins = self.joins
        again: list[Process] = []
        """The process of each line read here at once or repeated, counted into the host book when the loop ends."""
        remembered, counted = repeats.get, again.append  # (the memo is emptied in place)
        handed = len(batch)
        for index in range(start, handed):
            raw = batch[index]
            if "NCCL" not in raw:
                if matters_without_nccl(raw):
                    handed = index
                    break
                continue
            process = remembered(raw)
            if process is None:
                process = self.read_clean_line(raw, before + index + 1)
                if process is None:
                    self.lines = before + index
                    if self.read(raw):
                        handed = index
                        break
                    if self.joins != joins:  # the memo was emptied
                        self.memo()
                        joins = self.joins
                    continue
            counted(process)
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
