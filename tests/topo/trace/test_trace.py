"""`linkscope trace`: real GPU traces, synthetic kernel-timing edge cases, gloo traces made here, bad input."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.cli import main
from linkscope.topo.common.errors import InputError
from linkscope.topo.formats import trace_stream
from linkscope.topo.formats.trace import read_rank_trace
from linkscope.topo.formats.trace_steps import subtract, union
from linkscope.topo.formats.trace_stream import TraceEvent, event_of, read_trace_events
from support.paths import FIXTURES, ROOT
from support.trace import TraceBuilder

REAL = FIXTURES / "real" / "traces"


def _read(path: Path):
    with gzip.open(path, "rt") as stream:
        return read_rank_trace(stream, path.name)


def test_real_two_rank_nccl_trace_hand_counted() -> None:
    """Rank 0 of 2: 15 AllReduce + 6 Broadcast kernels; sizes from record_param_comms (nelems x 4 bytes)."""
    trace = _read(REAL / "hta-2rank-nccl-allreduce-pg-ranks.json.gz")
    assert (trace.rank, trace.world_size, trace.backend, trace.nccl_version) == (0, 2, "nccl", "2.17.1")
    ops = Counter(call.op for call in trace.collectives)
    assert ops == {"all_reduce": 15, "broadcast": 6}
    assert all(call.on_device and call.group_ranks == (0, 1) and call.group_size == 2 for call in trace.collectives)
    sizes = Counter(call.size_bytes for call in trace.collectives if call.op == "all_reduce")
    assert sizes[2049000 * 4] == 3 and sizes[6637568 * 4] == 3 and len(sizes) == 5
    assert [step.step for step in trace.steps] == [4, 5, 6]
    first = trace.collectives[0]
    assert first.step == 4
    for step in trace.steps:
        assert 0 < step.exposed_comm_us <= step.comm_us <= step.time_us
        assert step.compute_us < step.time_us


def test_real_old_format_sizes_from_input_dims() -> None:
    """Rank 1 of 2, older args: 42 nccl:all_to_all and 18 nccl:all_reduce ops, each launching one kernel; 4 more
    kernels (1 SendRecv, 3 AllReduce) whose launch precedes the trace window are no calls of the trace (said in a
    note); all_to_all size from Input Dims [[2,1024,34820]] floats."""
    trace = _read(REAL / "hta-rank1-of-2-all_to_all-old-args.json.gz")
    assert trace.rank == 1 and trace.world_size == 2
    ops = Counter(call.op for call in trace.collectives)
    assert ops == {"all_to_all": 42, "all_reduce": 18}
    assert all(call.on_device for call in trace.collectives)
    assert "4 NCCL kernel(s) launched before the trace began (no launch in it): timed in their steps, not counted " \
           "as calls" in trace.notes
    sizes = {call.size_bytes for call in trace.collectives if call.op == "all_to_all"}
    assert 2 * 1024 * 34820 * 4 in sizes
    assert len(trace.steps) == 6
    # no process group in this format: the size of the group is unknown, never guessed
    assert all(call.group_size is None for call in trace.collectives)


def test_real_single_rank_trace_has_steps_but_no_kernels() -> None:
    """One V100 rank on NCCL 2.17: 35 `nccl:*` annotations (25 all_reduce, 10 broadcast, counted by hand with
    a plain JSON scan) and no NCCL kernel: every call is counted from its CPU launch, and none is timed as a
    transfer."""
    trace = _read(REAL / "hta-1rank-nccl-2.17-collective-name.json.gz")
    assert trace.world_size == 1 and len(trace.collectives) == 35
    assert sorted(Counter(call.op for call in trace.collectives).items()) == [("all_reduce", 25), ("broadcast", 10)]
    assert all(call.launch_only and not call.on_device for call in trace.collectives)
    assert [s.step for s in trace.steps] == [101, 102, 103, 104, 105]
    assert trace.host == "twshared39868.02.pnb3.facebook.com"


def test_kernel_metadata_found_through_the_launch_when_the_kernel_has_none(tmp_path: Path) -> None:
    builder = TraceBuilder(rank=0, world_size=8)
    builder.step(1, 0, 10_000)
    builder.collective("allgather", 1 << 20, launch_us=100, start_us=150, duration_us=400, metadata_on_kernel=False)
    trace = read_rank_trace(io.StringIO(json.dumps(builder.document())), "t.json")
    (call,) = trace.collectives
    assert (call.op, call.size_bytes, call.group_size, call.group_ranks) == ("all_gather", 4 << 20, 8, tuple(range(8)))


@pytest.mark.parametrize("field, value", [
    ("In msg nelems", 10**40), ("In msg nelems", -5), ("In msg nelems", 1 << 49),
    ("Process Group Ranks", "[0, 99999999999]"), ("Process Group Ranks", [0, -1]), ("device", 10**30),
])
def test_numbers_no_real_trace_holds_read_as_unknown(field: str, value: object) -> None:
    """A 40-digit element count is not 4e40 bytes, a rank past the cap is not a rank: unknown, never a number
    (a group whose ranks are nonsense falls back to the trace's pg_config for that group name)."""
    builder = TraceBuilder(rank=0, world_size=2)
    builder.step(1, 0, 10_000)
    builder.collective("allreduce", 1 << 20, launch_us=100, start_us=150, duration_us=400)
    kernel = builder.events[-1]["args"]
    kernel[field] = value
    if field == "In msg nelems":
        kernel["Out msg nelems"] = value
    (call,) = read_rank_trace(io.StringIO(json.dumps(builder.document())), "t.json").collectives
    read = {"In msg nelems": call.size_bytes, "Process Group Ranks": call.group_ranks, "device": call.device}
    assert read[field] == ((0, 1) if field == "Process Group Ranks" else None)


def test_exposed_communication_counts_only_what_no_kernel_hides(tmp_path: Path) -> None:
    """Compute kernels 0-1000 us and 1500-2000 us; comm 800-1800 us: exposed 1000-1500, 500 us."""
    builder = TraceBuilder(rank=0, world_size=2)
    builder.step(7, 0, 3000)
    builder.compute_kernel(launch_us=0, start_us=0, duration_us=1000)
    builder.compute_kernel(launch_us=10, start_us=1500, duration_us=500, stream=8)
    builder.collective("allreduce", 1000, launch_us=20, start_us=800, duration_us=1000)
    trace = read_rank_trace(io.StringIO(json.dumps(builder.document())), "t.json")
    (step,) = trace.steps
    assert step.compute_us == pytest.approx(1500)
    assert step.comm_us == pytest.approx(1000)
    assert step.exposed_comm_us == pytest.approx(500)  # 1000-1500: no compute kernel runs then


def test_memory_copies_are_kept_apart_from_compute_and_the_report_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A compute kernel 0-1000 us, a device-to-device copy and a memset 1000-2000 us, comm 500-1500 us: compute is
    the kernel's 1000 us only, and the 500 us of comm beside the copy are exposed (as Holistic Trace Analysis counts
    them); the report's caption says copies are not compute."""
    builder = TraceBuilder(rank=0, world_size=2)
    builder.step(3, 0, 3000)
    builder.compute_kernel(launch_us=0, start_us=0, duration_us=1000)
    builder.events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0,
                           "tid": 9, "ts": 1000, "dur": 1000, "args": {"device": 0, "stream": 9}})
    builder.events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 9, "ts": 1000,
                           "dur": 1000, "args": {"device": 0, "stream": 9}})
    builder.collective("allreduce", 1000, launch_us=20, start_us=500, duration_us=1000)
    (step,) = read_rank_trace(io.StringIO(json.dumps(builder.document())), "t.json").steps
    assert (step.compute_us, step.comm_us, step.exposed_comm_us) == pytest.approx((1000, 1000, 500))
    main(["trace", str(builder.write(tmp_path / "t.json"))])
    said = " ".join(capsys.readouterr().out.split())
    assert "compute: GPU kernels only; memory copies and memsets are kept apart, as Holistic Trace Analysis" in said


