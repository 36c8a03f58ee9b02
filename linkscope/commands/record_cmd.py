"""`linkscope record -o FILE --seconds N [--interval S]`: this machine's live counters as a time series.

Writes this machine's snapshot carrying the recording (NVLink TX/RX per GPU and per link, PCIe TX/RX,
NVLink error totals, PCIe generation and width, SM and memory clocks), all at once when done.
`linkscope doctor FILE` judges error-counter growth and PCIe generation under load from it, and
`linkscope open FILE` replays it on the Monitor tab. Exit status: 0 recorded, 2 bad input or no
counters here, 130 interrupted (what was read before Ctrl-C is still written).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from linkscope.options import ExitStatus, add_output_flag
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_RECORD_SECONDS
from linkscope.topo.common.numbers import WEEK_S, decimal_number
from linkscope.topo.common.text import say


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `record` subcommand."""
    parser = subparsers.add_parser(
        "record",
        help="record this machine's live NVLink/PCIe counters, errors and clocks into a snapshot file",
        description=(
            "Read this machine's live counters every --interval seconds for --seconds: NVLink TX/RX per GPU and\n"
            "per link, PCIe TX/RX, NVLink error totals (CRC, replay, recovery), PCIe generation and width, SM and\n"
            "memory clocks. -o gets this machine's snapshot carrying the recording, written all at once at the\n"
            "end; `linkscope doctor FILE` reads error-counter growth from it and `linkscope open FILE` replays it\n"
            "on the Monitor tab. Read-only: nothing is set or reset."
        ),
        epilog=(
            "examples:\n"
            "  linkscope record -o /tmp/box-rec.json --seconds 60          (run the job meanwhile)\n"
            "  linkscope record -o rec.json --seconds 10 --interval 0.5\n"
            "  linkscope doctor rec.json\n"
            "exit status: 0 recorded, 2 bad input or no GPU counters here, 130 interrupted (the file is still written)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_output_flag(parser, "snapshot JSON to write", required=True)
    parser.add_argument("--seconds", type=decimal_number(0, WEEK_S), required=True, metavar="SECONDS", help="how long to record")
    parser.add_argument("--interval", type=decimal_number(0, WEEK_S), default=1.0, metavar="SECONDS",
                        help="seconds between readings (default 1; each reading takes ~20 ms per GPU for PCIe)")
    parser.set_defaults(run=run)


def _check_times(seconds: float, interval_s: float) -> None:
    if not 0 < seconds <= MAX_RECORD_SECONDS:
        raise InputError(f"--seconds: {seconds:g} is not between 0 and {MAX_RECORD_SECONDS:g}")
    if not 0 < interval_s <= seconds:
        raise InputError(f"--interval: {interval_s:g} must be above 0 and at most --seconds ({seconds:g})")


class _Progress:
    """`recording 12 of 60 s` on stderr, rewritten in place on a terminal; start and end lines otherwise."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.tty = sys.stderr.isatty()

    def __call__(self, readings: int, elapsed_s: float) -> None:
        if readings == 1:
            say(f"recording {self.seconds:g} s of counters (Ctrl-C stops and keeps what was read)", stderr=True)
        elif self.tty:
            say(f"{elapsed_s:6.1f} of {self.seconds:g} s, {readings} readings", stderr=True, end="\r")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            say("", stderr=True)


def run(args: argparse.Namespace) -> int:
    """Record, then write the snapshot atomically and say what was recorded."""
    from linkscope.probes.nvml import load_pynvml
    from linkscope.probes.record import RecordUnavailable, record_snapshot
    from linkscope.topo.common.files import check_writable, write_text_file
    from linkscope.topo.model.codec import snapshot_to_json

    _check_times(args.seconds, args.interval)
    check_writable(args.output)
    progress = _Progress(args.seconds) if args.seconds > 1 else None
    try:
        snapshot, interrupted = record_snapshot(load_pynvml(), args.seconds, args.interval, progress=progress)
    except RecordUnavailable as exc:
        raise InputError(f"record: {exc}") from None
    finally:
        if progress is not None:
            progress.done()
    write_text_file(args.output, snapshot_to_json(snapshot))
    recording = snapshot.recording
    assert recording is not None
    gpus = len(recording.samples[0].gpus) if recording.samples else 0
    cut = " (stopped early: interrupted)" if interrupted else ""
    say(f"recorded {len(recording.samples)} readings of {gpus} GPU(s) over {recording.duration_s:g} s{cut} "
        f"to {args.output}")
    if not interrupted:
        return ExitStatus.OK
    say("linkscope: interrupted", stderr=True)  # as every command ends on Ctrl-C, SIGTERM or SIGHUP
    return ExitStatus.INTERRUPTED
