"""How fast `linkscope check` prices large jobs: whole-process wall time against the goals.

Goals (issue 5): `check` of 16,384 ranks (2,048 dgx-h100 nodes, tp 8, pp 16, dp 128) in at
most 1 s as a whole process; 131,072 ranks in at most 5 s; `--suggest` on 1,024 ranks in at
most 2 s. Prints a table (median of the runs); exit status 1 when a goal is missed.

    python benchmarks/bench_check.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("16,384 ranks (rich)", 1.0, ("check", "sample:dgx-h100", "--tp", "8", "--pp", "16", "--nodes", "2048")),
    ("16,384 ranks --json", 1.0, ("check", "sample:dgx-h100", "--tp", "8", "--pp", "16", "--nodes", "2048", "--json")),
    ("131,072 ranks (rich)", 5.0, ("check", "sample:dgx-h100", "--tp", "8", "--pp", "16", "--nodes", "16384")),
    ("131,072 ranks --json", 5.0, ("check", "sample:dgx-h100", "--tp", "8", "--pp", "16", "--nodes", "16384", "--json")),
    ("1,024 ranks --suggest", 2.0, ("check", "sample:dgx-h100", "--tp", "8", "--pp", "4", "--nodes", "128", "--suggest")),
    ("1,024 ranks --suggest, bad order", 2.0,
     ("check", "sample:dgx-h100", "--tp", "8", "--pp", "4", "--nodes", "128", "--order", "dp-tp-pp", "--suggest")),
)


def process_seconds(argv: tuple[str, ...], runs: int) -> list[float]:
    """Wall times of `python -m linkscope ARGV` (exit 0 or 1 are both fine: 1 means findings)."""
    command = [sys.executable, "-m", "linkscope", *argv]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        times.append(time.perf_counter() - start)
        if result.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return times


def main() -> int:
    """Run every case and print the table; 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per case (median reported)")
    args = parser.parse_args()
    missed = 0
    print(f"{'case':34} {'median s':>9} {'max s':>7} {'goal s':>7}  result")
    for name, goal, argv in CASES:
        times = process_seconds(argv, args.runs)
        median = statistics.median(times)
        ok = median <= goal
        missed += not ok
        print(f"{name:34} {median:9.3f} {max(times):7.3f} {goal:7.1f}  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
