"""How fast `linkscope trace` reads profiler traces, and how much memory it holds.

Goals: one 200 MB trace in under 10 s and under 1 GB of memory (the reader streams); 64 rank
traces of 20 MB each in under 30 s. The traces are generated here with the event mix of a real
GPU trace (CPU ops, runtime launches, compute kernels, NCCL kernels with their metadata, steps).
Each measurement runs `python -m linkscope trace --json` as a whole process and reads its peak
RSS from the kernel (the largest one process reached, workers included). The many-traces case runs
twice: as a user runs it (worker processes, one per CPU) and with `--jobs 1` (one process), so the
table shows what the workers buy on this machine. Prints a table; exit status 1 when a goal is missed.

    python benchmarks/bench_trace.py [--big-mb 200] [--ranks 64 --rank-mb 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from linkscope.topo.trace.pool import usable_cpus

ROOT = Path(__file__).resolve().parent.parent


def write_trace(path: Path, rank: int, world: int, target_bytes: int) -> None:
    """A trace of `target_bytes` or a little more: steps of compute kernels and all_reduce kernels."""
    with path.open("w") as out:
        info = {"backend": "nccl", "rank": rank, "world_size": world,
                "pg_config": [{"pg_name": "0", "pg_size": world, "ranks": list(range(world))}]}
        out.write(f'{{"schemaVersion": 1, "distributedInfo": {json.dumps(info)}, "traceEvents": [\n')
        written, clock, correlation, step, first = 0, 0.0, 0, 0, True
        group = "[" + ", ".join(map(str, range(world))) + "]"
        while written < target_bytes:
            step += 1
            events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": clock, "dur": 10_000.0, "args": {}}]
            for layer in range(200):
                correlation += 1
                launch = clock + layer * 45.0
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": launch - 5,
                               "dur": 20.0, "args": {"External id": correlation, "Input Dims": [[512], [64, 512], [512, 512]],
                                                     "Input type": ["float", "float", "float"]}})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                               "ts": launch, "dur": 4.0, "args": {"correlation": correlation, "External id": correlation}})
                events.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "pid": 0, "tid": 7,
                               "ts": launch + 30, "dur": 40.0, "args": {"correlation": correlation, "device": rank % 8,
                                                                      "stream": 7, "grid": [132, 1, 1]}})
                if layer % 20 == 19:
                    correlation += 1
                    meta = {"Collective name": "allreduce", "In msg nelems": 1 << 22, "Out msg nelems": 1 << 22,
                            "dtype": "BFloat16", "Group size": world, "Process Group Name": "0", "Process Group Ranks": group}
                    events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                                   "ts": launch + 21, "dur": 15.0, "args": meta})
                    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1,
                                   "ts": launch + 25, "dur": 5.0, "args": {"correlation": correlation}})
                    events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                   "pid": 0, "tid": 20, "ts": launch + 60, "dur": 300.0,
                                   "args": {"correlation": correlation, "device": rank % 8, **meta}})
            clock += 10_000.0
            text = ",\n".join(json.dumps(event) for event in events)
            out.write(("" if first else ",\n") + text)
            first = False
            written += len(text)
        out.write("\n]}\n")


def run_trace(paths: list[str], *options: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of `linkscope trace --json OPTIONS PATHS` as a whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "linkscope", "trace", "--json", *options, *paths], cwd=ROOT, check=False,
                   stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rank-mb", type=int, default=20)
    args = parser.parse_args()
    rows: list[tuple[str, float, float | None, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.json"
        write_trace(big, 0, 8, args.big_mb << 20)
        seconds, rss = run_trace([str(big)])
        rows.append((f"one trace of {big.stat().st_size >> 20} MB", seconds, 10.0, rss, 1024.0))
        big.unlink()
        directory = Path(tmp) / "ranks"
        directory.mkdir()
        for rank in range(args.ranks):
            write_trace(directory / f"rank{rank}.json", rank, args.ranks, args.rank_mb << 20)
        seconds, rss = run_trace([str(directory)])
        rows.append((f"{args.ranks} traces of {args.rank_mb} MB", seconds, 30.0, rss, None))
        seconds, rss = run_trace([str(directory)], "--jobs", "1")
        rows.append(("  the same, --jobs 1", seconds, None, rss, None))
    print(f"usable CPUs: {usable_cpus()}")
    print(f"{'case':<28} {'seconds':>8} {'goal':>6} {'peak RSS MiB':>13} {'goal':>6}  verdict")
    missed = False
    for case, seconds, goal_s, rss, goal_mib in rows:
        if goal_s is None:
            print(f"{case:<28} {seconds:>8.2f} {'-':>6} {rss:>13.0f} {'-':>6}  (no goal)")
            continue
        ok = seconds <= goal_s and (goal_mib is None or rss <= goal_mib)
        missed |= not ok
        print(f"{case:<28} {seconds:>8.2f} {goal_s:>6.0f} {rss:>13.0f} {goal_mib or '-':>6}  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
