"""A long NCCL log repeats its lines: each distinct line is read once, and a repeat only counts, unless the
process's communicators changed in between (then the same text belongs to the new one)."""

from __future__ import annotations

from typing import Any

import pytest

from linkscope.topo.formats.nccl_log import read_nccl_log_lines
from linkscope.topo.formats.nccl_log_once import OnceReader
from support.paths import FIXTURES

INIT = "nodeA:100:120 [0] NCCL INFO ncclCommInitRank comm {pointer} rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId {id}"
INIT_A = INIT.format(pointer="0x11", id="0xaaa - Init START")
INIT_B = INIT.format(pointer="0x99", id="0xbbb - Init START")
CONNECTION = "nodeA:100:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
CHATTER = "nodeA:100:121 [0] NCCL INFO [Service thread] Connection closed by localRank 0"


def test_a_repeated_line_is_counted_and_read_once() -> None:
    log = read_nccl_log_lines([INIT_A, *([CONNECTION, CHATTER, "loss 2.1"] * 50)], "x.log")
    assert log.lines == 151 and log.nccl_lines == 101
    assert [(edge.comm, edge.src, edge.dst, edge.transport) for edge in log.edges] == [("0xaaa", 0, 1, "P2P")]


def test_the_same_line_after_a_new_communicator_belongs_to_it() -> None:
    log = read_nccl_log_lines([INIT_A, CONNECTION, CONNECTION, INIT_B, CONNECTION, CONNECTION], "x.log")
    assert sorted(edge.comm or "" for edge in log.edges) == ["0xaaa", "0xbbb"]


def test_repeats_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.topo.formats.nccl_log_once as reader_module

    monkeypatch.setattr(reader_module, "MAX_PARSED_LINES", 3)
    reader = OnceReader("x.log")
    lines = [INIT_A] + [f"nodeA:100:120 [0] NCCL INFO Channel {channel:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
                        for channel in range(10)] * 3
    for raw in lines:
        reader.keep(raw)
    assert len(reader.repeats) <= 3
    assert len(reader.result().edges) == 10


class _Forgetful(set[Any]):
    """A `told` set that never holds anything: every connection line's facts are written out again."""

    def __contains__(self, item: object) -> bool:
        return False


SAME_RANKS_TOLD_OTHERWISE = [
    INIT_A,
    CONNECTION,
    "nodeA:100:120 [0] NCCL INFO Channel 01/0 : 0[1b000] -> 1[3e000] via P2P/CUMEM/read",  # bus ids this time
    "nodeB:300:320 [3] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read",  # another process names rank 0
    "nodeA:100:120 [1] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/CUMEM/read",  # another device
]


@pytest.mark.parametrize("lines", [SAME_RANKS_TOLD_OTHERWISE] + [
    path.read_text(encoding="utf-8").split("\n") for path in sorted((FIXTURES / "real" / "nccl_debug").glob("*.txt"))])
def test_what_a_line_told_of_its_ranks_is_skipped_only_when_it_would_change_nothing(lines: list[str]) -> None:
    """Each real log, and lines that tell other facts of the same ranks, read with the reader skipping what its
    connection lines already told of their ranks, and writing it all out again: the same ranks and connections."""
    remembering = read_nccl_log_lines(lines, "x.log")
    original = OnceReader.__init__

    def forgetful(self: OnceReader, name: str) -> None:
        original(self, name)
        self.told = _Forgetful()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OnceReader, "__init__", forgetful)
        assert read_nccl_log_lines(lines, "x.log") == remembering
