"""Harness overhead of `linkscope bench collectives` on gloo: our timed path (the op cases and
`time_case` of probes.bench.collectives) next to a plain torch.distributed loop doing the same op
on buffers of the same size, side by side in the same two gloo processes.

Goal: our per-op time within 5% of the plain loop at 1 MiB and up.

Method (chosen by experiment on a busy 2-CPU machine, where gloo's threads and other programs
make single op times scatter by tens of percent):
- Three loops per (op, size): ours, plain, and plain2, a second copy of the plain loop. plain2 vs
  plain is an A/A control: its difference is pure measurement noise and shows the noise floor.
- Fine interleaving: per (op, size) at least `--rounds` rounds, and more until the row has taken
  `--min-row-s` seconds; a round runs each loop once for `--iters` ops (default 1, so every sample
  is one op behind a barrier), in an order that rotates every round, so drift and position effects
  hit all three alike. Batches of 5 ops at the same run time were far noisier here (A/A spread
  about 9% rms against 2%): a few ops that lose the CPU for a scheduler slice dominate a batch.
  Pinning each rank to one CPU made it worse (gloo's threads then queue behind the rank's own),
  so ranks are not pinned.
- Estimator: per loop, the mean of the fastest half (`--fast-fraction`) of its samples (rank-mean
  microseconds per op); the difference is the ratio of those means. Scheduling noise only ever
  adds time and mostly lands in the slow half. Scored on five recorded runs here (quiet and busy;
  rows whose interval lies within +-5% and whose control passes, of 90): fast-half mean 50 (8-11 per
  run, A/A differences at most 4.3%), median of per-round ratios 53 (8-14 per run, A/A up to 5.7%),
  10th or 20th percentile 38, ratio of medians 33, minimum 13 (one lucky sample). The first two
  are within bootstrap noise of each other; the fast-half mean is kept for its steadier count and
  smaller A/A differences.
- Uncertainty: a 95% bootstrap interval over rounds (rounds resampled with all three loops kept
  together). Verdict: "within 5%" when the interval lies inside +-5%, "over 5%" when it lies above
  +5%, "under -5%" when below -5%, otherwise "not shown". A row whose A/A control interval misses
  0 gets "not shown (control off)": the interval understates the noise there (expect about 1 row
  in 20 by chance alone). A row whose A/A interval reaches beyond +-5% cannot be resolved at all (two
  identical loops differ by that much): its "A/A resolves" column says NO, its verdict "unresolvable",
  and the table ends by naming those rows.
- `--slow-ours-us N` adds an N-microsecond spin to every op of ours: a check that the verdict can
  say "over 5%" (60 us on broadcast at 1 MiB, about 320 us, reads +20% [+17, +24], over 5%).

    python benchmarks/bench_harness_overhead.py [--rounds 300] [--min-row-s 5] [--sizes 1M,4M,16M] [--ops all_reduce,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NPROC = 2
DEFAULT_OPS = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv"
LOOPS = ("ours", "plain", "plain2")
BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
CHECK_EVERY = 50


def plain_call(op: str, rank: int, send: Any, recv: Any, small: Any) -> None:
    """One op the textbook way (torch.distributed's own calls, default group)."""
    import torch.distributed as dist

    other = 1 - rank
    if op == "all_reduce":
        dist.all_reduce(recv)
    elif op == "all_gather":
        dist.all_gather_into_tensor(recv, small)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(small, send)
    elif op == "all_to_all":
        dist.all_to_all_single(recv, send)
    elif op == "broadcast":
        dist.broadcast(send if rank == 0 else recv, src=0)
    else:
        requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, other), dist.P2POp(dist.irecv, recv, other)])
        for request in requests:
            request.wait()


def plain_loop(op: str, rank: int, iters: int, buffers: tuple[Any, Any, Any]) -> float:
    """The plain loop's batch, timed like `time_case` (barrier, then perf_counter): microseconds per op."""
    import torch.distributed as dist

    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        plain_call(op, rank, *buffers)
    return (time.perf_counter() - t0) / iters * 1e6


def spin_us(duration_us: float) -> None:
    """Busy-wait for `duration_us` microseconds (the deliberate slowdown of `--slow-ours-us`)."""
    end = time.perf_counter() + duration_us / 1e6
    while time.perf_counter() < end:
        pass


