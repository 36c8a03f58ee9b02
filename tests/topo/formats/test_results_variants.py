"""Every prefix style, colours, interleaved ranks, cut-short and fused rows applied to the real
outputs must read to the same Measurements (or Snapshot) as the clean file, through the readers."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import parse_source_text
from linkscope.topo.model.measurements import Measurements
from support.bench import FIXTURES
from support.variant import (
    PREFIX_STYLES,
    RANK_STYLES,
    clash,
    coloured,
    cut_after_word,
    fused_with_log,
    interleaved,
    prefixed,
)


def _reads(path: Path) -> bool:
    try:
        read_measurements(path.read_text(), path.name)
    except InputError:
        return False
    return True


RESULT_FILES = [path for folder in ("nccl_tests", "p2p", "nccl_debug") for path in sorted((FIXTURES / folder).glob("*.txt"))
                if _reads(path)]
def _opens(path: Path) -> bool:
    try:
        parse_source_text(path.read_text(), path.name)
    except InputError:
        return False
    return True


TOPO_FILES = [path for path in sorted((FIXTURES / "topo").glob("*.txt")) if _opens(path)]
GB10 = FIXTURES / "nccl_tests" / "gb10-2node-all_reduce-version-line-half-written-row.txt"
H200 = FIXTURES / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"


def test_the_variants_cover_results_of_every_tool() -> None:
    names = " ".join(path.name for path in RESULT_FILES)
    assert len(RESULT_FILES) >= 12 and "nvbandwidth" in names and "p2pBandwidthLatencyTest" in names


@settings(max_examples=80, deadline=None)
@given(styles=st.lists(st.sampled_from(sorted(PREFIX_STYLES)), min_size=1, max_size=3, unique=True),
       index=st.integers(min_value=0, max_value=len(RESULT_FILES) - 1), rank=st.integers(0, 99),
       colour=st.booleans(), crlf=st.booleans())
def test_any_prefix_style_reads_to_the_same_measurements(styles: list[str], index: int, rank: int,
                                                           colour: bool, crlf: bool) -> None:
    path = RESULT_FILES[index]
    text = path.read_text()
    assume(not any(clash(style, path.name, text.split("\n")) for style in styles))
    clean = read_measurements(text, path.name)
    order = sorted(styles, key=lambda style: style not in ("pdsh", "srun"))  # launchers add those outermost
    variant = prefixed(coloured(text, rank) if colour else text, order, rank)
    if crlf:
        variant = variant.replace("\n", "\r\n")
    assert read_measurements(variant, path.name) == clean


@settings(max_examples=40, deadline=None)
@given(styles=st.lists(st.sampled_from(sorted(PREFIX_STYLES)), min_size=1, max_size=2, unique=True),
       index=st.integers(min_value=0, max_value=len(TOPO_FILES) - 1), colour=st.booleans())
def test_any_prefix_style_reads_to_the_same_snapshot(styles: list[str], index: int, colour: bool) -> None:
    path = TOPO_FILES[index]
    text = path.read_text()
    order = sorted(styles, key=lambda style: style not in ("pdsh", "srun"))
    variant = prefixed(coloured(text, index) if colour else text, order)
    assert parse_source_text(variant, path.name) == parse_source_text(text, path.name)


def test_terminal_capture_of_topo_with_underlined_header_is_detected_and_read() -> None:
    path = FIXTURES / "topo" / "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt"
    text = path.read_text()
    captured = "\n".join("\x1b[4m" + line + "\x1b[0m" if line.lstrip().startswith("GPU0") else line
                         for line in text.split("\n"))
    assert "\x1b[4m\tGPU0" in captured or "\x1b[4m" in captured
    assert parse_source_text(captured, path.name) == parse_source_text(text, path.name)


def _without_group(m: Measurements) -> list[object]:
    return [(r.op, r.size_bytes, r.in_place, r.time_us, r.algbw_gbps, r.busbw_gbps, r.nranks, r.op_source)
            for r in m.collectives]


@pytest.mark.parametrize("style", RANK_STYLES)
def test_tables_of_several_ranks_in_one_file_are_kept_apart(style: str) -> None:
    gb10, h200 = GB10.read_text(), H200.read_text()
    mixed = read_measurements(interleaved({0: gb10, 5: h200}, style), "mixed.log")
    rank0 = [r for r in mixed.collectives if r.group == "rank 0"]
    rank5 = [r for r in mixed.collectives if r.group == "rank 5"]
    assert len(rank0) + len(rank5) == len(mixed.collectives)
    assert _without_group(Measurements("x", collectives=tuple(rank0))) == _without_group(read_measurements(gb10, "a"))
    assert _without_group(Measurements("x", collectives=tuple(rank5))) == _without_group(read_measurements(h200, "b"))
    assert any("kept apart" in note for note in mixed.notes)


def test_interleaved_ranks_with_prefixes_that_name_no_rank_are_refused_not_merged() -> None:
    text = "\n".join(a + "\n" + b for a, b in zip(GB10.read_text().split("\n"), GB10.read_text().split("\n"), strict=True))
    with pytest.raises(InputError, match="interleaved without a rank prefix"):
        read_measurements(text, "twice.log")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_row_cut_short_is_dropped_and_said_never_misread(data: st.DataObject) -> None:
    path = H200
    text = path.read_text()
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    line_index = data.draw(st.sampled_from(rows[1:]))
    words = data.draw(st.integers(min_value=1, max_value=len(lines[line_index].split()) - 1))
    full = read_measurements(text, path.name).collectives
    cut = read_measurements(cut_after_word(text, line_index, words), path.name)
    kept = rows.index(line_index) * 2
    assert cut.collectives == full[:kept]
    assert f"line {line_index + 1}: half-written last row dropped ({words} of 13 columns)" in cut.notes


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_row_cut_apart_by_a_log_line_is_dropped_and_said(data: st.DataObject) -> None:
    text = H200.read_text()
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    line_index = data.draw(st.sampled_from(rows))
    words = data.draw(st.integers(min_value=1, max_value=12))
    full = read_measurements(text, "h200.log").collectives
    fused = read_measurements(fused_with_log(text, line_index, words), "h200.log")
    position = rows.index(line_index) * 2
    assert fused.collectives == full[:position] + full[position + 2:]
    assert f"line {line_index + 1}: a row cut apart by NCCL log lines, dropped" in fused.notes


def test_a_tagged_log_under_an_untagged_command_and_with_other_ranks_chatter_reads_like_the_clean_one() -> None:
    """What `mpirun --tag-output` leaves: the typed command untagged, rank 0's output tagged, other ranks'
    NCCL lines tagged with their ranks, a blank line at the end."""
    lines = H200.read_text().split("\n")
    command = next(index for index, line in enumerate(lines) if "mpirun" in line)
    tagged = [line if index <= command or not line.strip() else f"[1,0]<stdout>:{line}" for index, line in enumerate(lines)]
    for rank in range(1, 4):
        tagged.insert(command + 2 * rank, f"[1,{rank}]<stdout>:fs-208:1:2 [{rank}] NCCL INFO Bootstrap : Using enp218s0np0")
    clean = read_measurements("\n".join(lines), "h200.log")
    read = read_measurements("\n".join(tagged) + "\n", "h200.log")
    unplaced = [dataclasses.replace(row, table_line=None) for row in read.collectives]  # lines were inserted above
    assert unplaced == [dataclasses.replace(row, table_line=None) for row in clean.collectives]
    assert all(row.group is None for row in read.collectives)
    assert {row.nranks for row in read.collectives} == {16}


@pytest.mark.parametrize("style", sorted(PREFIX_STYLES))
def test_errors_name_the_line_of_the_original_file_whatever_wraps_it(style: str) -> None:
    topo = (FIXTURES / "topo" / "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt").read_text().replace("X      NV1", "X      NVX", 1)
    nccl = H200.read_text().replace("244.62", "424.62", 1)  # algbw no longer size/time: columns out of place
    for text, reader in ((topo, parse_source_text), (nccl, read_measurements)):
        with pytest.raises(InputError) as plain:
            reader(text, "f.txt")
        wrapped = "```\n" + prefixed(coloured(text), [style]) + "\n```"  # the fence adds a line above
        with pytest.raises(InputError) as caught:
            reader(wrapped, "f.txt")
        where = re.match(r"f\.txt:(?: line )?(\d+)", str(plain.value))
        assert where is not None
        line = int(where.group(1))
        shifted = str(plain.value).replace(where.group(0), where.group(0).replace(str(line), str(line + 1)), 1)
        assert str(caught.value) == shifted


def test_topo_of_two_hosts_through_pdsh_is_refused_not_merged() -> None:
    a = (FIXTURES / "topo" / "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt").read_text()
    b = (FIXTURES / "topo" / "rtx4090-8gpu-all-sys-tabs.txt").read_text()
    both = prefixed(a, ["pdsh"], host="node-a") + "\n" + prefixed(b, ["pdsh"], host="node-b")
    with pytest.raises(InputError, match=r"two\.txt: line \d+: a second `nvidia-smi topo -m` matrix .* one machine per file"):
        parse_source_text(both, "two.txt")


def test_a_lone_matrix_whose_row_numbers_count_up_is_not_taken_for_editor_numbering() -> None:
    """nvbandwidth's rows 0..7 sit on consecutive lines like an editor's numbers; they must stay row ids."""
    lines = (FIXTURES / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt").read_text().split("\n")
    title = next(index for index, line in enumerate(lines) if line.startswith("memcpy CE"))
    matrix = "\n".join(lines[title:title + 10])
    copies = {(c.src, c.dst): c.unidir_gbps for c in read_measurements(matrix, "m.txt").peer_copies}
    assert len(copies) == 56 and copies[(0, 7)] == 371.67 and copies[(7, 0)] == 370.51