def test_interval_arithmetic() -> None:
    merged = union([(5, 7), (0, 2), (1, 3), (6, 9)])
    assert merged == [(0, 3), (5, 9)]
    assert subtract(merged, union([(2, 6), (8, 10)])) == [(0, 2), (6, 8)]


def test_straggler_named_with_host_and_gpu(tmp_path: Path) -> None:
    paths = []
    for rank in range(4):
        builder = TraceBuilder(rank=rank, world_size=4, host=f"node-{rank // 2}")
        builder.step(1, 0, 50_000)
        for call in range(6):
            lateness = 2_000 if rank == 3 else 100 * rank
            builder.collective("allreduce", 1 << 24, launch_us=call * 5000 + lateness,
                               start_us=call * 5000 + lateness + 10, duration_us=1500)
        paths.append(str(builder.write(tmp_path / f"rank{rank}.json", compressed=rank % 2 == 1)))
    out = io.StringIO()
    sys_stdout = sys.stdout
    sys.stdout = out
    try:
        status = main(["trace", *paths, "--json"])
    finally:
        sys.stdout = sys_stdout
    report = json.loads(out.getvalue())
    assert status == 1
    assert report["straggler"]["rank"] == 3 and report["straggler"]["host"] == "node-1" and report["straggler"]["device"] == 3
    assert report["straggler"]["last_arrivals"] == 6
    codes = {f["code"] for f in report["findings"]}
    assert "straggler-rank" in codes
    assert {"collectives", "steps", "findings"} <= report.keys()
    row = report["collectives"][0]
    assert {"op", "bytes", "group_size", "ranks", "duration_us", "algbw_gbps", "busbw_gbps", "step"} <= row.keys()
    assert row["busbw_gbps"] == pytest.approx((1 << 26) / 1500e3 * 2 * 3 / 4, rel=1e-3)