def worker(rank: int, store_path: str, options: dict[str, Any]) -> None:
    """All three loops in one process, interleaved; rank 0 prints the rank-mean samples as JSON."""
    import warnings
    from dataclasses import replace

    import torch
    import torch.distributed as dist

    from linkscope.probes.bench import collectives as coll
    from linkscope.probes.bench.spec import CollectiveSpec, layout_groups

    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, NPROC), rank=rank, world_size=NPROC)
    warmup, iters, rounds, slow_us = options["warmup"], options["iters"], options["rounds"], options["slow_ours_us"]
    spec = CollectiveSpec(ops=tuple(options["ops"]), sizes_bytes=tuple(options["sizes"]), dtype="float32", warmup=0,
                          iters=iters, backend="gloo", world_size=NPROC, dims=layout_groups(None, NPROC), check=False)
    group = spec.dims[0][1][0]
    device = torch.device("cpu")
    samples_us: dict[str, list[list[float]]] = {}
    for op in spec.ops:
        for size_bytes in spec.sizes_bytes:
            case = coll.make_case(op, size_bytes, spec, group, dist.group.WORLD, device)
            assert case is not None
            if slow_us:
                fast_run = case.run

                def slow_run(run: Callable[[], None] = fast_run) -> None:
                    run()
                    spin_us(slow_us)

                case = replace(case, run=slow_run)
            count = size_bytes // 4
            plain_buffers = [(torch.ones(count), torch.zeros(count), torch.ones(count // NPROC)) for _ in range(2)]
            loops: list[Callable[[], float]] = [
                partial(coll.time_case, case, 0, iters, device, dist.group.WORLD),
                partial(plain_loop, op, rank, iters, plain_buffers[0]),
                partial(plain_loop, op, rank, iters, plain_buffers[1]),
            ]
            for loop in loops:
                for _ in range(warmup):
                    loop()
            rows_us = run_rounds(loops, rounds, options["min_row_s"])
            totals = torch.tensor(rows_us, dtype=torch.float64)
            dist.all_reduce(totals)
            samples_us[f"{op} {size_bytes}"] = (totals / NPROC).tolist()
    if rank == 0:
        print(json.dumps(samples_us))
    dist.destroy_process_group()


def run_rounds(loops: Sequence[Callable[[], float]], rounds: int, min_row_s: float) -> list[list[float]]:
    """At least `rounds` rounds, and on until `min_row_s` seconds have passed on every rank (checked every
    CHECK_EVERY rounds, the same rounds on both ranks); each round runs every loop once, in rotating order."""
    import torch
    import torch.distributed as dist

    started_s = time.perf_counter()
    rows_us: list[list[float]] = []
    while True:
        row = [0.0] * len(loops)
        for position in range(len(loops)):
            which = (len(rows_us) + position) % len(loops)
            row[which] = loops[which]()
        rows_us.append(row)
        if len(rows_us) >= rounds and len(rows_us) % CHECK_EVERY == 0:
            elapsed_s = torch.tensor([time.perf_counter() - started_s])
            dist.all_reduce(elapsed_s, op=dist.ReduceOp.MIN)
            if float(elapsed_s) >= min_row_s:
                return rows_us


def fast_mean(samples: Any, fraction: float) -> Any:
    """Mean of the fastest `fraction` of the samples along dim -2 of a (..., rounds, loops) tensor."""
    kept = max(1, int(fraction * samples.shape[-2]))
    return samples.sort(dim=-2).values[..., :kept, :].mean(dim=-2)


def row_statistics(rows_us: list[list[float]], fraction: float, generator: Any) -> dict[str, Any]:
    """Fast-half mean per loop (us), ours-vs-plain and plain2-vs-plain differences (percent) and their 95%
    percentile-bootstrap intervals, rounds resampled whole so the loops of one round stay together."""
    import torch

    samples = torch.tensor(rows_us, dtype=torch.float64)
    picks = torch.randint(len(rows_us), (BOOTSTRAP_RESAMPLES, len(rows_us)), generator=generator)
    point = fast_mean(samples, fraction)
    resampled = fast_mean(samples[picks], fraction)
    tail = (1 - CONFIDENCE) / 2
    result: dict[str, Any] = {"ours_us": float(point[0]), "plain_us": float(point[1]), "rounds": len(rows_us)}
    for name, column in (("ours", 0), ("control", 2)):
        differences = (resampled[:, column] / resampled[:, 1] - 1) * 100
        bounds = torch.quantile(differences, torch.tensor([tail, 1 - tail], dtype=torch.float64))
        result[name] = (float(point[column] / point[1] - 1) * 100, (float(bounds[0]), float(bounds[1])))
    return result


def control_resolves(control: tuple[float, float], goal_percent: float) -> bool:
    """Whether the A/A control can tell `goal_percent` from nothing on this row: its interval (two identical
    loops) lies inside +-goal. Where it does not, the noise alone spans the goal and no verdict is possible."""
    return -goal_percent < control[0] and control[1] < goal_percent


def verdict(interval: tuple[float, float], control: tuple[float, float], goal_percent: float) -> str:
    """What the interval shows about the goal; nothing when the A/A control misses 0 or cannot resolve the goal."""
    low, high = interval
    if not control[0] <= 0 <= control[1]:
        return "not shown (control off)"
    if not control_resolves(control, goal_percent):
        return f"unresolvable (A/A noise beyond {goal_percent:g}%)"
    if -goal_percent < low and high < goal_percent:
        return f"within {goal_percent:g}%"
    if low > goal_percent:
        return f"over {goal_percent:g}%"
    if high < -goal_percent:
        return f"under -{goal_percent:g}%"
    return "not shown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300, help="least interleaved rounds per (op, size) (default 300)")
    parser.add_argument("--min-row-s", type=float, default=5.0,
                        help="keep adding rounds until a row has taken this long (default 5 s)")
    parser.add_argument("--iters", type=int, default=1, help="ops per loop per round (default 1)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches per loop before the rounds (default 3)")
    parser.add_argument("--sizes", default="1M,4M,16M")
    parser.add_argument("--ops", default=DEFAULT_OPS)
    parser.add_argument("--fast-fraction", type=float, default=0.5,
                        help="share of each loop's fastest samples averaged (default 0.5)")
    parser.add_argument("--goal-percent", type=float, default=5.0)
    parser.add_argument("--slow-ours-us", type=float, default=0.0, help="spin this long after every op of ours")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--samples-json", type=Path, help="also write the raw samples here (us per op, per round)")
    args = parser.parse_args()
    from linkscope.topo.common.sizes import format_size_bytes, parse_size_bytes

    options = {"ops": args.ops.split(","), "sizes": [parse_size_bytes(text) for text in args.sizes.split(",")],
               "rounds": args.rounds, "warmup": args.warmup, "iters": args.iters, "min_row_s": args.min_row_s,
               "slow_ours_us": args.slow_ours_us}
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    started_s = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(rank), f"{tmp}/store", json.dumps(options)],
                                  stdout=subprocess.PIPE, env=env, text=True) for rank in range(NPROC)]
        outputs = [proc.communicate(timeout=1800)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        print("a worker failed", file=sys.stderr)
        return 1
    samples_us: dict[str, list[list[float]]] = json.loads(outputs[0])
    if args.samples_json:
        args.samples_json.write_text(json.dumps({"loops": LOOPS, "samples_us": samples_us}))
    import torch

    generator = torch.Generator().manual_seed(args.seed)
    print(f"gloo, {NPROC} processes on {os.cpu_count()} CPUs; >= {args.rounds} rounds (>= {args.min_row_s:g} s) per row, "
          f"{args.iters} op(s) per loop per round, loop order rotating; us per op = mean of the fastest "
          f"{args.fast_fraction:.0%} of rank-mean samples; 95% bootstrap intervals"
          + (f"; ours slowed by {args.slow_ours_us:g} us per op" if args.slow_ours_us else ""))
    print(f"{'op':<15} {'size':>7} {'rounds':>6} {'ours us':>8} {'plain us':>9} {'ours vs plain':>25} "
          f"{'A/A plain2 vs plain':>25} {'A/A resolves':>12}  verdict")
    counts: dict[str, int] = {}
    unresolved: list[str] = []
    for key, rows_us in samples_us.items():
        op, size = key.split()
        stats = row_statistics(rows_us, args.fast_fraction, generator)
        (ours_percent, interval), (control_percent, control) = stats["ours"], stats["control"]
        shown = verdict(interval, control, args.goal_percent)
        counts[shown] = counts.get(shown, 0) + 1
        ours_text = f"{ours_percent:+5.1f}% [{interval[0]:+5.1f}, {interval[1]:+5.1f}]"
        control_text = f"{control_percent:+5.1f}% [{control[0]:+5.1f}, {control[1]:+5.1f}]"
        resolves = control_resolves(control, args.goal_percent)
        if not resolves:
            unresolved.append(f"{op} {format_size_bytes(int(size))}")
        print(f"{op:<15} {format_size_bytes(int(size)):>7} {stats['rounds']:>6} {stats['ours_us']:>8.0f} "
              f"{stats['plain_us']:>9.0f} {ours_text:>25} {control_text:>25} {'yes' if resolves else 'NO':>12}  {shown}")
    summary = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
    print(f"{len(samples_us)} rows: {summary}; wall time {time.perf_counter() - started_s:.0f} s")
    print(f"rows the A/A control cannot resolve to {args.goal_percent:g}% (its own interval reaches beyond): "
          f"{', '.join(unresolved) or 'none'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
