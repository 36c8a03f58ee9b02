"""The NCCL log reader's fast path (chunks decoded at once, lines without NCCL's name and repeats passed over in one
loop) reads every real log exactly as the full path does: each line decoded on its own, cleaned when the reader
asks, and read by the plain reader that remembers no line."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linkscope.topo.formats.nccl_log as nccl_log
from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.lines import iter_clean_lines
from linkscope.topo.formats.nccl_log import read_nccl_log_stream
from linkscope.topo.formats.nccl_log_lines import UNREADABLE
from linkscope.topo.formats.nccl_log_model import Edge, NcclLog
from linkscope.topo.formats.nccl_log_reader import LogReader
from support.paths import FIXTURES
from support.variant import PREFIX_STYLES, clash, coloured

REAL_FILES = sorted((FIXTURES / "real" / "nccl_debug").glob("*.txt"))
LINE_LIMIT_BYTES = 300
"""The overlong-line cap the tests read with, so that a generated long line crosses it."""


def full_path(data: bytes, name: str) -> NcclLog | str:
    """The reference reading: every line decoded on its own, every line offered to the plain reader (no memo)."""
    pieces = data.split(b"\n")
    if pieces and not pieces[-1]:
        pieces.pop()
    lines = []
    for raw in pieces:
        try:
            lines.append(raw.decode("utf-8") if len(raw) <= LINE_LIMIT_BYTES else UNREADABLE)
        except UnicodeDecodeError:
            lines.append(UNREADABLE)
    reader = LogReader(name)
    for line in iter_clean_lines(lines, keep=reader.keep):
        reader.feed(line)
    try:
        return reader.result()
    except InputError as exc:
        return str(exc)


def fast_path(data: bytes, name: str) -> NcclLog | str:
    try:
        return read_nccl_log_stream(io.BytesIO(data), name)
    except InputError as exc:
        return str(exc)


def variant(text: str, name: str, seed: int, crlf: bool, colour: bool, noise: bool) -> str:
    """`text` as a launcher, a terminal and a busy program may leave it: some lines prefixed (each style that can
    be told from the file's own text), some coloured, CRLF line ends, non-ASCII and overlong lines among them."""
    chooser = random.Random(seed)
    lines = text.split("\n")
    styles = [style for style in sorted(PREFIX_STYLES) if not clash(style, name, lines)]
    style = chooser.choice(styles)
    out = []
    for line in lines:
        if chooser.random() < 0.5:
            line = PREFIX_STYLES[style](chooser.randrange(4), "gpu-node-07") + line
        if colour and chooser.random() < 0.2:
            line = coloured(line, chooser.randrange(1000))
        if noise and chooser.random() < 0.05:
            out.append(chooser.choice(["step 3 loss 2.31 — lr 3e-4 ✓", "x" * (LINE_LIMIT_BYTES + 1),
                                       "NCCL INFO " + "y" * LINE_LIMIT_BYTES]))
        out.append(line)
    return ("\r\n" if crlf else "\n").join(out)


@pytest.fixture(autouse=True)
def _small_line_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nccl_log, "MAX_NCCL_LOG_LINE_BYTES", LINE_LIMIT_BYTES)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(REAL_FILES), seed=st.integers(min_value=0, max_value=2**32), crlf=st.booleans(),
       colour=st.booleans(), noise=st.booleans(), chunk_bytes=st.sampled_from([61, 4096, 1 << 20]))
def test_fast_and_full_path_read_real_logs_alike(path: Path, seed: int, crlf: bool, colour: bool, noise: bool,
                                                 chunk_bytes: int) -> None:
    text = variant(path.read_text(encoding="utf-8"), path.name, seed, crlf, colour, noise)
    data = text.encode("utf-8")
    nccl_log.CHUNK_BYTES, original = chunk_bytes, nccl_log.CHUNK_BYTES
    try:
        assert fast_path(data, path.name) == full_path(data, path.name)
    finally:
        nccl_log.CHUNK_BYTES = original


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda path: path.name)
def test_each_real_log_reads_alike_with_repeats_and_chatter(path: Path) -> None:
    """Each file twice over with the program's own output between its lines: the fast path counts the repeats
    and passes the chatter, the full path reads every line."""
    lines = path.read_text(encoding="utf-8").split("\n")
    doubled = [item for line in lines for item in (line, f"[rank0]:iteration {len(line)} loss 2.0")] * 2
    data = "\n".join(doubled).encode("utf-8")
    assert fast_path(data, path.name) == full_path(data, path.name)


