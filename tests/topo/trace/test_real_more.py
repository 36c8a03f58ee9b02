"""`linkscope trace` on more real traces from HolisticTraceAnalysis' test data (see fixtures/real/traces/SOURCES.md).

Every expected number below was counted by hand from the raw JSON (zcat + json, not linkscope's reader): the
NCCL kernels, the CPU op that launched each one (through `correlation`), its `Input Dims` / `Input type`, the
ProfilerStep windows and `distributedInfo`.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from linkscope.cli import main
from linkscope.topo.formats.trace import read_rank_trace
from linkscope.topo.formats.trace_events import RankTrace
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "traces"
RANK0 = REAL / "hta-rank0-of-128-sampled-no-pg.json.gz"
RANK1 = REAL / "hta-rank1-of-128-sampled-no-pg.json.gz"
ROCM = REAL / "hta-rocm-mi250-1gpu-no-collectives.json.gz"
GLOO = REAL / "hta-gloo-rank34-of-300-cpu-only.json.gz"

FLOAT, INT, LONG, BYTE = 4, 4, 8, 1

# Per rank, in kernel start order: (op of the launching nccl:* annotation, bytes from its Input Dims x type, step).
# The all_gather's launching `nccl:_all_gather_base` records only its 16 MiB input; the enclosing
# `c10d::_allgather_base_` records the output [1073741824] signed char: 1 GiB, 64 shares of 16 MiB.
RANK0_CALLS = [
    ("all_to_all", 384 * LONG, 551), ("all_to_all", 419430400 * BYTE, 551),
    ("all_reduce", 19618307 * FLOAT, 551), ("all_reduce", 26955536 * FLOAT, 551), ("all_gather", 1 << 30, 551),
    ("all_to_all", 419430400 * BYTE, 552), ("all_to_all", 2846720 * INT, 552),
    ("all_reduce", 26258430 * FLOAT, 552), ("all_reduce", 5716654 * FLOAT, 552), ("all_gather", 1 << 30, 552),
]
RANK1_CALLS = [
    ("all_to_all", 339738624 * BYTE, 551), ("all_to_all", 2846720 * INT, 551),
    ("all_reduce", 19618307 * FLOAT, 551), ("all_reduce", 26258430 * FLOAT, 551), ("all_gather", 1 << 30, 551),
    ("all_to_all", 384 * LONG, 552), ("all_reduce", 19618307 * FLOAT, 552),
    ("all_to_all", 394073856 * BYTE, 552), ("all_reduce", 5716654 * FLOAT, 552), ("all_gather", 1 << 30, 552),
]
# Communication per step: the NCCL kernels of each step do not overlap one another, so it is the sum of their
# durations (rank 0: 30669 + 62783 + 11727 + 47652 + 42496 and 67827 + 21124 + 12119 + 36158 + 63644; rank 1:
# 57924 + 41375 + 8370 + 17614 + 42744 and 39630 + 4624 + 90771 + 13838 + 62163).
COMM_US = {(0, 551): 195327.0, (0, 552): 200872.0, (1, 551): 168027.0, (1, 552): 211026.0}


def _read(path: Path) -> RankTrace:
    with gzip.open(path, "rt") as stream:
        return read_rank_trace(stream, path.name)


def _raw(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as stream:
        document: dict[str, Any] = json.load(stream)
    return document


def _report(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, dict[str, Any]]:
    status = main(["trace", *map(str, paths), "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_sampled_pair_fixture_is_what_the_hand_count_read() -> None:
    """The premise of the tests below, read from the raw JSON: ten NCCL kernels per rank, every one named
    SendRecv (NCCL's generic kernel) whatever collective launched it."""
    for path in (RANK0, RANK1):
        kernels = [e for e in _raw(path)["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
        assert len(kernels) == 10
        assert {k["name"].split("(")[0] for k in kernels} == {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"}


@pytest.mark.parametrize("path, rank, calls", [(RANK0, 0, RANK0_CALLS), (RANK1, 1, RANK1_CALLS)])
def test_sampled_rank_collectives_from_the_launching_op(path: Path, rank: int, calls: list[tuple[str, int, int]]) -> None:
    trace = _read(path)
    assert (trace.rank, trace.world_size, trace.backend, trace.nccl_version, trace.host) == (rank, 128, "nccl", None, None)
    assert [(c.op, c.size_bytes, c.step) for c in trace.collectives] == calls
    assert Counter(c.op for c in trace.collectives) == {"all_to_all": 4, "all_reduce": 4, "all_gather": 2}
    # no pg_config and no group on the ops: the group is unknown, never guessed from world_size
    assert all(c.group_ranks is None and c.group_size is None and c.group_name is None for c in trace.collectives)
    assert all(c.on_device and c.device == rank for c in trace.collectives)
    assert [s.step for s in trace.steps] == [551, 552]
    for step in trace.steps:
        assert step.comm_us == pytest.approx(COMM_US[(rank, step.step)])
        assert 0 <= step.exposed_comm_us <= step.comm_us <= step.time_us


def test_sampled_pair_straggler_from_the_calls_both_ranks_hold(capsys: pytest.CaptureFixture[str]) -> None:
    """Which calls are one call on both ranks, by hand: those whose kernels overlap in time (their ends agree to
    within 0.4 ms). Five are: all_reduce of 19618307 floats (rank 1 starts 3302 us later), all_reduce of 5716654
    floats (22328 us), both all_gathers (84 us, 1292 us), and the 400 MiB all_to_all whose kernels end at the same
    microsecond (4859 us) - rank 0's 2nd all_to_all but rank 1's 1st, the sampling having dropped one side of
    others. Calls that ended before the other rank's began (rank 0's 2nd all_reduce ends 116 ms before rank 1's 2nd
    starts) are different calls and must not count. Rank 1 came last at every matched call."""
    status, report = _report(capsys, RANK0, RANK1)
    straggler = report["straggler"]
    assert (straggler["rank"], straggler["device"], straggler["host"]) == (1, 1, None)
    assert (straggler["last_arrivals"], straggler["matched_calls"]) == (5, 5)
    assert straggler["others_waited_us"] == pytest.approx(3302 + 22328 + 84 + 1292 + 4859)
    assert "straggler-rank" in {f["code"] for f in report["findings"]}
    assert status == 1
    assert len(report["collectives"]) == 20 and len(report["steps"]) == 4


@pytest.mark.parametrize("path", [RANK0, RANK1])
def test_one_rank_alone_has_no_straggler(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _report(capsys, path)
    assert report["straggler"] is None
    assert "straggler-rank" not in {f["code"] for f in report["findings"]}


def test_rocm_trace_steps_and_gpu_compute(capsys: pytest.CaptureFixture[str]) -> None:
    """ROCm, one GPU, no collectives. Two CPU-side ProfilerSteps (#1, #2); the `gpu_user_annotation` copy of #1 is
    not a third. Step #1's compute is its 14 kernels on the GPU, one stream, none overlapping, without its 2
    host-to-device copies (22.441 and 15.72 us; memory copies are kept apart from compute, as HTA keeps them):
    6.88 + 17.6 + 6.72 + 8.32 + 11.04 + 3.36 + 2.24 + 5.28 + 5.6 + 12.64 + 13.6 + 4.96 + 4.16 + 8.481 = 110.881 us
    (not the 8.4 ms of CPU ops, one of them a 6.5 ms hipLaunchKernel stall); #2 (49 us) runs none."""
    trace = _read(ROCM)
    assert (trace.rank, trace.world_size, trace.backend) == (None, None, None)
    assert trace.collectives == ()
    # times of 4.2e12 us with fractions: float64 holds them to about half a nanosecond
    assert [(s.step, s.time_us) for s in trace.steps] == [(1, pytest.approx(9288.291, abs=1e-3)),
                                                         (2, pytest.approx(49.073, abs=1e-3))]
    first, second = trace.steps
    assert first.compute_us == pytest.approx(110.881, abs=1e-3)
    assert second.compute_us == 0
    assert all(s.comm_us == s.exposed_comm_us == 0 for s in trace.steps)
    status, report = _report(capsys, ROCM)
    # the GPU computes 110.881 us of step #1's 9288.291 us ((9288.291 - 110.881) / 9288.291 = 0.988 idle: the 6.5 ms
    # launch stall; its 38 us of copies are not compute) and nothing of #2's 49 us
    assert (status, [f["code"] for f in report["findings"]], report["straggler"]) == (1, ["gpu-idle"], None)
    assert [step["gpu_idle_share"] for step in report["steps"]] == [pytest.approx(0.988, abs=1e-3), 1.0]
    assert report["judged"] == {"steps": 2, "calls": 0, "priced": None, "not_priced": None}


def _rocm_with_an_rccl_kernel(correlation: int, op_name: str, dims: list[list[int]]) -> str:
    """The real ROCm trace with the kernel of `correlation` renamed to RCCL's generic kernel (its args, as RCCL's
    have, say nothing of the collective) and a `nccl:*` op recorded around its HIP launch on the launching thread."""
    document = _raw(ROCM)
    events = document["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") == correlation)
    launch = next(e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == correlation)
    kernel["name"] = "ncclDevKernel_Generic(ncclDevComm*, channelMasks, ncclWork*)"
    op = copy.deepcopy(launch) | {"cat": "user_annotation", "name": op_name, "ts": launch["ts"] - 5,
                                  "dur": launch["dur"] + 10}
    op["args"] = {"Input Dims": dims, "Input type": ["float"]}
    events.append(op)
    return json.dumps(document)


@pytest.mark.parametrize("correlation, launch_name, op", [
    (136, "hipLaunchKernel", "all_reduce"), (121, "hipExtModuleLaunchKernel", "all_gather"),
])
def test_rccl_kernel_found_through_its_hip_launch(correlation: int, launch_name: str, op: str) -> None:
    """RCCL names its kernels `ncclDevKernel_Generic`: only the launching op says what the call was, and ROCm
    launches through hipLaunchKernel / hipExtModuleLaunchKernel (the names this real trace records)."""
    raw = _raw(ROCM)["traceEvents"]
    assert any(e.get("name") == launch_name and e["args"].get("correlation") == correlation for e in raw)
    text = _rocm_with_an_rccl_kernel(correlation, f"nccl:{op}", [[5, 128]])
    (call,) = read_rank_trace(io.StringIO(text), "rocm.json").collectives
    assert (call.op, call.size_bytes, call.on_device, call.device) == (op, 5 * 128 * FLOAT, True, 2)


def test_real_gloo_trace_of_300_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    """rank 34 of 300, gloo, no GPU. Ten `gloo:all_reduce` ops: five of [321271] floats on thread 3553, five of
    [2082411] floats on thread 3554. They name no group, but every one of the 11 groups in pg_config is ranks
    0-299, so the group's ranks are known (which group is not)."""
    trace = _read(GLOO)
    assert (trace.rank, trace.world_size, trace.backend) == (34, 300, "gloo")
    assert len(trace.groups) == 11 and set(trace.groups.values()) == {tuple(range(300))}
    assert Counter((c.op, c.size_bytes) for c in trace.collectives) == {
        ("all_reduce", 321271 * FLOAT): 5, ("all_reduce", 2082411 * FLOAT): 5}
    assert all(not c.on_device and c.device is None for c in trace.collectives)
    assert all(c.group_ranks == tuple(range(300)) and c.group_size == 300 and c.group_name is None
               for c in trace.collectives)
    (step,) = trace.steps
    assert (step.step, step.time_us) == (551, pytest.approx(210109.162))
    # Step 551 runs 1212075529876.817 .. 1212075739985.979. Inside it start the first op of each thread, at
    # ...548353.304 (ends ...721563.017) and ...556659.473 (ends ...727130.731): communication is their union,
    # ...548353.304 .. ...727130.731 = 178777.427 us. The trace records no compute op in the step, so all of
    # it is exposed.
    firsts = [c for c in trace.collectives if c.start_us < 1212075739985.979]
    assert len(firsts) == 2 and all(c.step == 551 for c in firsts)
    assert [c.step for c in trace.collectives if c.start_us > 1212075529876.817 + 2 * 210109.162] == [None] * 6
    assert step.comm_us == pytest.approx(178777.427, abs=1e-3)
    assert step.compute_us == 0 and step.exposed_comm_us == pytest.approx(step.comm_us)
    status, report = _report(capsys, GLOO)
    assert status == 1 and [f["code"] for f in report["findings"]] == ["exposed-comm"]
    row = report["collectives"][0]
    # busbw of an all_reduce on 300 ranks: bytes / time x 2 x 299 / 300
    assert row["busbw_gbps"] == pytest.approx(321271 * FLOAT / 173209.713e3 * 2 * 299 / 300, abs=1e-3)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_traces_of_different_jobs_or_a_rank_twice_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory that collected several runs must not be joined into one: one line, exit 2."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for trace in REAL.glob("*.json.gz"):
        (runs / trace.name).write_bytes(trace.read_bytes())
    status, out, err = _run(["trace", str(runs)], capsys)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1 and "give one job's traces" in err
    copy_of_rank0 = tmp_path / "again.json.gz"
    copy_of_rank0.write_bytes(RANK0.read_bytes())
    status, _, err = _run(["trace", str(RANK0), str(copy_of_rank0), str(RANK1)], capsys)
    assert status == 2 and "rank 0 is in both" in err


def test_a_trace_without_its_rank_does_not_hide_the_straggler_of_the_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ROCm trace says no rank: the 128-rank pair still names rank 1 (hand count: last at 5 of 5 calls)."""
    status, out, _ = _run(["trace", str(RANK0), str(RANK1), str(ROCM), "--json"], capsys)
    report = json.loads(out)
    assert status == 1 and report["straggler"]["rank"] == 1 and report["straggler"]["last_arrivals"] == 5


def test_gloo_calls_are_not_priced_on_gpu_links(capsys: pytest.CaptureFixture[str]) -> None:
    """gloo moves data over TCP whatever GPUs the ranks hold: no expected time, no slow-collective finding, and the
    text says why while still listing the longest calls."""
    _, out, _ = _run(["trace", str(GLOO), "--source", "sample:dgx-h100", "--json"], capsys)
    report = json.loads(out)
    assert all("expected_us" not in row for row in report["collectives"])
    assert "slow-collective" not in {f["code"] for f in report["findings"]}
    _, text, _ = _run(["trace", str(GLOO), "--source", "sample:dgx-h100"], capsys)
    assert "timed on the CPU (gloo over TCP" in text and "longest collective calls" in text


def test_a_placement_the_machine_cannot_hold_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(["trace", str(REAL / "hta-2rank-nccl-allreduce-pg-ranks.json.gz"), "--source",
                           "sample:dgx-h100", "--visible-devices", "9,10"], capsys)
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and "GPU 9" in err


def test_gpu_work_counts_in_the_step_that_launched_it() -> None:
    """The old-args trace's GPU runs ~50 ms behind its CPU: counted by launch (correlation id), steps 1010-1014
    each hold 36-40 ms of communication and 100-115 ms of GPU work (a reviewer's own count from the raw JSON), of
    which 85.2-87.5 ms kernels and 24.5-29.1 ms memory copies (a second count from the raw JSON, kernels' union by
    launching step): copies are kept apart from compute, as HTA keeps them. The earlier CPU-window count swung
    from 16 to 55 ms of communication. A step never holds more work than its time."""
    with gzip.open(REAL / "hta-rank1-of-2-all_to_all-old-args.json.gz", "rt") as stream:
        trace = read_rank_trace(stream, "old")
    steady = [step for step in trace.steps if step.step >= 1010]
    assert len(steady) == 5
    for step in steady:
        assert 85e3 <= step.compute_us <= 88e3 and 36e3 <= step.comm_us <= 40e3
    for step in trace.steps:
        assert step.compute_us <= step.time_us and step.exposed_comm_us <= step.comm_us <= step.time_us


def test_priced_on_another_gpu_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """The 2-rank trace's deviceProperties say A100-PG509-200: priced on an H100 box, an info finding says so
    (it does not fail the run); unpriced, nothing is said."""
    two_rank = str(REAL / "hta-2rank-nccl-allreduce-pg-ranks.json.gz")
    _, out, _ = _run(["trace", two_rank, "--source", "sample:dgx-h100", "--json"], capsys)
    found = {f["code"]: f for f in json.loads(out)["findings"]}
    assert found["priced-on-other-gpu"]["severity"] == "info"
    assert "A100-PG509-200" in found["priced-on-other-gpu"]["message"] and "H100" in found["priced-on-other-gpu"]["message"]
    _, out, _ = _run(["trace", two_rank, "--json"], capsys)
    assert "priced-on-other-gpu" not in {f["code"] for f in json.loads(out)["findings"]}


def test_placement_flags_need_a_machine(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(["trace", str(RANK0), "--nodes", "2"], capsys)
    assert status == 2 and "--nodes places the ranks on a machine: give it with --source" in err


def test_byte_order_mark_and_junk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace saved with a UTF-8 byte-order mark reads as without one; bytes that are neither gzip nor UTF-8 say so."""
    plain = gzip.decompress((REAL / "hta-2rank-nccl-allreduce-pg-ranks.json.gz").read_bytes())
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + plain)
    without = tmp_path / "plain.json"
    without.write_bytes(plain)
    _, first, _ = _run(["trace", str(with_bom), "--json"], capsys)
    _, second, _ = _run(["trace", str(without), "--json"], capsys)
    assert json.loads(first)["collectives"] == json.loads(second)["collectives"]
    junk = tmp_path / "junk.json.gz"
    junk.write_bytes(bytes(range(128, 256)) * 4)
    status, _, err = _run(["trace", str(junk)], capsys)
    assert status == 2 and "neither JSON text in UTF-8 nor gzip" in err


def test_gloo_calls_belong_to_the_step_window_that_ran_them() -> None:
    """gloo calls are timed on the CPU: a call in step 551's window is step 551's, one after it is no step's, so
    the collectives table and the step's communication total agree (hand check: 2 of the 10 calls fall inside)."""
    with gzip.open(GLOO, "rt") as stream:
        trace = read_rank_trace(stream, "gloo")
    (step,) = trace.steps
    inside = [c for c in trace.collectives if step.start_us <= c.start_us < step.start_us + step.time_us]
    assert len(inside) == 2 and all(c.step == 551 for c in inside)
    assert all(c.step is None for c in trace.collectives if c not in inside)


def test_a_directory_of_torch_named_traces_ignores_other_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tensorboard_trace_handler names its files `*.pt.trace.json[.gz]`: beside them, a config.json is not a trace."""
    (tmp_path / "host_1.pt.trace.json.gz").write_bytes(RANK0.read_bytes())
    (tmp_path / "host_2.pt.trace.json.gz").write_bytes(RANK1.read_bytes())
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    status, out, err = _run(["trace", str(tmp_path), "--json"], capsys)
    assert status == 1 and err == "" and len(json.loads(out)["traces"]) == 2
    (tmp_path / "host_1.pt.trace.json.gz").unlink()
    (tmp_path / "host_2.pt.trace.json.gz").unlink()
    (tmp_path / "rank0.json").write_text(gzip.decompress(RANK0.read_bytes()).decode())
    status, _, err = _run(["trace", str(tmp_path)], capsys)  # without torch's names every JSON is taken: config.json says so
    assert status == 2 and "config.json" in err
