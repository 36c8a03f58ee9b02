"""Time the `nvidia-smi topo -m` reader on the real fixtures and on generated wide matrices.

Prints one row per case: columns in the header (devices + affinity columns) and the median
wall time of `read_nvsmi_topo` over N runs. Goal: a 44-column text reads in under 20 ms.

    python benchmarks/bench_topo_reader.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from linkscope.topo.formats.nvsmi_matrix import parse_header  # noqa: E402
from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo  # noqa: E402
from support.nvsmi_topo import dgx_like, render_topo  # noqa: E402

GOAL_44_COLUMNS_MS = 20.0


def cases() -> list[tuple[str, str]]:
    """(name, text) for every real fixture and the generated matrices."""
    found = [(path.stem, path.read_text()) for path in sorted((ROOT / "tests/fixtures/real/topo").glob("*.txt"))]
    found.append(("generated 8 GPU + 32 NIC", render_topo(dgx_like(8, 32))))
    found.append(("generated 72 GPU", render_topo(dgx_like(72, 0))))
    found.append(("generated 72 GPU + 72 NIC", render_topo(dgx_like(72, 72))))
    return found


def column_count(text: str) -> int:
    """Header columns (device and affinity columns) of the first matrix in `text`."""
    for number, line in enumerate(text.split("\n"), start=1):
        header = parse_header(line, number)
        if header is not None:
            return len(header.devices) + len(header.value_columns)
    raise ValueError("no matrix header")


def median_ms(text: str, runs: int) -> float:
    """Median wall time of one read, in milliseconds."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        read_nvsmi_topo(text, "bench.txt")
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="reads per case (default 50)")
    args = parser.parse_args()
    print(f"{'case':<58} {'columns':>7} {'median ms':>10}")
    worst_44 = 0.0
    for name, text in cases():
        columns = column_count(text)
        elapsed = median_ms(text, args.runs)
        if columns <= 44:
            worst_44 = max(worst_44, elapsed)
        print(f"{name:<58} {columns:>7} {elapsed:>10.3f}")
    verdict = "met" if worst_44 < GOAL_44_COLUMNS_MS else "MISSED"
    print(f"goal: texts up to 44 columns under {GOAL_44_COLUMNS_MS:.0f} ms: {verdict} (slowest {worst_44:.3f} ms)")
    return 0 if worst_44 < GOAL_44_COLUMNS_MS else 1


if __name__ == "__main__":
    sys.exit(main())
