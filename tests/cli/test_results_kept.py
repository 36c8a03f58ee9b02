"""A Ctrl-C or SIGTERM at any phase of `bench collectives` (gloo) loses no finished row: every row measured
is on stdout and in -o, the run exits 130 with one line, and no traceback. The signal is sent by the
process to itself at the chosen phase, so each phase is hit exactly."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.fuzz import run_cli

pytest.importorskip("torch")

SIZES = 4
ARGS = ["bench", "collectives", "--backend", "gloo", "--nproc", "2", "--ops", "all_reduce", "--min-bytes", "1K",
        "--max-bytes", "8K", "--warmup", "1", "--iters", "2", "--timeout", "120", "--json"]
"""Four sizes of all_reduce on two CPU processes: four rows when the run completes."""


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)


def _before(signum: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.probes.bench.api as api

    original = api.run_workers

    def run_workers(*args: Any, **kwargs: Any) -> Any:
        _signal_self(signum)
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "run_workers", run_workers)


def _during(signum: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.commands.bench_collectives as bench_collectives

    @contextmanager
    def progress(total: int, label: str, enabled: bool) -> Iterator[Callable[[int], None]]:
        sent: list[int] = []

        def update(done: int) -> None:
            if done >= 1 and not sent:
                sent.append(done)
                _signal_self(signum)

        yield update

    monkeypatch.setattr(bench_collectives, "progress_bar", progress)


def _after_last_row(signum: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.probes.bench.runner as runner

    original = runner._wait

    def wait(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _signal_self(signum)
        return result

    monkeypatch.setattr(runner, "_wait", wait)


def _reporting_before_the_table(signum: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.commands.bench_collectives as bench_collectives

    original = bench_collectives.json_text

    def json_text(*args: Any, **kwargs: Any) -> str:
        _signal_self(signum)
        return original(*args, **kwargs)

    monkeypatch.setattr(bench_collectives, "json_text", json_text)


def _reporting_before_the_file(signum: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.files as files

    original = files.write_text_file

    def write_text_file(path: str, text: str) -> None:
        _signal_self(signum)
        original(path, text)

    monkeypatch.setattr(files, "write_text_file", write_text_file)


PHASES: dict[str, Callable[[int, pytest.MonkeyPatch], None]] = {
    "before-workers": _before,
    "during": _during,
    "after-last-row": _after_last_row,
    "reporting-table": _reporting_before_the_table,
    "reporting-file": _reporting_before_the_file,
}


@pytest.mark.parametrize(
    ("phase", "signum"),
    [("before-workers", signal.SIGINT), ("during", signal.SIGINT), ("during", signal.SIGTERM),
     ("after-last-row", signal.SIGINT), ("reporting-table", signal.SIGINT), ("reporting-file", signal.SIGTERM)],
)
def test_a_signal_loses_no_finished_row(phase: str, signum: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "measured.json"
    PHASES[phase](signum, monkeypatch)
    outcome = run_cli([*ARGS, "-o", str(output)], seconds=150)
    assert outcome.status == 130, outcome.err
    assert "Traceback" not in outcome.err and len(outcome.err.strip().splitlines()) == 1, outcome.err
    if phase == "before-workers":
        assert outcome.out == "" and not output.exists()
        return
    printed = json.loads(outcome.out)["rows"]
    written = json.loads(output.read_text())["measurements"]["collectives"]
    assert len(printed) >= 1 and len(written) == len(printed)
    assert [row["bytes"] for row in printed] == [row["size_bytes"] for row in written]
    if phase != "during":
        assert len(printed) == SIZES, "a finished run must keep every row"
