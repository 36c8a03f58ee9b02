"""How fast `linkscope trace` decodes and reads profiler traces, and how much memory it holds, before and after a change.

Goals: decoding and reading a trace costs at most 0.6x the CPU of the standard library's `json.load` of the same
files (the peer: what any Python tool pays just to parse them), with memory as before (the reader streams); one
200 MB trace in under 10 s and under 1 GB; 64 rank traces of 20 MB each in under 30 s with the worker processes.
The traces are generated here with the event mix of a real GPU trace (CPU ops, runtime launches, compute kernels,
NCCL kernels with their metadata, steps). Each row runs a whole process and reads its wall time, CPU time and peak
RSS from the kernel (wait4: the process and the workers it waited for). `before` is a git revision (default main),
`after` this working tree, measured in one run; both read with `--jobs 1` (one process, so CPU compares with the
peer's), and the many-traces case once more as a user runs it (worker processes, one per CPU). Exit status 1 when a
goal is missed or before and after print different JSON.

    python benchmarks/bench_trace.py [--big-mb 200] [--ranks 64 --rank-mb 20] [--baseline main]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from linkscope.probes.cpus import usable_cpus

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


JSON_LOAD = "import json, sys\nfor path in sys.argv[1:]:\n    with open(path) as handle:\n        json.load(handle)"
"""The peer: the standard library's json.load of each file in turn, in one process."""
CPU_GOAL = 0.6
"""Decoding and reading, at most this share of the peer's CPU time."""


def measure(paths: list[str], tree: Path | None, *options: str) -> tuple[float, float, float, bytes]:
    """(wall s, CPU s, peak RSS MiB, stdout) of `linkscope trace --json OPTIONS PATHS` as a whole process, run
    against `tree`'s package (None: this working tree)."""
    from baseline import child_run, env_for

    command = [sys.executable, "-m", "linkscope", "trace", "--json", *options, *paths]
    wall_s, cpu_s, peak_mib, status, out = child_run(command, env_for(tree), str(tree or ROOT))
    if status not in (0, 1):
        raise SystemExit(f"linkscope trace exited {status} ({'before' if tree else 'after'})")
    return wall_s, cpu_s, peak_mib, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rank-mb", type=int, default=20)
    parser.add_argument("--baseline", default="main", help="git revision measured as `before` (default main)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from baseline import child_run, package_tree, revision_name

    rows: list[tuple[str, float, float, float, str, bool]] = []
    """(run, wall s, CPU s, peak RSS MiB, goal or peer, goal met)."""
    identical = True
    with tempfile.TemporaryDirectory() as tmp:
        tree = package_tree(args.baseline, Path(tmp) / "before")
        big = Path(tmp) / "big.json"
        write_trace(big, 0, 8, args.big_mb << 20)
        directory = Path(tmp) / "ranks"
        directory.mkdir()
        for rank in range(args.ranks):
            write_trace(directory / f"rank{rank}.json", rank, args.ranks, args.rank_mb << 20)
        cases = ((f"one trace of {big.stat().st_size >> 20} MB", [str(big)], 10.0, 1024.0),
                 (f"{args.ranks} traces of {args.rank_mb} MB", sorted(str(path) for path in directory.iterdir()), 30.0, None))
        for case, paths, goal_s, goal_mib in cases:
            peer = child_run([sys.executable, "-c", JSON_LOAD, *paths], None, None)
            before = measure(paths, tree, "--jobs", "1")
            after = measure(paths, None, "--jobs", "1")
            identical &= before[3] == after[3]
            rows.append((f"{case}: peer json.load", *peer[:3], "peer", True))
            rows.append(("  trace --jobs 1, before", *before[:3], "", True))
            share = after[1] / peer[1]
            rows.append(("  trace --jobs 1, after", *after[:3], f"<= {CPU_GOAL}x peer CPU: {share:.2f}x",
                         share <= CPU_GOAL))
            if len(paths) > 1:
                pooled = measure(paths, None)
                rows.append(("  trace (workers), after", *pooled[:3], f"< {goal_s:.0f} s", pooled[0] < goal_s))
            else:
                ok = after[0] < goal_s and (goal_mib is None or after[2] <= goal_mib)
                rows[-1] = (*rows[-1][:4], f"{rows[-1][4]}; < {goal_s:.0f} s, < {goal_mib:.0f} MiB", rows[-1][5] and ok)
    print(f"machine: {os.cpu_count()} CPUs ({usable_cpus()} usable), load average {os.getloadavg()[0]:.1f}; "
          f"before = {revision_name(args.baseline)}, after = this working tree")
    print(f"{'run':<40} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13}  goal / peer")
    for run, wall_s, cpu_s, peak_mib, goal, met in rows:
        print(f"{run:<40} {wall_s:>7.2f} {cpu_s:>7.2f} {peak_mib:>13.0f}  {goal}{'' if met else '  MISSED'}")
    print(f"JSON output of before and after: {'identical' if identical else 'DIFFERS'}")
    return 0 if identical and all(met for *_, met in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
