"""Start-up of the commands people run most, whole process: each command importing only its own module
(what `linkscope` does) against every command module imported first (what it did before), in the same run.

Goals (issue 27): `show sample:dgx-h100 --json` <= 0.25 s, `probe --json` <= 0.5 s, `doctor` on an 8-GPU
snapshot with measurements and a 60-reading recording <= 0.3 s, as the median CPU time of a whole process
(wall time beside it).
`python -c pass` is the floor under every row. The ratio column (own / all, CPU time) is what carries from
one machine to another; a busy machine stretches every wall time alike. Exit status 1 when a goal is missed.

    python benchmarks/bench_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from bench_doctor import doctor_snapshot  # noqa: E402

from linkscope.topo.model.codec import snapshot_to_json  # noqa: E402

EVERY_COMMAND_FIRST = ("import sys, linkscope.cli as cli\n"
                       "for name in cli.COMMAND_MODULES: cli._command_module(name)\n"
                       "sys.exit(cli.main(sys.argv[1:]))")
"""The start-up before: every command module imported, then the command run."""


def bytecode_env(cache: str) -> dict[str, str]:
    """This environment with bytecode cached in `cache`, as after `pip install` (which compiles every module):
    with PYTHONDONTWRITEBYTECODE set, every run would compile the whole package from source again."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def seconds(command: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall and median CPU (user + system) seconds of `command` over `runs` runs after one warm-up."""
    walls, cpus = [], []
    for run in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, cwd=REPO, check=False, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command[-4:])} failed: {result.stderr.decode()[-300:]}")
        if run:
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="linkscope-bench-startup-") as tmp:
        env = bytecode_env(os.path.join(tmp, "pycache"))
        floor_wall, floor_cpu = seconds([sys.executable, "-c", "pass"], args.runs, env)
        box = os.path.join(tmp, "box.json")
        Path(box).write_text(snapshot_to_json(doctor_snapshot()))
        cases: list[tuple[list[str], float]] = [
            (["show", "sample:dgx-h100", "--json"], 0.25),
            (["show", "sample:dgx-h100"], 0.25),
            (["probe", "--json"], 0.5),
            (["doctor", box, "--json"], 0.3),
            (["doctor", box], 0.3),
        ]
        print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average "
              f"{os.getloadavg()[0]:.1f}; median of {args.runs} runs; bytecode cached as after pip install")
        print(f"{'command':40} {'all wall':>9} {'own wall':>9} {'all cpu':>8} {'own cpu':>8} {'own/all':>8} "
              f"{'goal':>6}  result")
        print(f"{'python -c pass (the floor)':40} {'':>9} {floor_wall:9.3f} {'':>8} {floor_cpu:8.3f}")
        missed = False
        for argv, goal_s in cases:
            every_wall, every_cpu = seconds([sys.executable, "-c", EVERY_COMMAND_FIRST, *argv], args.runs, env)
            own_wall, own_cpu = seconds([sys.executable, "-m", "linkscope", *argv], args.runs, env)
            ok = own_cpu <= goal_s  # CPU seconds: a busy machine stretches wall time, far less the CPU time used
            missed |= not ok
            label = " ".join("BOX" if word == box else word for word in argv)
            print(f"{label:40} {every_wall:9.3f} {own_wall:9.3f} {every_cpu:8.3f} {own_cpu:8.3f} "
                  f"{own_cpu / every_cpu:8.2f} {goal_s:6.2f}  {'ok' if ok else 'MISSED'}")
        print("all: every command module imported first (before); own: only the command run (linkscope today); "
              "BOX: the 8-GPU doctor snapshot of bench_doctor.py")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
