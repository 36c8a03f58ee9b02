"""Read NCCL's own `NCCL_DEBUG=INFO` log: version, ranks, communicators, rings, trees, connections.

Logs come from one or many ranks and hosts, with or without launcher prefixes (cleaned by
:mod:`topo.formats.lines`), interleaved with the program's own output, sometimes with two
processes' lines fused or a last line cut short. Every line that NCCL wrote and that reads
cleanly is used; a line that looks like NCCL's but cannot be read is skipped and counted, never
guessed at. The reader streams: memory grows with the number of distinct ranks and connections,
not with the size of the log.

Message formats, as NCCL prints them across versions (facts from its source and real logs):
- prefix `host:pid:tid [cudaDev] NCCL INFO ...`; warnings `host:pid:tid [cudaDev] file.cc:123 NCCL WARN ...`;
- `NCCL version 2.23.4+cuda12.4` (sometimes with no prefix at all, printed by rank 0);
- `comm 0x... rank R nranks N cudaDev D nvmlDev M busId B commId 0x... - Init START|COMPLETE`
  and `comm 0x... rank R nRanks N nNodes K localRanks L localRank l MNNVL m`;
- ring orders `Channel 00/24 :    0   1   2` (2.7+) and `Ring 00 : 0 1 2 3` (2.4-2.6); the
  newer `Ring 00 : 7 -> 0 -> 1` is previous -> rank -> next, not an order;
- `Trees [0] 1/4/-1->0->-1 [1] ...`: children / this rank / parent per channel;
- connections `Channel 00/1 : 3[1] -> 4[0] [send] via NET/IB/0(2)/GDRDMA`, `Channel 00 :
  11[3e000] -> 9[1b000] via P2P/direct pointer`, `Ring 00 : 3[3] -> 2[2] via P2P/IPC`,
  `Ring 00 : 43 -> 44 [receive] via NET/Socket/0`: the bracket holds a bus id (hex, 2.5 to about 2.18)
  or a device index (cudaDev in 2.4, nvmlDev in recent versions); `[receive]` lines are printed by the receiver;
  `CollNet 00/0 : 4 [receive] via COLLNET/SHARP/0/GDRDMA` names one rank;
- `NCCL_X set by environment to V.` and `NCCL_IB_HCA set to V`.
"""
from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.files import open_input
from linkscope.topo.common.limits import MAX_NCCL_LOG_LINE_BYTES, MAX_STDIN_BYTES
from linkscope.topo.formats.lines import iter_clean_batches
from linkscope.topo.formats.nccl_log_lines import UNREADABLE
from linkscope.topo.formats.nccl_log_model import NcclLog
from linkscope.topo.formats.nccl_log_once import OnceReader


def read_nccl_log_file(path: str) -> NcclLog:
    """Read FILE (or `-`: stdin, up to MAX_STDIN_BYTES) as an NCCL log; every failure is one InputError line."""
    if path == "-":
        return read_nccl_log_stream(sys.stdin.buffer, "<stdin>", MAX_STDIN_BYTES)
    try:
        with open_input(path) as handle:
            return read_nccl_log_stream(handle, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def read_nccl_log_stream(stream: BinaryIO, name: str, max_bytes: int | None = None) -> NcclLog:
    """Read a log from a binary stream, a chunk at a time; InputError `name:line: ...` on a binary or empty input."""
    return read_nccl_log_batches(_decoded_batches(stream, name, max_bytes), name)


def read_nccl_log_text(text: str, name: str) -> NcclLog:
    """Read a log held as text (tests, small inputs)."""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(f"{name}:{line}: binary data (a NUL byte), not a text log")
    lines = text.split("\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the newline ending the last line starts no new line
    return read_nccl_log_batches([lines], name)


def read_nccl_log_lines(raw_lines: Iterable[str], name: str) -> NcclLog:
    """Read decoded raw lines (a line that is exactly :data:`UNREADABLE` counts as skipped)."""
    iterator = iter(raw_lines)
    return read_nccl_log_batches(iter(lambda: list(itertools.islice(iterator, BATCH_LINES)), []), name)


def read_nccl_log_batches(batches: Iterable[list[str]], name: str) -> NcclLog:
    """Read decoded raw lines, given as lists in order."""
    reader = OnceReader(name)
    with collector_paused():  # a long log's ranks and connections are many small objects that all live on
        for line in iter_clean_batches(batches, reader.take):
            reader.feed(line)
        return reader.result()


CHUNK_BYTES = 1 << 20
BATCH_LINES = 4096
"""Lines per list when a log comes as single lines."""


def _decoded_batches(stream: BinaryIO, name: str, max_bytes: int | None) -> Iterator[list[str]]:
    """The lines of `stream` as text, a list per chunk read; undecodable or overlong lines become :data:`UNREADABLE`.

    A chunk of plain ASCII whose lines all fit (the common case) is decoded and split once; any other chunk goes
    line by line."""
    total = 0
    number = 0
    carry = b""
    overlong = False
    while True:
        chunk = stream.read(CHUNK_BYTES)
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise InputError(f"{name}: input is larger than the {max_bytes // (1024 * 1024)} MiB limit")
        if b"\x00" in chunk:
            line = number + (carry + chunk[:chunk.index(b"\x00")]).count(b"\n") + 1
            raise InputError(f"{name}:{line}: binary data (a NUL byte), not a text log")
        if not chunk:
            if carry or overlong:
                yield [UNREADABLE if overlong else _decode(carry)]
            return
        data = carry + chunk if carry else chunk
        whole = _ascii_lines(data) if not overlong else None
        if whole is not None:
            lines, carry = whole
        else:
            pieces = data.split(b"\n")
            carry = pieces.pop()
            lines = []
            for raw in pieces:
                if overlong:
                    overlong = False
                    lines.append(UNREADABLE)
                elif len(raw) > MAX_NCCL_LOG_LINE_BYTES:
                    lines.append(UNREADABLE)
                else:
                    lines.append(_decode(raw))
        number += len(lines)
        if lines:
            yield lines
        if len(carry) > MAX_NCCL_LOG_LINE_BYTES:
            carry = b""
            overlong = True


def _ascii_lines(data: bytes) -> tuple[list[str], bytes] | None:
    """The whole lines of `data` and the bytes after the last newline, when `data` is ASCII and no line is longer
    than :data:`MAX_NCCL_LOG_LINE_BYTES` (one decode for the chunk); None otherwise."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return None
    end = text.rfind("\n") + 1
    lines = text.split("\n")
    rest = lines.pop()
    if _may_hold_overlong(text, end) and max(map(len, lines), default=0) > MAX_NCCL_LOG_LINE_BYTES:
        return None
    return lines, rest.encode("ascii")


def _may_hold_overlong(text: str, end: int) -> bool:
    """Whether `text[:end]` may hold a line longer than :data:`MAX_NCCL_LOG_LINE_BYTES`: False when each aligned
    stretch of half that length holds a newline (a longer line would cover one whole)."""
    half = max(1, MAX_NCCL_LOG_LINE_BYTES // 2)
    return any(text.find("\n", start, start + half) < 0 for start in range(0, end, half))


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return UNREADABLE
