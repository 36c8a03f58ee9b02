"""`linkscope bench collectives` on gloo, for real: every op end to end, the nccl-tests arithmetic,
the correctness pass catching a corrupted result, layout groups running at the same time."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from linkscope.probes.bench.spec import CollectiveSpec, layout_groups, parse_ops, size_sweep
from linkscope.topo.common.errors import InputError
from linkscope.topo.model.busbw import algbw_gbps, bus_factor
from linkscope.topo.model.codec import measurements_from_json
from support.bench import ROOT, cli_main, cli_process

pytest.importorskip("torch")

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
FACTOR_3_RANKS = {"all_reduce": 4 / 3, "all_gather": 2 / 3, "reduce_scatter": 2 / 3, "all_to_all": 2 / 3,
                  "broadcast": 1.0, "send_recv": 1.0}
"""busbw/algbw for 3 ranks, worked out by hand from nccl-tests' PERFORMANCE.md formulas."""


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str]:
    process = cli_process(argv, env)
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One sweep of all six ops on 3 gloo processes (an odd count exercises the per-rank rounding)."""
    output = tmp_path_factory.mktemp("bench") / "m.json"
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--nproc", "3", "--min-bytes", "8",
                           "--max-bytes", "4K", "--factor", "8", "--warmup", "1", "--iters", "3", "--json",
                           "-o", str(output)])
    assert code == 0, err
    return {"json": json.loads(out), "measurements": measurements_from_json(output.read_text(), str(output))}


@pytest.mark.parametrize("op", OPS)
def test_every_op_runs_correctly_with_sane_numbers(sweep: dict[str, object], op: str) -> None:
    rows = [row for row in sweep["json"]["rows"] if row["op"] == op]  # type: ignore[index]
    assert rows, f"no rows for {op}"
    for row in rows:
        assert row["wrong"] == 0
        assert row["nranks"] == 3 and row["group"] == "world" and row["backend"] == "gloo"
        assert 0 < row["time_us"] < 5e6
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e3))
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * FACTOR_3_RANKS[op])


@pytest.mark.parametrize(("op", "expected_bytes"), [
    ("all_reduce", [8, 64, 512, 4096]),
    ("broadcast", [8, 64, 512, 4096]),
    ("send_recv", [8, 64, 512, 4096]),
    # split ops: each of the 3 ranks' share rounds down to 16 bytes (4 floats), as in nccl-tests:
    # 64 B -> 5 floats -> 4 -> 48 B; 512 B -> 42 -> 40 -> 480 B; 4096 B -> 341 -> 340 -> 4080 B; 8 B -> none
    ("all_gather", [48, 480, 4080]),
    ("reduce_scatter", [48, 480, 4080]),
    ("all_to_all", [48, 480, 4080]),
])
def test_sizes_follow_nccl_tests_rounding(sweep: dict[str, object], op: str, expected_bytes: list[int]) -> None:
    assert [row["bytes"] for row in sweep["json"]["rows"] if row["op"] == op] == expected_bytes  # type: ignore[index]


def test_output_file_holds_the_same_rows_as_measurements(sweep: dict[str, object]) -> None:
    measurements = sweep["measurements"]
    rows = sweep["json"]["rows"]  # type: ignore[index]
    assert measurements.source == "linkscope bench collectives"  # type: ignore[attr-defined]
    assert len(measurements.collectives) == len(rows)  # type: ignore[attr-defined]
    first = measurements.collectives[0]  # type: ignore[attr-defined]
    assert (first.op, first.size_bytes, first.nranks, first.wrong, first.in_place) == ("all_reduce", 8, 3, 0, True)
    labels = [label for label, _ in measurements.group_setup_ms]  # type: ignore[attr-defined]
    assert labels == ["init_process_group", "world"]
    assert all(ms > 0 for _, ms in measurements.group_setup_ms)  # type: ignore[attr-defined]
    assert any("in place" in note for note in measurements.notes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_dtypes_check_exactly(dtype: str) -> None:
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--nproc", "2", "--ops", "all_reduce,reduce_scatter",
                           "--min-bytes", "1K", "--max-bytes", "1K", "--dtype", dtype, "--iters", "2", "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(row["op"], row["dtype"], row["wrong"]) for row in rows] == [("all_reduce", dtype, 0), ("reduce_scatter", dtype, 0)]


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "broadcast", "send_recv"])
def test_a_corrupted_result_is_counted_wrong_and_exits_1(op: str) -> None:
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--nproc", "2", "--ops", op, "--min-bytes", "256",
                           "--max-bytes", "256", "--iters", "1", "--json"], env={"LINKSCOPE_BENCH_FAULT": "corrupt:1"})
    assert code == 1, err
    rows = json.loads(out)["rows"]
    assert [row["wrong"] for row in rows] == [1]
    assert "wrong element" in err


def test_layout_groups_run_concurrently_with_their_own_rows() -> None:
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--layout", "tp=2,dp=2", "--ops", "all_reduce",
                           "--min-bytes", "4K", "--max-bytes", "4K", "--iters", "2", "--json"],
                          env={"LINKSCOPE_BENCH_FAULT": "corrupt:3"})
    assert code == 1, err
    data = json.loads(out)
    groups = {row["group"]: (row["ranks"], row["wrong"]) for row in data["rows"]}
    # Megatron order tp-cp-ep-dp-pp: TP groups are consecutive ranks, DP groups strided.
    assert groups == {"tp0": ([0, 1], 0), "tp1": ([2, 3], 1), "dp0": ([0, 2], 0), "dp1": ([1, 3], 1)}
    assert all(row["busbw_gbps"] == pytest.approx(row["algbw_gbps"]) for row in data["rows"])  # 2(n-1)/n = 1 for n=2
    assert set(data["group_setup_ms"]) == {"init_process_group", "tp0", "tp1", "dp0", "dp1"}


def test_emulated_ring_reduce_scatter_is_correct_on_four_ranks() -> None:
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--nproc", "4", "--ops", "reduce_scatter",
                           "--min-bytes", "64", "--max-bytes", "64K", "--factor", "32", "--iters", "2", "--json"],
                          env={"LINKSCOPE_BENCH_EMULATE": "reduce_scatter"})
    assert code == 0, err
    data = json.loads(out)
    assert [(row["bytes"], row["wrong"]) for row in data["rows"]] == [(64, 0), (2048, 0), (65536, 0)]
    assert any("ring of send/recv" in note for note in data["notes"])


def test_table_output_names_ops_and_set_up_time() -> None:
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--ops", "broadcast", "--min-bytes", "1M",
                           "--max-bytes", "1M", "--iters", "2"])
    assert code == 0, err
    assert "broadcast" in out and "1 MiB" in out and "process-group set-up" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--ops", "all_reduce,gather"], "unknown collective 'gather'"),
    (["--ops", "reduce"], "reduce is not benchmarked"),
    (["--min-bytes", "1M", "--max-bytes", "1K"], "smaller than --min-bytes"),
    (["--max-bytes", "12Q"], "--max-bytes"),
    (["--factor", "1"], "--factor"),
    (["--iters", "0"], "--iters"),
    (["--layout", "tp=3", "--nproc", "2"], "--layout"),
    (["--backend", "nccl"], "no CUDA GPU"),
])
def test_bad_options_are_one_line_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "collectives", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_size_sweep_matches_nccl_tests() -> None:
    assert size_sweep(8, 64, 2) == (8, 16, 32, 64)
    assert size_sweep(1024**3, 16 * 1024**3, 3) == (1024**3, 3 * 1024**3, 9 * 1024**3)
    assert size_sweep(100, 100, 2) == (100,)


def test_parse_ops_keeps_order() -> None:
    assert parse_ops("send_recv, all_reduce") == ("send_recv", "all_reduce")
    with pytest.raises(InputError):
        parse_ops(",")


def test_layout_groups_follow_megatron_order() -> None:
    dims = layout_groups("tp=2,pp=2", 4)
    assert [(dim, [g.ranks for g in groups]) for dim, groups in dims] == [
        ("tp", [(0, 1), (2, 3)]), ("pp", [(0, 2), (1, 3)])]
    assert layout_groups(None, 3)[0][1][0].ranks == (0, 1, 2)


@pytest.mark.parametrize(("op", "nranks", "factor"), [
    ("all_reduce", 8, 1.75), ("all_reduce", 1, 0.0), ("all_gather", 4, 0.75), ("reduce_scatter", 16, 0.9375),
    ("all_to_all", 2, 0.5), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("send_recv", 8, 1.0),
])
def test_bus_factor(op: str, nranks: int, factor: float) -> None:
    assert bus_factor(op, nranks) == pytest.approx(factor)


def test_algbw_is_bytes_per_microsecond_over_1000() -> None:
    assert algbw_gbps(1_000_000_000, 1_000_000) == pytest.approx(1.0)
    assert algbw_gbps(1073741824, 268588) == pytest.approx(3.9977, abs=1e-4)  # rtx2080ti all_reduce 1 GiB row: 4.00


def test_spec_round_trips_through_the_codec() -> None:
    from linkscope.topo.model.codec import from_jsonable, to_jsonable

    spec = CollectiveSpec(ops=("all_reduce",), sizes_bytes=(8,), dtype="float32", warmup=1, iters=1, backend="gloo",
                          world_size=2, dims=layout_groups(None, 2))
    assert from_jsonable(CollectiveSpec, json.loads(json.dumps(to_jsonable(spec)))) == spec


def test_worker_module_is_found_from_any_directory(tmp_path: pathlib.Path) -> None:
    """The worker entry point (also torchrun's) is found through the package, not the working directory."""
    result = subprocess.run([sys.executable, "-m", "linkscope.probes.bench.worker"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "usage" in result.stderr


def test_sweep_sizes_follow_the_smallest_free_gpu_memory() -> None:
    from linkscope.probes.bench.spec import sizes_that_fit

    sizes = [1024**2, 256 * 1024**2, 1024**3]
    assert sizes_that_fit(sizes, 80 * 1024**3) == (sizes, None)
    # 1 GiB free: 80% of it over three buffers is 286,331,153 B, so 256 MiB stays and 1 GiB goes
    assert sizes_that_fit(sizes, 1024**3) == (
        sizes[:2], "sizes above 286331153 B skipped: not enough free GPU memory for their buffers")
    assert sizes_that_fit(sizes, 0)[0] == []


def test_on_cpu_a_rank_may_fill_its_share_of_the_hosts_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import psutil

    from linkscope.probes.bench.spec import sizes_that_fit
    from linkscope.probes.bench.worker import WORLD_ENV, free_bytes

    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=8 * 1024**3))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setenv(WORLD_ENV, "4")
    cpu = types.SimpleNamespace(type="cpu")
    assert free_bytes(cpu) == 2 * 1024**3
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # under torchrun: the ranks of this node
    assert free_bytes(cpu) == 1024**3
    assert sizes_that_fit([1024**3], free_bytes(cpu), "host")[1] == (
        "sizes above 286331153 B skipped: not enough free host memory for their buffers")


def test_the_straggler_group_is_named_when_it_falls_below_three_quarters_of_the_fastest() -> None:
    from linkscope.probes.bench.results import Straggler, SweepRow, stragglers

    def row(group: str, dim: str, size: int, busbw: float) -> SweepRow:
        hosts = {"tp0": ("node-a",), "tp1": ("node-b",)}.get(group, ("node-a", "node-b"))
        return SweepRow("all_reduce", size, "float32", 1.0, busbw, busbw, 0, group, dim, (0, 1), 2, False, "gloo", hosts)

    mib = 1 << 20
    rows = [row("tp0", "tp", mib, 100.0), row("tp1", "tp", mib, 74.0),             # 74%: tp1 straggles
            row("tp0", "tp", 2 * mib, 100.0), row("tp1", "tp", 2 * mib, 76.0),     # 76%: no finding
            row("tp0", "tp", 1024, 100.0), row("tp1", "tp", 1024, 10.0),           # latency-bound: not judged
            row("dp0", "dp", mib, 10.0), row("world", "world", mib, 1.0)]
    assert stragglers(rows) == [Straggler("tp", "all_reduce", mib, "tp1", 74.0, "tp0", 100.0, ("node-b",), 0.74)]
    assert stragglers(rows)[0].to_json() == {"dim": "tp", "op": "all_reduce", "bytes": mib, "group": "tp1",
                                             "busbw_gbps": 74.0, "fastest_group": "tp0", "fastest_busbw_gbps": 100.0,
                                             "hosts": ["node-b"], "ratio": 0.74}


@pytest.mark.parametrize(("op", "size_bytes", "dtype", "nranks", "elements"), [
    ("all_gather", 1048576, "float32", 6, 43688),    # 1 MiB / 4 B / 6 = 43690.67 -> 43688 (a multiple of 4)
    ("all_to_all", 1048576, "bfloat16", 6, 87376),   # 87381.33 -> 87376 (a multiple of 8 two-byte elements)
    ("reduce_scatter", 96, "float32", 8, 0),         # 3 floats each: under 16 bytes
    ("all_reduce", 1048576, "float16", 6, 524288),   # whole-buffer ops are not split
])
def test_split_ops_round_each_ranks_share_to_16_bytes(op: str, size_bytes: int, dtype: str, nranks: int,
                                                      elements: int) -> None:
    from linkscope.probes.bench.spec import op_elements

    assert op_elements(op, size_bytes, dtype, nranks) == elements


@pytest.mark.parametrize(("extra", "message"), [
    (["-o", "/nonexistent-dir/x.json"], "cannot write (no directory /nonexistent-dir)"),
    (["-o", "/tmp"], "/tmp: cannot write (it is a directory)"),
    (["-o", "x.json", "--attach", "sample:nope"], "unknown sample 'nope'"),
])
def test_output_problems_are_found_before_the_run(extra: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An unwritable -o or a bad --attach would lose a long run's results: both fail before any worker starts."""
    from linkscope.probes.bench import api

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(api, "run_collectives", must_not_run)
    assert cli_main(["bench", "collectives", "--backend", "gloo", "--max-bytes", "1K", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_layout_that_does_not_divide_the_processes_says_so_in_bench_terms(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "collectives", "--backend", "gloo", "--layout", "tp=3", "--nproc", "2"]) == 2
    assert capsys.readouterr().err == ("linkscope: error: --layout tp=3: its sizes multiply to 3, which does not divide "
                                       "the 2 processes (--nproc)\n")


def test_a_run_cut_short_still_reports_what_it_measured() -> None:
    """Rank 0 hangs once all_reduce is done: at the deadline the all_reduce rows are printed (and
    written with -o), the run says it was cut short, and the exit status is still a failure."""
    code, out, err = _run(["bench", "collectives", "--backend", "gloo", "--nproc", "2", "--ops", "all_reduce,all_gather",
                           "--min-bytes", "1K",
                           "--max-bytes", "4K", "--timeout", "10", "--json"],
                          env={"LINKSCOPE_BENCH_FAULT": "hang-after-first-op:0"})
    assert code == 2
    assert "deadline of 10 s passed" in err and "what it measured before is shown above" in err
    data = json.loads(out)
    assert [(row["op"], row["bytes"]) for row in data["rows"]] == [("all_reduce", 1024), ("all_reduce", 2048),
                                                                    ("all_reduce", 4096)]
    assert any(note.startswith("run cut short (deadline of 10 s passed") for note in data["notes"])


def test_attach_reads_a_snapshot_from_stdin_once(tmp_path: pathlib.Path) -> None:
    """`--attach -`: the snapshot on stdin is read before the run and carried into -o after it."""
    import subprocess
    import sys

    snapshot = (ROOT / "topo" / "samples" / "dgx-a100.json").read_text()
    output = tmp_path / "attached.json"
    done = subprocess.run([sys.executable, "-m", "linkscope", "bench", "collectives", "--backend",
                           "gloo", "--nproc", "2", "--ops", "all_reduce", "--max-bytes", "1K", "--iters", "2", "--json",
                           "-o", str(output), "--attach", "-"], input=snapshot, capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    saved = json.loads(output.read_text())
    assert saved["hosts"][0]["gpus"] and len(saved["measurements"]["collectives"]) == 8


@pytest.mark.parametrize(("backend", "status"), [("nccl", 1), ("gloo", 0)])
def test_a_straggler_on_gpus_is_a_finding_in_json_too(backend: str, status: int, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from linkscope.commands import bench_collectives
    from linkscope.probes.bench.results import CollectiveSweep
    from linkscope.topo.model.measurements import CollectiveResult, Measurements

    mib = 1 << 20
    results = tuple(CollectiveResult("all_reduce", mib, "float32", 10.0, busbw, busbw, 2, wrong=0, ranks=ranks,
                                     group=group, backend=backend)
                    for group, ranks, busbw in (("tp0", (0, 1), 100.0), ("tp1", (2, 3), 50.0)))
    rows = [{"op": "all_reduce", "bytes": mib, "dtype": "float32", "group": r.group, "dim": "tp", "ranks": list(r.ranks),
             "time_us": 10.0, "algbw_gbps": r.busbw_gbps, "busbw_gbps": r.busbw_gbps, "wrong": 0} for r in results]
    monkeypatch.setattr(bench_collectives, "expected_on", lambda args, notes: None)
    args = argparse.Namespace(json=True, expect=None, output=None, fail_on="warning")
    outcome = bench_collectives.report_collectives(args, Measurements("t", collectives=results),
                                                   CollectiveSweep.from_json({"rows": rows}))
    captured = capsys.readouterr()
    assert outcome == status
    assert json.loads(captured.out)["stragglers"][0]["group"] == "tp1"
    assert ("straggler group" in captured.err) == (status == 1)
