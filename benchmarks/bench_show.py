"""How fast `linkscope show` starts: whole-process wall time, in-process phases, heavy imports.

Goal: `linkscope show sample:dgx-h100 --json` in at most 0.3 s as a whole process, without
importing textual or torch (checked with `python -X importtime`). Prints a table; exit status 1
when a goal is missed.

    python benchmarks/bench_show.py [--runs 10]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stdout

GOAL_SECONDS = 0.3
HEAVY_MODULES = ("textual", "torch", "pynvml")
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("show", "sample:dgx-h100", "--json"),
    ("show", "sample:dgx-h100"),
    ("samples",),
)


def process_seconds(argv: tuple[str, ...], runs: int) -> list[float]:
    """Wall times of `python -m linkscope ARGV` run `runs` times (after one warm-up run)."""
    command = [sys.executable, "-m", "linkscope", *argv]
    subprocess.run(command, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def python_startup_seconds(runs: int) -> float:
    """Median wall time of a bare `python -c pass`, the floor under every process figure."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def imported_modules(argv: tuple[str, ...]) -> dict[str, int]:
    """Cumulative import time in microseconds of every module `python -X importtime -m linkscope ARGV` loads."""
    command = [sys.executable, "-X", "importtime", "-m", "linkscope", *argv]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    modules: dict[str, int] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative_us, name = line[len("import time:") :].split("|")
        modules[name.strip()] = int(cumulative_us)
    return modules


def in_process_seconds() -> list[tuple[str, float]]:
    """Cold in-process phases of `show --json`: parse the sample, build the JSON, render the text view."""
    from linkscope.commands.show_cmd import show_json
    from linkscope.topo.samples import load_sample

    phases: list[tuple[str, Callable[[], object]]] = [
        ("load_sample('dgx-h100') (cold parse)", lambda: load_sample("dgx-h100")),
        ("show_json(snapshot)", lambda: show_json(load_sample("dgx-h100"))),
        ("render text view (rich, 80 columns)", _render_text),
    ]
    timings = []
    for label, phase in phases:
        start = time.perf_counter()
        phase()
        timings.append((label, time.perf_counter() - start))
    return timings


def _render_text() -> None:
    from rich.console import Console

    from linkscope.render.view import snapshot_view
    from linkscope.topo.samples import load_sample

    with redirect_stdout(io.StringIO()):
        Console(width=80, file=sys.stdout).print(snapshot_view(load_sample("dgx-h100")))


def main() -> int:
    """Run the measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (default 10)")
    args = parser.parse_args()

    missed = False
    print(f"{'measurement':<52} {'median':>9} {'min':>9} {'max':>9}  goal")
    print("-" * 90)
    floor = python_startup_seconds(args.runs)
    print(f"{'python -c pass (interpreter start, the floor)':<52} {floor:>8.3f}s")
    for argv in COMMANDS:
        times = process_seconds(argv, args.runs)
        median = statistics.median(times)
        goal = ""
        if argv == COMMANDS[0]:
            ok = median <= GOAL_SECONDS
            missed |= not ok
            goal = f"<= {GOAL_SECONDS:.1f}s {'ok' if ok else 'MISSED'}"
        label = "linkscope " + " ".join(argv)
        print(f"{label:<52} {median:>8.3f}s {min(times):>8.3f}s {max(times):>8.3f}s  {goal}")
    for label, seconds in in_process_seconds():
        print(f"{'  in process: ' + label:<52} {seconds:>8.3f}s")

    modules = imported_modules(COMMANDS[0])
    heavy = sorted({name.split(".")[0] for name in modules} & set(HEAVY_MODULES))
    missed |= bool(heavy)
    print()
    verdict = "MISSED" if heavy else "ok"
    print(f"heavy modules imported by `linkscope {' '.join(COMMANDS[0])}`: {', '.join(heavy) or 'none'} ({verdict})")
    top = sorted(((us, name) for name, us in modules.items() if "." not in name), reverse=True)[:8]
    print("largest top-level imports (cumulative): " + ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in top))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
