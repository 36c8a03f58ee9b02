"""The collective and rank count of an nccl-tests table whose log does not name them, read from its
columns: the real runs of the RTX 2080 Ti log with their command lines taken away."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.formats.nccl_tests import read_nccl_tests
from linkscope.topo.formats.nccl_tests_infer import RowFacts, ranks_from_ratio
from linkscope.topo.model.busbw import bus_factor
from support.bench import FIXTURES, cli_main

RTX = FIXTURES / "nccl_tests" / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"


def _runs() -> dict[str, str]:
    """Each run of the RTX log, from the line after its command to the next command."""
    lines = RTX.read_text().split("\n")
    starts = [i for i, line in enumerate(lines) if "_perf" in line and not line.startswith("#")]
    runs: dict[str, str] = {}
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        binary = lines[start].split("./build/", 1)[1].split()[0]
        key = binary + (" -g1" if "-g" not in lines[start] else "")
        runs[key] = "\n".join(lines[start + 1:end])
    return runs


@pytest.mark.parametrize(("run", "op", "nranks"), [
    ("all_gather_perf", "all_gather", 2),   # none, root -1, count = size / 4 / 2, in-place checked
    ("alltoall_perf", "all_to_all", 2),     # as all_gather, but nccl-tests never checks an in-place all_to_all (N/A)
    ("broadcast_perf", "broadcast", 2),                # none, root 0, count = size / 4
    ("reduce_perf", "reduce", 2),                      # sum, root 0
    ("reduce_perf -g1", "reduce", 1),
])
def test_the_columns_name_the_collective(run: str, op: str, nranks: int) -> None:
    measured = read_nccl_tests(_runs()[run], "run.log")
    assert {(row.op, row.op_source, row.nranks, row.nranks_source) for row in measured.collectives} == \
        {(op, "inferred", nranks, "rank lines")}


def _unvalidated(run: str) -> str:
    """A run as `-c 0` prints it: no half is checked, every check column reads N/A."""
    return "\n".join(_unchecked_row(line) for line in run.split("\n"))


def _unchecked_row(line: str) -> str:
    words = line.split()
    if len(words) != 13 or not words[0].isdigit():
        return line
    words[8] = words[12] = "N/A"
    return "  ".join(words)


def test_without_validation_both_ops_of_one_factor_are_said_in_a_note() -> None:
    measured = read_nccl_tests(_unvalidated(_runs()["alltoall_perf"]), "run.log")
    assert {row.op for row in measured.collectives} == {"all_gather|all_to_all"}
    assert "line 8: the columns fit all_gather and all_to_all alike (same busbw factor); op shown as both, " \
           "give --op to choose" in measured.notes
    given = read_nccl_tests(_runs()["alltoall_perf"], "run.log", op="alltoall")
    assert {(row.op, row.op_source) for row in given.collectives} == {("all_to_all", "given")}


def test_a_two_rank_sum_table_is_all_reduce_when_its_in_place_half_is_checked_and_send_recv_when_not() -> None:
    rows = read_nccl_tests(_runs()["all_reduce_perf"], "run.log").collectives
    assert {(row.op, row.op_source, row.nranks) for row in rows} == {("all_reduce", "inferred", 2)}
    as_sendrecv = "\n".join(" ".join([*line.split()[:12], "N/A"]) if len(line.split()) == 13 and line.split()[0].isdigit()
                            else line for line in _runs()["all_reduce_perf"].split("\n"))
    rows = read_nccl_tests(as_sendrecv, "run.log").collectives
    assert {(row.op, row.op_source, row.nranks) for row in rows} == {("send_recv", "inferred", 2)}
    rows = read_nccl_tests(_unvalidated(_runs()["all_reduce_perf"]), "run.log").collectives
    assert {(row.op, row.nranks) for row in rows} == {("all_reduce|send_recv", 2)}


def test_rank_count_from_per_rank_counts_when_no_rank_line_survives() -> None:
    text = "\n".join(line for line in _runs()["all_gather_perf"].split("\n") if "Rank" not in line and "nThread" not in line)
    rows = read_nccl_tests(text, "run.log").collectives
    assert {(row.nranks, row.nranks_source) for row in rows} == {(2, "size/count")}


def test_a_tail_of_the_rank_list_still_gives_the_highest_rank() -> None:
    """A paste that kept only the last `# Rank` line: 72 ranks; all_reduce busbw = algbw x 2 x 71/72."""
    text = ("#  Rank 71 Group  0 Pid  5512 on node-j device  7 [0x9e] NVIDIA H100 80GB HBM3\n#\n"
            "#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong\n"
            "  1073741824  268435456  float  sum  -1  10000  107.37  211.76  0  10000  107.37  211.76  0\n")
    rows = read_nccl_tests(text, "tail.log").collectives
    assert {(row.op, row.nranks, row.nranks_source) for row in rows} == {("all_reduce", 72, "rank lines")}


def test_cli_json_carries_op_source_and_an_unknown_op_is_one_line(tmp_path: object,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.log"  # type: ignore[operator]
    path.write_text(_runs()["broadcast_perf"])
    assert cli_main(["import", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["measurements"]["collectives"]
    assert {(row["op"], row["op_source"], row["nranks_source"]) for row in rows} == {("broadcast", "inferred", "rank lines")}
    assert cli_main(["import", str(path), "--op", "allreduce"]) == 2
    err = capsys.readouterr().err
    assert "--op 'allreduce' is not a collective nccl-tests runs" in err and err.count("\n") == 1


@settings(max_examples=300, deadline=None)
@given(nranks=st.integers(min_value=2, max_value=4096), algbw=st.floats(min_value=0.0, max_value=900.0),
       op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]))
def test_the_busbw_ratio_names_the_true_rank_count_or_none(nranks: int, algbw: float, op: str) -> None:
    """Printed with two decimals as nccl-tests prints them, the ratio may fail to tell the count
    (then None), but it never names a wrong one."""
    printed_algbw = round(algbw, 2)
    printed_busbw = round(algbw * bus_factor(op, nranks), 2)
    facts = [RowFacts("sum", -1, 1.0, printed_algbw, printed_busbw)]
    assert ranks_from_ratio(op, facts) in (nranks, None)
