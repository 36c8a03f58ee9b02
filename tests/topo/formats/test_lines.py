"""The line-cleaning front end: launcher/logging prefixes, escapes, quotes and fences removed, numbers kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from linkscope.topo.formats.lines import DETECTION_LINES, Line, clean_lines, iter_clean_lines
from support.paths import FIXTURES
from support.variant import PREFIX_STYLES as PREFIXES
from support.variant import clash

REAL = FIXTURES / "real"
REAL_FILES = sorted(p for p in REAL.rglob("*.txt"))


def _texts(lines: list[Line]) -> list[str]:
    return [line.text for line in lines]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("style", sorted(PREFIXES))
def test_every_prefix_style_reads_like_the_clean_file(path: Path, style: str) -> None:
    raw = path.read_text().split("\n")
    why = clash(style, path.name, raw)
    if why:
        pytest.skip(why)
    clean = _texts(clean_lines("\n".join(raw)))
    prefixed = "\n".join(PREFIXES[style](3, "gpu-node-07") + line for line in raw)
    assert _texts(clean_lines(prefixed)) == clean


@settings(max_examples=60, deadline=None)
@given(
    styles=st.lists(st.sampled_from(sorted(PREFIXES)), min_size=1, max_size=3, unique=True),
    file_index=st.integers(min_value=0, max_value=len(REAL_FILES) - 1),
    rank=st.integers(min_value=0, max_value=99),
    escapes=st.booleans(),
    crlf=st.booleans(),
)
def test_stacked_prefixes_escapes_and_crlf_change_nothing(styles: list[str], file_index: int, rank: int,
                                                          escapes: bool, crlf: bool) -> None:
    raw = REAL_FILES[file_index].read_text().split("\n")
    assume(not any(clash(style, REAL_FILES[file_index].name, raw) for style in styles))
    clean = _texts(clean_lines("\n".join(raw)))
    # The ambiguous styles (pdsh, srun) are only read as prefixes outermost, the way a launcher adds them.
    order = sorted(styles, key=lambda s: s not in ("pdsh", "srun"))
    colour = ("\x1b[1;32m", "\x1b[0m") if escapes else ("", "")
    ending = "\r" if crlf else ""
    lines = [colour[0] + "".join(PREFIXES[s](rank, "node-a1") for s in order) + colour[1] + line + ending for line in raw]
    assert _texts(clean_lines("\n".join(lines))) == clean


def test_prefix_names_rank_and_host_and_keeps_line_numbers() -> None:
    lines = clean_lines(
        "```text\n"
        "[1,3]<stdout>:# Rank  3 Group  0 Pid 1234 on node1 device  3\n"
        "(head, rank=0, pid=3808) hello\n"
        "(RayWorker pid=12, ip=10.0.0.2) world\n"
        "[pod/trainer-0/main] NCCL INFO x\n"
        "[default5]:torchrun line\n"
        "```\n"
    )
    assert lines[0] == Line(1, "")
    assert lines[1] == Line(2, "# Rank  3 Group  0 Pid 1234 on node1 device  3", rank=3)
    assert lines[2] == Line(3, "hello", rank=0, host="head")
    assert lines[3] == Line(4, "world", host="10.0.0.2")
    assert lines[4] == Line(5, "NCCL INFO x", host="trainer-0")
    assert lines[5] == Line(6, "torchrun line", rank=5)
    assert lines[6] == Line(7, "")


def test_ambiguous_styles_need_a_majority() -> None:
    p2p = "Device: 0, NVIDIA H100 PCIe, pciBusID: 1\nDevice: 1, NVIDIA H100 PCIe, pciBusID: 2\n" + "x\n" * 5
    assert clean_lines(p2p)[0].text == "Device: 0, NVIDIA H100 PCIe, pciBusID: 1"
    pdsh = "\n".join(f"dgx{n % 2}: Device: {n}, NVIDIA" for n in range(4))
    assert [(line.host, line.text) for line in clean_lines(pdsh)] == [
        ("dgx0", "Device: 0, NVIDIA"), ("dgx1", "Device: 1, NVIDIA"),
        ("dgx0", "Device: 2, NVIDIA"), ("dgx1", "Device: 3, NVIDIA")]
    srun = "\n".join(f"{n:>2}: #  size  count" for n in range(12))
    assert [line.rank for line in clean_lines(srun)] == list(range(12))


def test_terminal_capture_underlined_header_and_overwritten_progress() -> None:
    lines = clean_lines("\t\x1b[4mGPU0\tGPU1\x1b[0m\x1b]8;;http://x\x07link\x1b]8;;\x07\nloading 10%\rloading 100%\r\n")
    assert lines[0].text == "\tGPU0\tGPU1link"
    assert lines[1].text == "loading 100%"


def test_streaming_yields_the_same_lines_as_the_whole_text() -> None:
    body = [f"node{n % 4}: line {n}" for n in range(DETECTION_LINES * 3)]
    assert list(iter_clean_lines(iter(body))) == clean_lines("\n".join(body))


@pytest.mark.timeout(10)
def test_long_adversarial_lines_are_linear() -> None:
    hostile = ["(" + "pid=1 " * 200_000, "[" * 300_000, "1" * 300_000 + ":", "\x1b]" + "a" * 300_000,
               "2025-11-12 20:42:20" + " -" * 100_000, "> " * 150_000, "[pod/" + "a/" * 150_000]
    for line in hostile:
        clean_lines(line)


def test_a_row_written_in_pieces_drops_the_repeats_of_its_own_launcher_tag() -> None:
    """nccl-tests writes a row in pieces and Open MPI / MPICH tag every write: NVIDIA/nccl #1453 pasted
    `[0]      1048576  262144  float  sum  -1[0]    1626.5 ...`. The line's own tag repeated inside it goes; NCCL's
    `0[0] -> 1[1]` brackets and another rank's tag stay."""
    lines = clean_lines(
        "[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]    2302.3\n"
        "[1,0]<stdout>:           8             2     float     sum      -1[1,0]<stdout>:    85.14    0.00\n"
        "[0] host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
        "[0]      1048576        262144     float     sum      -1[1]    1626.5\n")
    assert lines[0].text.split() == ["1048576", "262144", "float", "sum", "-1", "1626.5", "0.64", "1.24", "0", "2302.3"]
    assert lines[1].text.split() == ["8", "2", "float", "sum", "-1", "85.14", "0.00"]
    assert "0[0] -> 1[1]" in lines[2].text
    assert "-1[1]" in lines[3].text