def test_a_non_ascii_or_cut_chunk_reads_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-byte character split by the chunk boundary, an undecodable line and an overlong one: the same lines
    as read one by one (the first two decoded, the last two unreadable)."""
    monkeypatch.setattr(nccl_log, "CHUNK_BYTES", 5)
    data = "ab\nnäme ✓\n".encode() + b"\xff\xfe\n" + b"z" * (LINE_LIMIT_BYTES + 1) + b"\nend"
    lines = [line for batch in nccl_log._decoded_batches(io.BytesIO(data), "x.log", None) for line in batch]
    assert lines == ["ab", "näme ✓", UNREADABLE, UNREADABLE, "end"]


@pytest.mark.parametrize("offset", [0, 1, LINE_LIMIT_BYTES // 2 - 1, LINE_LIMIT_BYTES // 2, LINE_LIMIT_BYTES - 1])
def test_a_line_at_the_limit_is_kept_and_one_past_it_is_not_wherever_it_starts(offset: int) -> None:
    """One chunk, decoded at once: a line of the limit's length is a line, one a character longer is unreadable,
    however the lines before put it against the stretches the decoder looks for newlines in."""
    lines = ["a" * offset, "b" * LINE_LIMIT_BYTES, "c" * (LINE_LIMIT_BYTES + 1), "d" * LINE_LIMIT_BYTES, "end"]
    data = "\n".join(lines).encode("ascii")
    decoded = [line for batch in nccl_log._decoded_batches(io.BytesIO(data), "x.log", None) for line in batch]
    assert decoded == [lines[0], lines[1], UNREADABLE, lines[3], "end"]


def test_a_prefix_known_by_its_text_reads_as_the_pattern_reads_it() -> None:
    """Every line of every real log, read twice (the second time the prefix is known by its text): where NCCL's
    prefix ends and what it says are what the prefix pattern says of that line alone."""
    from linkscope.topo.formats.nccl_log_lines import LEADING

    reader = LogReader("x.log")
    checked = 0
    for path in REAL_FILES:
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            text = raw.rstrip()
            match = LEADING.match(text)
            expected = None if match is None else (match.end(), (match.group(1), int(match.group(2)),
                                                                 int(match.group(3)), match.group(4) == "WARN"))
            assert reader.leading_prefix(text) == expected and reader.leading_prefix(text) == expected, raw
            checked += match is not None
    assert checked > 1000


CLEAN_CONNECTION = "gpu-a:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
EDGE_CONNECTIONS = [
    "gpu-a:100:120 [0] NCCL INFO Channel 01/0 : 0[1b000] -> 1[3e000] via P2P/IPC/read",  # bus ids, same ranks
    "gpu-a:100:120 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read\tx",  # a tab in the detail
    "gpu-a:100:120 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via FOO/bar",  # no transport NCCL prints
    "gpu-a:100:120 [0] NCCL INFO Channel 04/0 : 0[0] -> 1[1] via P2P/direct pointer",  # a detail of two words
    "gpu-a:100:120 [0] NCCL INFO Channel 05/0 : 0[0] -> 1[1] via P2P/CUMEM/read ",  # a trailing space
    "gpu-a:100:120 [0] NCCL INFO Channel 06/0 : 0[0] -> 1[1] via P2P/CUMEM/read\r",  # a carriage return
    "gpu-a:100:120 [0] NCCL INFO Channel 07/0 : 0[0] -> 1[1] via P2P/CUMEM/readgpu-b:7:7 [1] NCCL INFO x",  # fused
    "gpu-a:100:120 [0] NCCL INFO Channel 08/0 : 0[0] -> 1[1] via P2P/CUMEM/read comm 0x7f nRanks 02",  # a suffix
    "gpü-a:100:120 [0] NCCL INFO Channel 09/0 : 0[0] -> 1[1] via P2P/CUMEM/read",  # a host that is not ASCII
    "_gpu:100:120 [0] NCCL INFO Channel 10/0 : 0[0] -> 1[1] via P2P/CUMEM/read",  # a host the cleaner must see
    "gpu-a:100:120 [0] init.cc:12 NCCL INFO Channel 11/0 : 0[0] -> 1[1] via P2P/CUMEM/read",  # a source location
    "gpu-b:200:220 [1] NCCL INFO Channel 12/1 : 1[1] -> 0[0] [receive] via NET/IB/0(2)/GDRDMA",  # another process
    "gpu-a:100:120 [2] NCCL INFO Channel 13/0 : 0[0] -> 1[1] via SHM/direct/direct",  # the same rank, another dev
]


EDGE_INERT = [
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Device 0 CPU core 3 ",  # a trailing space
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Device 0 CPU core 3\r",  # a carriage return
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] \x1b[1mDevice 0\x1b[0m",  # an escape
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Gerät 0",  # not ASCII
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Device 0gpu-b:7:7 [1] NCCL INFO Trees [0] -1/-1/-1->1->0",  # fused
    "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Device 0gpu-b:7:7 [1] init.cc:1 NCCL WARN Cuda failure",  # fused
    "gpu-a:100:121 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",  # starts with C
    "gpu-a:100:121 [0] NCCL INFO Trees [0] -1/-1/-1->0->1",  # starts with T
    "gpu-a:100:121 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0",  # starts with N
    "gpu-a:100:121 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels",  # a digit
    "gpu-a:100:121 [0] NCCL INFO === System : maxBw 24.0 totalBw 240.0 ===",  # a topology line
    "gpu-a:100:121 [0] NCCL INFO init.cc:1234 -> 3",  # an error trace
    "gpu-a:100:121 [0] NCCL INFO ncclCommInitRank comm 0x7f nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",  # comm 0x
    "gpu-a:100:121 [0] NCCL INFO Channel 00/02 :    0   1",  # a ring order: a channel, then no connection
    "gpu-a:100:121 [0] NCCL INFO Ring 00 : 1 -> 0 -> 1",  # a ring's neighbours
    "gpu-a:100:121 [0] NCCL INFO",  # nothing after the marker
]
CLEAN_INERT = "gpu-a:100:121 [0] NCCL INFO [Proxy Progress] Device 0 CPU core 3"


def taken_lines(lines: list[str], reader_first: list[str]) -> list[str]:
    """The lines a reader reads at once (:meth:`OnceReader.read_clean_line`), each by a reader that read
    `reader_first` before; each line it refuses leaves the reader's tables as they were."""
    from linkscope.topo.formats.nccl_log_once import OnceReader

    taken = []
    for line in lines:
        reader = OnceReader("x.log")
        for number, first in enumerate(reader_first, start=1):
            assert reader.read_clean_line(first, number) is not None
        before = (reader.nccl_lines, dict(reader.edges), dict(reader.repeats), dict(reader.hosts.lines),
                  {key: dict(facts) for key, facts in reader.ranks.items()})
        if reader.read_clean_line(line, len(reader_first) + 1) is not None:
            taken.append(line)
        else:
            assert (reader.nccl_lines, reader.edges, reader.repeats, reader.hosts.lines, reader.ranks) == before, line
    return taken


