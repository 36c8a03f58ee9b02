"""Every command under Ctrl-C, SIGTERM and SIGHUP: exit 130 in one line (or its normal outcome when the signal
comes after the work), no traceback, and an output file either whole or untouched, never a temporary left
behind. The signal is sent by the process to itself: at a sampled moment of the run (fixed seed; more with
LINKSCOPE_FUZZ_EXAMPLES) and, for commands that write, in the middle of the write."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.commands import COMMANDS, EXAMPLES, argv_for
from support.fuzz import Outcome, run_cli

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
COVERED_COMMANDS = tuple(sorted(COMMANDS))
"""The commands this suite interrupts (tests/cli/test_suite_coverage.py holds it to `linkscope help`)."""


@contextmanager
def _late_signals_kept() -> Iterator[None]:
    """A signal that lands after the command returned is swallowed here, instead of ending the test run."""
    previous = {number: signal.signal(number, lambda *_: None) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _interrupted_run(argv: list[str], signum: int, delay_s: float) -> Outcome:
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), signum))
    outcome = Outcome(0, "", "", 0.0)  # a Ctrl-C outside main: as if it had come before the command or after it
    with _late_signals_kept():
        try:
            timer.start()
            outcome = run_cli(argv, seconds=30)
            timer.join()  # a signal sent by now is handled here, inside the try, never in the next test
        except KeyboardInterrupt:
            pass
        finally:
            timer.cancel()
    return outcome


def _assert_clean(outcome: Outcome, folder: Path, what: str) -> None:
    assert "Traceback" not in outcome.err, f"{what}: {outcome.err[-1500:]}"
    assert outcome.status in (0, 1, 2, 130), f"{what}: {outcome.status} {outcome.err[-500:]}"
    if outcome.status == 130:
        assert outcome.err.strip().splitlines()[-1] == "linkscope: interrupted", what
    leftovers = [path.name for path in folder.rglob(".linkscope-*")]
    assert not leftovers, f"{what}: {leftovers}"


def _moments() -> list[tuple[str, int, float]]:
    generator = random.Random("signals")
    runs = max(1, (EXAMPLES or 0) // 10)
    return [(name, generator.choice(SIGNALS), generator.uniform(0.0, 0.15)) for name in COVERED_COMMANDS
            for _ in range(runs)]


@pytest.mark.parametrize(("name", "signum", "delay_s"), _moments())
def test_every_command_ends_cleanly_under_a_signal(name: str, signum: int, delay_s: float, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    case = COMMANDS[name]
    if case.prepare is not None:
        case.prepare(monkeypatch, "")
    target = tmp_path / "written.json" if case.writes else None
    outcome = _interrupted_run(argv_for(case, tmp_path / "in", output=target), signum, delay_s)
    _assert_clean(outcome, tmp_path, f"{name} {signal.Signals(signum).name} at {delay_s:.3f} s")
    if target is not None and target.exists():  # whole, or not there at all
        text = target.read_text()
        if name == "export":  # NCCL topology XML
            assert text.rstrip().endswith("</system>"), text[-200:]
        else:
            json.loads(text)


@pytest.mark.parametrize("name", [name for name in COVERED_COMMANDS if COMMANDS[name].writes and name != "bench"])
@pytest.mark.parametrize("signum", SIGNALS, ids=[number.name for number in SIGNALS])
def test_a_signal_in_the_middle_of_a_write_keeps_the_old_file(name: str, signum: int, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal arrives while the new file is being written (at its fsync): exit 130, the previous file as it
    was, and no temporary file."""
    case = COMMANDS[name]
    if case.prepare is not None:
        case.prepare(monkeypatch, "")
    target = tmp_path / "written.json"
    target.write_text('{"previous": true}\n')

    def signalled(descriptor: int) -> None:
        signal.raise_signal(signum)

    monkeypatch.setattr(os, "fsync", signalled)
    with _late_signals_kept():
        outcome = run_cli(argv_for(case, tmp_path / "in", output=target), seconds=30)
    monkeypatch.undo()
    assert outcome.status == 130, outcome.err
    _assert_clean(outcome, tmp_path, name)
    assert target.read_text() == '{"previous": true}\n'
