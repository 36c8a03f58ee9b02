"""Entry point of a benchmark worker process.

Two ways in:
- spawned by :mod:`probes.bench.runner`: `python -m linkscope.probes.bench.worker --job DIR`, rank and world
  size in LINKSCOPE_RANK / LINKSCOPE_WORLD_SIZE / LINKSCOPE_LOCAL_RANK, rendezvous through a
  FileStore in DIR (a private temporary directory), results written to DIR;
- under torchrun, for several nodes (rank, world size and rendezvous from torchrun's environment):
  `torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST0:29500
   -m linkscope.probes.bench.worker collectives --max-bytes 1G -o results.json`
  where rank 0 writes Measurements JSON to `-o`.

The test-only knob LINKSCOPE_BENCH_FAULT (`corrupt:RANK`, `hang:RANK`, `hang-ignore-term:RANK`,
`fail:RANK`, `fail-then-hang:RANK`, `hang-after-first-op:RANK`, `slow:RANK`, comma-separated) makes a rank
misbehave so the tests can see it caught (`slow`: 20 ms late into every call, as a slow node would be, so its
groups' peers wait for it).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from linkscope.topo.common.text import say

FAULT_ENV = "LINKSCOPE_BENCH_FAULT"
RANK_ENV, WORLD_ENV, LOCAL_RANK_ENV = "LINKSCOPE_RANK", "LINKSCOPE_WORLD_SIZE", "LINKSCOPE_LOCAL_RANK"
PARENT_ENV = "LINKSCOPE_PARENT_PID"
"""The spawner's process id: a worker whose parent is already gone exits at once."""
RESULT_FILE, PROGRESS_FILE, JOB_FILE, STORE_FILE = "result.json", "progress", "job.json", "store"


def faults_for(rank: int) -> set[str]:
    """The faults LINKSCOPE_BENCH_FAULT asks this rank to show."""
    wanted = set()
    for item in os.environ.get(FAULT_ENV, "").split(","):
        kind, _, target = item.strip().partition(":")
        if kind and target.strip() == str(rank):
            wanted.add(kind)
    return wanted


def error_file(job_dir: Path, rank: int) -> Path:
    """Where a spawned rank writes its one-line failure reason."""
    return job_dir / f"error-{rank}.txt"


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the spawning process dies, so no worker is orphaned; and
    exit now if it died before this was asked (while the interpreter was starting)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    parent = os.environ.get(PARENT_ENV)
    if parent and os.getppid() != int(parent):
        os._exit(1)


def _misbehave(faults: set[str]) -> None:
    if faults & {"fail", "fail-then-hang"}:
        raise RuntimeError("injected failure (LINKSCOPE_BENCH_FAULT)")
    if "hang-ignore-term" in faults:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if faults & {"hang", "hang-ignore-term"}:
        while True:
            time.sleep(3600)


def run_collectives(spec_data: dict[str, Any], rank: int, local_rank: int, progress: Any,
                    keep: Callable[[str, Any], None] | None = None) -> dict[str, Any] | None:
    """The sweep on this rank (process group already initialised); rank 0 returns the gathered result.
    `keep("collective", row)` receives each row this rank reports as soon as it is measured."""
    import torch
    import torch.distributed as dist

    from linkscope.probes.bench import collectives as coll
    from linkscope.probes.bench.results import order_rows
    from linkscope.probes.bench.spec import CollectiveSpec
    from linkscope.topo.model.codec import from_jsonable

    spec = from_jsonable(CollectiveSpec, spec_data)
    device = torch.device("cuda", local_rank) if spec.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    faults = faults_for(rank)
    handles, setup_ms = coll.create_groups(spec, device)
    from linkscope.probes.cluster_collect import node_name

    host_of_rank = gather_json(node_name(), device)
    _misbehave(faults)
    emulated, notes = coll.choose_emulated(spec, device)
    sizes = list(spec.sizes_bytes)
    sizes, note = _sizes_that_fit(torch, dist, sizes, device)
    if note:
        notes.append(note)
    rows: list[dict[str, Any]] = []
    skipped: set[str] = set()
    for _dim, groups in spec.dims:
        mine = next((g for g in groups if rank in g.ranks), None)
        for op in spec.ops:
            for size in sizes:
                row = None
                if mine is not None:
                    case = coll.make_case(op, size, spec, mine, handles[mine.label], device, emulated)
                    if case is not None and "slow" in faults:
                        case = _slowed(case)
                    if case is None:
                        skipped.add(f"{op} {size} B")
                        dist.barrier()
                    else:
                        row = coll.measure_group(case, spec, mine, handles[mine.label], dist.group.WORLD, device,
                                                 "corrupt" in faults)
                        if row is not None:
                            row["hosts"] = list(dict.fromkeys(host_of_rank[member] for member in mine.ranks))
                        del case
                if row is not None:
                    rows.append(row)
                    if keep is not None:
                        keep("collective", row)
                if rank == 0:
                    progress(op, size)
            if "hang-after-first-op" in faults:
                _misbehave({"hang"})
    gathered = gather_json({"rows": rows, "setup": setup_ms, "skipped": sorted(skipped)}, device)
    if rank != 0:
        return None
    all_rows = [row for part in gathered for row in part["rows"]]
    setup: dict[str, float] = {}
    for part in gathered:
        for label, ms in part["setup"].items():
            setup[label] = max(setup.get(label, 0.0), ms)
    skipped_all = sorted({item for part in gathered for item in part["skipped"]})
    if skipped_all:
        notes.append(f"skipped (too small for one element per rank, or send_recv with one rank): {', '.join(skipped_all[:8])}"
                     + (" ..." if len(skipped_all) > 8 else ""))
    dims_order = {g.label: d for d, (_, groups) in enumerate(spec.dims) for g in groups}
    setup_sorted = sorted(setup.items(), key=lambda item: dims_order.get(item[0], -1))
    return {"rows": order_rows(all_rows, spec), "setup_ms": setup_sorted, "notes": notes}


