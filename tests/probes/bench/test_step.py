"""`linkscope bench step`: the overlap experiment for real on gloo (two CPU processes), its accounting,
and its profiler traces read back by `linkscope trace`."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from linkscope.topo.trace.files import read_trace_file, trace_paths
from support.bench import cli_main

pytest.importorskip("torch")

LAYERS, WIDTH = 2, 256
GRADIENT_BYTES = LAYERS * (WIDTH * WIDTH + WIDTH) * 4


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    profile = tmp_path_factory.mktemp("traces")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(["bench", "step", "--backend", "gloo", "--nproc", "2", "--layers", str(LAYERS), "--width",
                           str(WIDTH), "--batch", "8", "--steps", "3", "--warmup", "1", "--bucket-cap-mb", "0.1,25",
                           "--profile", str(profile), "--json", "--timeout", "240"])
    assert status == 0
    return json.loads(out.getvalue()), profile


def test_every_mode_runs_with_its_accounting(experiment: tuple[dict, Path]) -> None:
    report, _ = experiment
    modes = {row["label"]: row for row in report["modes"]}
    assert list(modes) == ["no-overlap", "ddp-0.1mb", "ddp-25mb", "ddp-no-sync"]
    assert report["model"]["gradient_bytes"] == GRADIENT_BYTES
    no_overlap = modes["no-overlap"]
    assert no_overlap["comm_ms"] > 0 and no_overlap["exposed_comm_ms"] == no_overlap["comm_ms"]
    assert no_overlap["speedup_vs_no_overlap"] == 1.0
    for label in ("ddp-0.1mb", "ddp-25mb"):
        row = modes[label]
        assert row["comm_ms"] > 0, "the hook saw no bucket"
        assert 0 <= row["exposed_comm_ms"] <= row["comm_ms"] + 1e-6
        assert row["speedup_vs_no_overlap"] is not None
    baseline = modes["ddp-no-sync"]
    assert baseline["comm_ms"] == 0 and baseline["exposed_comm_ms"] == 0 and baseline["speedup_vs_no_overlap"] is None
    for row in modes.values():
        assert row["step_p10_ms"] <= row["step_ms"] <= row["step_p90_ms"]
        # compute and exposed communication account for the step: their medians (taken over different steps,
        # on a machine other tests load) stay within the spread of the step times
        accounted = row["compute_ms"] + row["exposed_comm_ms"]
        assert 0.5 * row["step_p10_ms"] <= accounted <= 1.5 * row["step_p90_ms"]


def test_profile_traces_read_back_with_the_model_s_traffic(experiment: tuple[dict, Path]) -> None:
    """Each step's collectives carry exactly the model's gradient bytes: per gradient (no-overlap) or per bucket."""
    _, profile = experiment
    for label, expected_calls in (("no-overlap", 2 * LAYERS), ("ddp-0.1mb", None), ("ddp-25mb", 1)):
        traces = [read_trace_file(path) for path in trace_paths([str(profile / label)])]
        assert sorted(t.rank for t in traces if t.rank is not None) == [0, 1]
        for trace in traces:
            assert trace.backend == "gloo" and len(trace.steps) == 3
            per_step: dict[int, list] = defaultdict(list)
            for call in trace.collectives:
                if call.step is not None and call.op == "all_reduce":
                    per_step[call.step].append(call)
            assert sorted(per_step) == [step.step for step in trace.steps]
            for calls in per_step.values():
                assert sum(call.size_bytes for call in calls) == GRADIENT_BYTES
                assert all(call.group_ranks == (0, 1) for call in calls)
                if expected_calls is not None:
                    assert len(calls) == expected_calls
                else:
                    assert len(calls) > 1  # 0.1 MB buckets split the 0.5 MB of gradients


def test_trace_command_on_the_experiment(experiment: tuple[dict, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, profile = experiment
    status = cli_main(["trace", str(profile / "no-overlap"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status in (0, 1)
    assert {row["rank"] for row in report["steps"]} == {0, 1}
    for row in report["steps"]:
        assert row["exposed_comm_us"] <= row["comm_us"] <= row["time_us"] * 1.05


@pytest.mark.parametrize("argv, message", [
    (["--modes", "ddp,zero"], "unknown mode 'zero'"),
    (["--bucket-cap-mb", "0"], "below the minimum"),
    (["--bucket-cap-mb", "1e400"], "out of range"),
    (["--bucket-cap-mb", "x"], "not a number"),
    (["--nproc", "1"], "at least 2"),
    (["--width", "0"], "--width: must be at least 1"),
    (["--layers", "10001"], "too large"),
    (["--layers", "10000", "--width", "65536"], "parameters, more than"),
])
def test_bad_options_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "step", "--backend", "gloo", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_step_time_range_stays_inside_what_was_measured() -> None:
    """Three steps of 1, 10 and 10.5 ms: the 10-90% range lies within them (the default 'exclusive'
    quantiles extrapolate to -4.4 ms on so few samples)."""
    from linkscope.probes.bench.step_results import summarise

    steps = [{"step_ms": ms, "compute_ms": ms / 2, "comm_ms": ms / 4, "exposed_comm_ms": ms / 4} for ms in (1.0, 10.0, 10.5)]
    runs = [{"mode": "ddp", "bucket_cap_mb": 25, "steps": steps, "accounting": "hook"} for _ in range(2)]
    (summary,) = summarise(runs)
    assert 1.0 <= summary.step_p10_ms <= summary.step_ms <= summary.step_p90_ms <= 10.5


def test_reading_notes_say_what_the_numbers_can_carry() -> None:
    """Overlapping spreads, caps larger than all the gradients, unhidden communication and profiling are said."""
    from linkscope.probes.bench.step_results import ModeSummary, reading_notes

    def mode(label: str, kind: str, cap: float | None, step: float, spread: tuple[float, float], comm: float,
             exposed: float, speedup: float | None) -> ModeSummary:
        return ModeSummary(label, kind, cap, 10, step, *spread, 1.0, comm, exposed, "hook", speedup)

    summaries = [mode("no-overlap", "no-overlap", None, 8.0, (3.0, 15.0), 7.0, 7.0, 1.0),
                 mode("ddp-1mb", "ddp", 1, 4.0, (1.0, 5.9), 3.0, 3.0, 2.0),
                 mode("ddp-25mb", "ddp", 25, 4.0, (16.0, 17.0), 3.0, 0.5, 2.0)]
    notes = reading_notes(summaries, gradient_bytes=526_336, profiled=True)
    assert any(n.startswith("ddp-1mb: the 10-90% step range overlaps") for n in notes)
    assert any(n.startswith("ddp-1mb, ddp-25mb: each cap holds all") for n in notes)
    assert any(n.startswith("ddp-1mb: almost none of the communication is hidden") for n in notes)
    assert any("--profile" in n for n in notes)
    assert reading_notes(summaries[:1], gradient_bytes=100 << 20, profiled=False) == []
