"""What every `bench` subcommand does around its measurement: the shared flags, the checks before a run,
signals turned into a clean stop, the exit status of a run cut short, and the -o file written after it."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from linkscope.options import ExitStatus, add_fail_on_flag, add_force_flag, add_json_flag, add_output_flag
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.numbers import seconds
from linkscope.topo.common.text import printable, say

if TYPE_CHECKING:
    from linkscope.probes.bench.runner import BenchOutcome

ResultT = TypeVar("ResultT")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--expect", default=None, metavar="SOURCE",
                        help="snapshot to take the expected figures from (default: probe this machine); every result "
                        "is shown next to it with its ratio and verdict (ok, slow below 75%%, far below 50%%, faster than model "
                        "above 125%%), its ranks placed once (said in one line)")
    parser.add_argument("--timeout", type=seconds(), default=900.0, metavar="SECONDS",
                        help="deadline for the whole run in seconds (default 900)")
    add_force_flag(parser, "run on GPUs that have other processes or little free memory; "
                        "--attach to a snapshot of a different kind of machine")
    add_fail_on_flag(parser, "exit 1 when a verdict or finding is at or above this severity (far below, wrong data: "
                     "error; slow, faster than model, stragglers: warning; default warning)")
    add_json_flag(parser, "print JSON instead of tables")
    add_output_flag(parser, "write Measurements JSON to FILE")
    parser.add_argument("--attach", default=None, metavar="SOURCE",
                        help="with -o: write SOURCE's snapshot carrying the results instead (opens in the app)")


def run_guarded(function: Callable[[Any], int]) -> int:
    """Run `function(cancel)` (measure, then report) with SIGINT and SIGTERM turned into `cancel`: a
    signal while measuring ends the run keeping its rows; one after it cannot cut the table or -o short."""
    from linkscope.probes.bench.preflight import GpuBusy
    from linkscope.probes.bench.runner import BenchError, Interruption, signals_cancel

    interruption = Interruption()
    try:
        with signals_cancel(interruption):
            status = function(interruption)
        if interruption.is_set() and status not in (ExitStatus.INTERRUPTED, ExitStatus.FAILED):  # not already said
            say(f"linkscope: bench {interruption.reason} after the run ended; every row is shown"
                  " (and written with -o)", stderr=True)
            return ExitStatus.INTERRUPTED
        return status
    except (BenchError, GpuBusy) as exc:
        return failure_status(exc, shown=False)


def failure_status(exc: Exception, shown: bool) -> int:
    """Say why a run ended (one line) and return its exit status: 130 interrupted, 2 failed."""
    from linkscope.probes.bench.runner import BenchInterrupted

    kept = "; what it measured before is shown above" if shown else ""
    if isinstance(exc, BenchInterrupted):
        say(f"linkscope: bench {printable(str(exc))}; workers ended{kept}", stderr=True)
        return ExitStatus.INTERRUPTED
    say(f"linkscope: error: bench: {printable(str(exc))}{kept}", stderr=True)
    return ExitStatus.FAILED


def measure_then_report(measure: Callable[[], BenchOutcome[ResultT]], report: Callable[[Any, ResultT], int]) -> int:
    """Run `measure` and report its outcome; a run cut short (Ctrl-C, the deadline, a failed worker)
    still reports what it measured before it ended, then fails as it would have."""
    outcome = measure()
    status = report(outcome.measurements, outcome.result)
    return status if outcome.stopped is None else failure_status(outcome.stopped, shown=True)


def expected_on(args: argparse.Namespace, notes: list[str]) -> Any:
    """The snapshot expectations are priced on: --expect, else this machine probed; None (with a note) when it
    cannot be opened."""
    try:
        from linkscope.source import open_source

        snapshot = open_source(args.expect)
    except InputError as exc:
        notes.append(f"no expected figures: {exc}")
        return None
    return snapshot if snapshot.hosts and snapshot.host.gpus else None


def check_output_options(args: argparse.Namespace) -> None:
    """Torch, -o and --attach checked before the run, so no result is lost; the --attach snapshot kept on `args`."""
    from linkscope.files import open_output

    args.attached = open_output(args)
    if importlib.util.find_spec("torch") is None:
        raise InputError("bench needs torch: pip install 'linkscope[bench]' (a CPU build is enough for --backend gloo)")


def write_output(args: argparse.Namespace, measurements: Any) -> None:
    if args.output:
        from linkscope.files import check_measured_on, write_measurements

        if args.attached is not None:
            check_measured_on(args.attached, measurements, args.force, "--attach")

        write_measurements(args.output, measurements, args.attached)