SLOW_FAULT_S = 0.02
"""How late a `slow` rank enters each call."""


def _slowed(case: Any) -> Any:
    """`case` entered SLOW_FAULT_S late on every call (the `slow` fault)."""
    import dataclasses

    run = case.run

    def late() -> None:
        time.sleep(SLOW_FAULT_S)
        run()

    return dataclasses.replace(case, run=late)


def _sizes_that_fit(torch: Any, dist: Any, sizes: list[int], device: Any) -> tuple[list[int], str | None]:
    """The sweep's sizes that fit the smallest free memory of all ranks (every rank keeps the same sizes)."""
    from linkscope.probes.bench.spec import sizes_that_fit

    free = torch.tensor([float(free_bytes(device))], device=device)
    dist.all_reduce(free, op=dist.ReduceOp.MIN)
    return sizes_that_fit(sizes, int(free.item()), "GPU" if device.type == "cuda" else "host")


def free_bytes(device: Any) -> int:
    """Memory one rank may fill: its GPU's free memory, or on CPU this host's available memory
    shared by the ranks on it (LOCAL_WORLD_SIZE under torchrun, the whole run when spawned here)."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    import psutil

    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get(WORLD_ENV) or 1)
    return int(psutil.virtual_memory().available) // max(ranks_here, 1)


def _spawned(job_dir: Path) -> int:
    rank, world, local_rank = (int(os.environ[name]) for name in (RANK_ENV, WORLD_ENV, LOCAL_RANK_ENV))
    _die_with_parent()
    try:
        job = json.loads((job_dir / JOB_FILE).read_text())
        signal.alarm(int(job["timeout_s"]) + 30)
        import torch.distributed as dist

        if job["kind"] == "p2p":
            from linkscope.probes.bench.p2p import run_p2p

            _write_result(job_dir, run_p2p(job["spec"], lambda *step: _append_progress(job_dir, step),
                                           keep=lambda kind, value: _keep(job_dir, rank, kind, value)))
            return 0
        spec = job["spec"]
        store = dist.FileStore(str(job_dir / STORE_FILE), world)
        timeout = datetime.timedelta(seconds=float(job["timeout_s"]) + 60)  # the spawner's deadline comes first
        t0 = time.perf_counter()
        if spec["backend"] == "nccl":
            import torch

            torch.cuda.set_device(local_rank)
        dist.init_process_group(spec["backend"], store=store, rank=rank, world_size=world, timeout=timeout)
        dist.barrier()
        init_ms = (time.perf_counter() - t0) * 1e3
        if job["kind"] == "step":
            from linkscope.probes.bench.step import run_step_experiment as run_job
        elif job["kind"] == "reuse":
            from linkscope.probes.bench.reuse import run_reuse_experiment as run_job
        else:
            run_job = run_collectives
        result = run_job(spec, rank, local_rank, lambda *step: _append_progress(job_dir, step),
                         lambda kind, value: _keep(job_dir, rank, kind, value))
        if result is not None:
            result["setup_ms"] = [("init_process_group", init_ms), *result["setup_ms"]]
            _write_result(job_dir, result)
        dist.destroy_process_group()
        return 0
    except Exception as exc:  # one line for the parent to show; the traceback goes to this rank's stderr
        import traceback

        traceback.print_exc()
        line = f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        partial = error_file(job_dir, rank).with_suffix(".part")
        partial.write_text(line)
        partial.rename(error_file(job_dir, rank))  # the parent acts on the file's existence: it must be whole
        if "fail-then-hang" in faults_for(rank):  # a rank stuck on its way out, as in a hung NCCL teardown
            _misbehave({"hang"})
        return 1


def gather_json(value: Any, device: Any) -> list[Any]:
    """Every rank's JSON-able `value`, in rank order, on every rank.

    Like `dist.all_gather_object`, but through JSON bytes in a uint8 tensor, so it needs neither
    pickle nor numpy (which the CPU build of torch does not pull in).
    """
    import torch
    import torch.distributed as dist

    payload = torch.frombuffer(bytearray(json.dumps(value).encode()), dtype=torch.uint8).to(device)
    world = dist.get_world_size()
    length = torch.tensor([payload.numel()], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length)
    longest = int(max(int(item.item()) for item in lengths))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: payload.numel()] = payload
    parts = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return [json.loads(bytes(part[: int(size.item())].cpu().tolist())) for part, size in zip(parts, lengths, strict=True)]


def _append_progress(job_dir: Path, step: tuple[Any, ...]) -> None:
    with open(job_dir / PROGRESS_FILE, "a") as handle:
        handle.write(json.dumps(list(step)) + "\n")


def kept_file(job_dir: Path, rank: int) -> Path:
    """Where a spawned rank appends what it measured as it goes (read back when a run is cut short)."""
    return job_dir / f"kept-{rank}.jsonl"


def _keep(job_dir: Path, rank: int, kind: str, value: Any) -> None:
    with open(kept_file(job_dir, rank), "a") as handle:
        handle.write(json.dumps([kind, value]) + "\n")


def _write_result(job_dir: Path, result: dict[str, Any]) -> None:
    partial = job_dir / (RESULT_FILE + ".part")
    partial.write_text(json.dumps(result))
    partial.rename(job_dir / RESULT_FILE)


def _torchrun(argv: list[str]) -> int:
    """Multi-node entry: rendezvous from torchrun's environment, rank 0 prints rows and writes `-o`."""
    from linkscope.probes.bench.results import CollectiveSweep, measurements_from_rows
    from linkscope.probes.bench.spec import add_collective_arguments, spec_from_args
    from linkscope.topo.common.errors import InputError
    from linkscope.topo.common.files import check_writable, write_text_file
    from linkscope.topo.model.codec import measurements_to_json, to_jsonable

    parser = argparse.ArgumentParser(prog="python -m linkscope.probes.bench.worker collectives",
                                     description="Collective sweep under torchrun (one process per GPU, every node).")
    add_collective_arguments(parser)
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None)
    parser.add_argument("-o", "--output", default=None, help="rank 0 writes Measurements JSON here")
    args = parser.parse_args(argv)
    import torch
    import torch.distributed as dist

    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    rank, world, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))
    try:
        spec = spec_from_args(args, backend, world)
        if args.output and rank == 0:
            check_writable(args.output)
    except InputError as exc:
        say(f"error: {exc}", stderr=True)
        return 2
    if backend == "nccl":
        visible = torch.cuda.device_count()
        if visible == 0 or (local_rank >= visible and visible != 1):
            say(f"error: --backend nccl: local rank {local_rank} but {visible} CUDA GPU(s) visible to it", stderr=True)
            return 2
        local_rank = min(local_rank, visible - 1)  # one GPU per task (Slurm --gpus-per-task): it is device 0
        torch.cuda.set_device(local_rank)
    if "GLOO_SOCKET_IFNAME" not in os.environ and os.environ.get("MASTER_ADDR"):
        from linkscope.probes.cluster_collect import interface_towards

        interface = interface_towards(os.environ["MASTER_ADDR"])  # gloo listens where the rendezvous is, nowhere else
        if interface:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    t0 = time.perf_counter()
    dist.init_process_group(backend, init_method="env://")
    dist.barrier()
    init_ms = (time.perf_counter() - t0) * 1e3
    result = run_collectives(to_jsonable(spec), rank, local_rank,
                             lambda op, size: say(f"done {op} {size} B", stderr=True))
    dist.destroy_process_group()
    if result is None:
        return 0
    sweep = CollectiveSweep.from_json(result)
    measurements = measurements_from_rows(sweep.rows, [("init_process_group", init_ms), *sweep.setup_ms],
                                          result["notes"], source="linkscope bench collectives (torchrun)")
    for row in result["rows"]:
        say(json.dumps(row), block=True)
    from linkscope.probes.bench.results import stragglers
    from linkscope.topo.common.units import format_gbps

    for slow in stragglers(sweep.rows):
        say(f"straggler: {slow.dim} group {slow.group} on {', '.join(slow.hosts)}: {slow.op} "
              f"{slow.size_bytes} B at {format_gbps(slow.busbw_gbps, '.2f')} busbw, {slow.ratio:.0%} of {slow.fastest_group}",
              stderr=True)
    if args.output:
        try:
            write_text_file(args.output, measurements_to_json(measurements))
        except InputError as exc:
            say(f"error: {exc}", stderr=True)
            return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch: `--job DIR` (spawned by linkscope) or `collectives ...` (under torchrun)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--job":
        return _spawned(Path(args[1]))
    if args and args[0] == "collectives":
        return _torchrun(args[1:])
    say("usage: python -m linkscope.probes.bench.worker --job DIR | collectives [options]", stderr=True)
    return 2


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Results are written and the process group is gone: leave without the interpreter's teardown, where
    # a gloo thread still winding down can end the process with std::terminate (exit status -6).
    os._exit(status)