@pytest.mark.parametrize("first", [[], [CLEAN_CONNECTION, CLEAN_INERT]], ids=["new", "pieces-known"])
def test_a_clean_line_is_read_at_once_and_any_other_as_before(first: list[str]) -> None:
    """A clean connection line, or a clean line no part of the reader looks at, is read at once, whether its
    pieces (prefix, channel, ends) were read before or not; every line the pieces cannot vouch for is left to the
    full reading, untouched; the log reads as the full path reads it."""
    assert taken_lines([CLEAN_CONNECTION, CLEAN_INERT], first) == [CLEAN_CONNECTION, CLEAN_INERT]
    assert taken_lines(EDGE_CONNECTIONS, first) == [EDGE_CONNECTIONS[0], EDGE_CONNECTIONS[11], EDGE_CONNECTIONS[12]]
    assert taken_lines(EDGE_INERT, first) == []
    lines = [CLEAN_CONNECTION, CLEAN_INERT, *EDGE_CONNECTIONS, *EDGE_INERT, CLEAN_CONNECTION,
             *reversed(EDGE_CONNECTIONS), *reversed(EDGE_INERT)]
    data = "\n".join(lines).encode("utf-8")
    read = fast_path(data, "x.log")
    assert read == full_path(data, "x.log")
    assert isinstance(read, NcclLog) and len(read.edges) >= 8


def test_the_pieces_of_a_clean_connection_line_read_as_the_whole_pattern() -> None:
    """Every line of every real log, clean or not, with each channel: a line is read at once as a connection
    exactly when the whole pattern (prefix, ` NCCL INFO `, channel, ` : `, ends) matches it, and then as
    :data:`CONNECTION` reads its message."""
    import re

    from linkscope.topo.formats.nccl_log_lines import CLEAN_CHANNEL, CLEAN_ENDS, CLEAN_PREFIX, parse_connection
    from linkscope.topo.formats.nccl_log_once import OnceReader

    whole = re.compile(f"{CLEAN_PREFIX.pattern} NCCL INFO ({CLEAN_CHANNEL.pattern}) : ({CLEAN_ENDS.pattern})",
                       re.ASCII)
    reader = OnceReader("x.log")
    read = 0
    for path in REAL_FILES:
        for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").split("\n"), start=1):
            match = whole.fullmatch(raw)
            parsed = parse_connection(raw.split(" NCCL INFO ", 1)[1]) if match is not None else ()
            edges = len(reader.edges)
            process = reader.read_clean_line(raw, number)
            if parsed:
                assert match is not None and process == (match.group(1), int(match.group(2))), raw
                read += 1
            else:  # refused, or read at once as a line the reader passes over: no connection either way
                assert len(reader.edges) == edges, raw
    assert read > 1000


