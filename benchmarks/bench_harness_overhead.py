"""Harness overhead of `linkscope bench collectives` on gloo: our timed path (the op cases and
batch timing of probes.bench.collectives) next to a plain torch.distributed loop doing the same op
on buffers of the same size, side by side in the same processes.

Goal: within 5% at 1 MiB and up. Two gloo processes; for every (op, size) the two loops alternate
for `--rounds` rounds (ours, plain, ours, plain...) so the machine's drift hits both alike; the
times are medians over rounds of the per-op time averaged over ranks (as nccl-tests reports it),
the difference is the median of the per-round ratios ours/plain (a paired comparison, so load from
other programs on the machine cancels out as far as it can).

    python benchmarks/bench_harness_overhead.py [--rounds 7] [--sizes 1M,4M,16M] [--ops all_reduce,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NPROC = 2
DEFAULT_OPS = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv"


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


def worker(rank: int, store_path: str, options: dict[str, Any]) -> None:
    """Both loops in one process, alternating; rank 0 prints the medians as JSON."""
    import warnings

    import torch
    import torch.distributed as dist

    from probes.bench import collectives as coll
    from probes.bench.spec import CollectiveSpec, layout_groups

    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, NPROC), rank=rank, world_size=NPROC)
    warmup, iters = options["warmup"], options["iters"]
    spec = CollectiveSpec(ops=tuple(options["ops"]), sizes_bytes=tuple(options["sizes"]), dtype="float32", warmup=warmup,
                          iters=iters, backend="gloo", world_size=NPROC, dims=layout_groups(None, NPROC), check=False)
    group = spec.dims[0][1][0]
    device = torch.device("cpu")
    results = {}
    for op in spec.ops:
        for size in spec.sizes_bytes:
            case = coll.make_case(op, size, spec, group, dist.group.WORLD, device)
            assert case is not None
            count = size // 4
            send, recv, small = torch.ones(count), torch.zeros(count), torch.ones(count // NPROC)
            ours, plain = [], []
            for _ in range(options["rounds"]):
                local = coll.time_case(case, warmup, iters, device, dist.group.WORLD)
                for _ in range(warmup):
                    plain_call(op, rank, send, recv, small)
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    plain_call(op, rank, send, recv, small)
                reference = (time.perf_counter() - t0) / iters * 1e6
                both = torch.tensor([local, reference], dtype=torch.float64)
                dist.all_reduce(both)
                ours.append(float(both[0]) / NPROC)
                plain.append(float(both[1]) / NPROC)
            ratios = [mine / reference for mine, reference in zip(ours, plain, strict=True)]
            results[f"{op} {size}"] = (statistics.median(ours), statistics.median(plain), statistics.median(ratios))
    if rank == 0:
        print(json.dumps(results))
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--sizes", default="1M,4M,16M")
    parser.add_argument("--ops", default=DEFAULT_OPS)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    from topo.sizes import format_size_bytes, parse_size_bytes

    options = {"ops": args.ops.split(","), "sizes": [parse_size_bytes(text) for text in args.sizes.split(",")],
               "rounds": args.rounds, "warmup": args.warmup, "iters": args.iters}
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(rank), f"{tmp}/store", json.dumps(options)],
                                  stdout=subprocess.PIPE, env=env, text=True) for rank in range(NPROC)]
        outputs = [proc.communicate(timeout=1800)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        print("a worker failed", file=sys.stderr)
        return 1
    results = json.loads(outputs[0])
    print(f"gloo, {NPROC} processes on {os.cpu_count()} CPUs, {args.iters} iterations per batch, "
          f"median of {args.rounds} alternating rounds")
    print(f"{'op':<15} {'size':>8} {'linkscope us':>13} {'plain us':>10} {'difference':>11}  (median of paired ratios)")
    worst = 0.0
    differences = []
    for key, (mine, reference, ratio) in results.items():
        op, size = key.split()
        difference = (ratio - 1) * 100
        worst = max(worst, abs(difference))
        differences.append(difference)
        print(f"{op:<15} {format_size_bytes(int(size)):>8} {mine:>13.1f} {reference:>10.1f} {difference:>+10.1f}%")
    print(f"median difference over all rows: {statistics.median(differences):+.1f}%; largest single row: {worst:.1f}% "
          "(goal: within 5%; single rows on a busy machine scatter both ways)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