@pytest.mark.parametrize("lateness_us, straggler, finding", [(0, None, False), (3, 3, False), (400, 3, True)])
def test_no_straggler_when_ranks_start_together_or_within_launch_jitter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], lateness_us: float, straggler: int | None, finding: bool) -> None:
    """Every rank starting at the same microsecond has no last arrival (not rank 0 by tie-break); a rank 3 us late
    on every call is named as last but is no finding; 400 us late is."""
    paths = []
    for rank in range(4):
        builder = TraceBuilder(rank=rank, world_size=4)
        builder.step(1, 0, 50_000)
        for call in range(6):
            late = lateness_us if rank == 3 else 0
            builder.collective("allreduce", 1 << 24, launch_us=call * 5000 + late, start_us=call * 5000 + late + 10,
                               duration_us=1500)
        paths.append(str(builder.write(tmp_path / f"rank{rank}.json")))
    main(["trace", *paths, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (report["straggler"] or {}).get("rank") == straggler
    assert ("straggler-rank" in {f["code"] for f in report["findings"]}) == finding


def test_source_prices_each_call_and_flags_a_slow_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An 8-GPU NVLink all_reduce of 1 GiB: about 6 ms is right; 60 ms is far below what NV18 allows."""
    builder = TraceBuilder(rank=0, world_size=8)
    builder.step(1, 0, 200_000)
    builder.compute_kernel(0, 0, 1000)
    builder.collective("allreduce", 1 << 28, launch_us=1000, start_us=1000, duration_us=6_500)
    builder.collective("allreduce", 1 << 28, launch_us=9000, start_us=9000, duration_us=60_000)
    path = builder.write(tmp_path / "rank0.json")
    status = main(["trace", str(path), "--source", "sample:dgx-h100", "--json"])
    report = json.loads(capsys.readouterr().out)
    fast, slow = report["collectives"]
    assert fast["link"] == slow["link"] and "NV" in fast["link"]
    assert fast["measured_vs_expected"] > 0.5 and slow["measured_vs_expected"] < 0.2
    assert "slow-collective" in {f["code"] for f in report["findings"]}
    assert status == 1
    main(["trace", str(path), "--source", "sample:dgx-h100"])
    text = capsys.readouterr().out
    assert "furthest below" in text and "slow-collective" in text


def test_streaming_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = TraceBuilder(rank=0, world_size=2)
    for step in range(40):
        builder.step(step, step * 1000, 900)
        builder.collective("allreduce", 12345 + step, step * 1000 + 10, step * 1000 + 20, 100)
    text = json.dumps(builder.document(), indent=1)
    whole = read_rank_trace(io.StringIO(text), "t")
    monkeypatch.setattr(trace_stream, "_CHUNK_CHARS", 7)
    seen: list[TraceEvent] = []
    metadata = read_trace_events(io.StringIO(text), "t", seen.extend)
    assert seen == [event_of(event) for event in builder.events] and metadata["host_name"] == "node-a"
    assert read_rank_trace(io.StringIO(text), "t") == whole


@pytest.mark.parametrize("content, reason", [
    ('{"traceEvents": [{"ph": "X"}', "cut short"),
    ('{"a": 1}', "no traceEvents"),
    ('[1, 2', "cut short"),
    ('{"traceEvents": {}}', "not a list"),
    ('{"traceEvents": []} trailing', "text after"),
    ('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nests too deeply"),
    ("", "cut short"),
])
def test_not_a_trace_is_one_line(content: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        read_trace_events(io.StringIO(content), "bad.json", lambda event: None)


def test_bad_files_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = TraceBuilder(0, 2)
    good.step(1, 0, 10)
    blob = gzip.compress(json.dumps(good.document()).encode())
    (tmp_path / "cut.json.gz").write_bytes(blob[: len(blob) // 2])
    (tmp_path / "other.json").write_text('{"snapshot": 1}')
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00\x01" * 10)
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("cut.json.gz", "other.json", "binary.json", "fifo.json", "missing.json"):
        assert main(["trace", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps({"traceEvents": [{"ph": "X", "name": "x" * 1000}] * 50})
    with pytest.raises(InputError, match="limit"):
        read_trace_events(io.StringIO(text), "big.json", lambda event: None, max_chars=10_000)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_give_a_result_or_one_line(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.json"
    path.write_bytes(data)
    from linkscope.topo.trace.files import read_trace_file

    try:
        read_trace_file(str(path))
    except InputError as exc:
        assert "\n" not in str(exc)


GLOO_SCRIPT = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist
    from torch.profiler import profile, ProfilerActivity, schedule
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=int(sys.argv[2]), world_size=2)
    rank = dist.get_rank()
    out = sys.argv[3]
    sizes = [4096, 65536, 262144]
    def handler(p):
        p.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2), record_shapes=True,
                 on_trace_ready=handler) as prof:
        for step in range(3):
            x = torch.randn(256, 256)
            for _ in range(4):
                x = x @ x.clamp(-1, 1)
            for n in sizes:
                dist.all_reduce(torch.ones(n))
            dist.all_gather_into_tensor(torch.empty(2 * 1000), torch.ones(1000))
            prof.step()
    dist.destroy_process_group()
    os._exit(0)  # no interpreter teardown: a gloo thread winding down there can abort the process
""")


def test_gloo_traces_made_here_read_back(tmp_path: Path) -> None:
    """Two real gloo ranks on this machine: every collective the script ran is found with its size, in both ranks' steps."""
    pytest.importorskip("torch", reason="the ranks that write the traces run torch.distributed on gloo")
    script = tmp_path / "job.py"
    script.write_text(GLOO_SCRIPT)
    store = tmp_path / "store"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, str(script), str(store), str(rank), str(tmp_path)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
    traces = [read_rank_trace(io.StringIO((tmp_path / f"rank{r}.json").read_text()), f"rank{r}") for r in range(2)]
    for trace in traces:
        assert trace.backend == "gloo" and trace.world_size == 2
        assert len(trace.steps) == 2
        per_step = Counter((c.step, c.op, c.size_bytes) for c in trace.collectives)
        for number in (s.step for s in trace.steps):
            for n in (4096, 65536, 262144):
                assert per_step[(number, "all_reduce", n * 4)] == 1
            assert per_step[(number, "all_gather", 8000)] == 1
        assert all(c.group_ranks == (0, 1) and not c.on_device for c in trace.collectives)
        for step in trace.steps:
            assert step.exposed_comm_us <= step.comm_us and step.compute_us > 0