def test_a_connection_read_before_a_process_joins_belongs_after_it_to_the_new_communicator() -> None:
    """The same connection on another channel after the process joined another communicator: its pieces were
    known, but what they say (the communicator) is read again."""
    from linkscope.topo.formats.nccl_log import read_nccl_log_lines

    init = "gpu-a:100:120 [0] NCCL INFO ncclCommInitRank comm {} rank 0 nranks 2 cudaDev 0 busId 1b000 commId {} - Init START"
    lines = [init.format("0x11", "0xaaa"), CLEAN_CONNECTION, init.format("0x99", "0xbbb"),
             CLEAN_CONNECTION.replace("Channel 00/0", "Channel 01/0")]
    log = read_nccl_log_lines(lines, "x.log")
    assert [(edge.comm, edge.channel) for edge in log.edges] == [("0xaaa", 0), ("0xbbb", 1)]
    data = "\n".join(lines).encode("utf-8")
    assert fast_path(data, "x.log") == full_path(data, "x.log") == log


EdgeKeys = dict[tuple[str | None, int, int | None, int, str | None, str], int]
"""The reader's connections: (comm, src, dst, channel, side, detail) -> first line."""


def reference_edges(edges: EdgeKeys) -> tuple[Edge, ...]:
    """The connections as frozen one by one: each built, then all sorted."""
    from linkscope.topo.formats.nccl_log_lines import transport_class

    built = (Edge(comm, src, dst, channel, transport_class(detail) or "", detail, side, number)
             for (comm, src, dst, channel, side, detail), number in edges.items())
    return tuple(sorted(built, key=lambda edge: (edge.comm or "", edge.channel, edge.src, edge.dst or -1)))


UNSORTED_EDGES: EdgeKeys = {
    ("b", 1, 0, 0, None, "P2P/IPC"): 1, ("a", 1, 2, 0, None, "P2P/IPC"): 2, ("a", 1, 0, 0, None, "SHM/direct"): 3,
    ("a", 1, 1, 0, None, "P2P/IPC"): 4, ("a", 0, 3, 1, "send", "NET/IB/0"): 5, ("a", 0, 3, 1, "receive", "NET/IB/0"): 6,
    ("a", 1, 0, 0, "send", "NET/IB/0"): 7,
}


@pytest.mark.parametrize("edges", [
    UNSORTED_EDGES,  # nothing to place as None: sorted on the columns as they are
    UNSORTED_EDGES | {("a", 4, None, 0, "receive", "COLLNET/SHARP"): 8},  # a CollNet line: no destination
    UNSORTED_EDGES | {(None, 1, 0, 0, None, "P2P/IPC"): 9},  # no communicator known
], ids=["plain", "no-destination", "no-communicator"])
def test_the_connections_are_frozen_in_the_order_they_are_built_and_sorted_one_by_one(
        edges: EdgeKeys) -> None:
    from linkscope.topo.formats.nccl_log_frozen import frozen_edges

    frozen = frozen_edges(edges)
    assert frozen == reference_edges(edges) and all(type(edge) is Edge for edge in frozen)
    assert [edge.line for edge in frozen] != sorted(edges.values())


def test_each_real_log_freezes_its_connections_as_one_by_one() -> None:
    from linkscope.topo.formats.nccl_log_frozen import frozen_edges
    from linkscope.topo.formats.nccl_log_once import OnceReader

    for path in REAL_FILES:
        reader = OnceReader(path.name)
        for line in iter_clean_lines(path.read_text(encoding="utf-8").split("\n"), keep=reader.keep):
            reader.feed(line)
        assert frozen_edges(reader.edges) == reference_edges(reader.edges), path.name


def test_text_memo_reads_each_text_once_and_stops_keeping_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece's text is read at its first look-up only; `get` only looks; once the memo holds its bound, a new text
    is read at every look-up and not kept (memory stays bounded whatever the log)."""
    from linkscope.topo.formats import nccl_log_once

    monkeypatch.setattr(nccl_log_once, "MAX_PARSED_LINES", 2)
    reads: list[str] = []

    def read(text: str) -> int | None:
        reads.append(text)
        return None if text == "none" else len(text)

    memo = nccl_log_once.TextMemo(read)
    assert memo.get("abc") is None and reads == []
    assert [memo["abc"], memo["none"], memo["abc"], memo["none"]] == [3, None, 3, None]
    assert reads == ["abc", "none"]
    assert [memo["full"], memo["full"]] == [4, 4]
    assert reads == ["abc", "none", "full", "full"] and len(memo) == 2
