"""The overlap experiment on one rank: the same small model stepped with and without overlap.

Accounting per step (wall clock; on GPUs each phase ends with a device synchronise):
- `no-overlap`: forward + backward + optimizer is compute; the all_reduce of every gradient in
  between is communication, all of it exposed (nothing runs beside it).
- `ddp`: a communication hook records when each gradient bucket was handed to the process group
  (the bucket became ready: backward had computed it) and when its reduction finished (gloo
  completes the future when the data has arrived). Communication time is the union of those
  intervals; exposed communication is the part of it after the last bucket was launched (backward
  has nothing left to compute then) and before backward returned (DDP waits there for every bucket). On NCCL the future completes
  before the GPU has finished, so there exposed time is step time minus the compute-only
  baseline, and the report says so; `--profile` traces give the kernel-level truth.
- `ddp-no-sync`: DDP under `no_sync()`: no communication, the compute-only baseline.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import Any

from linkscope.probes.bench.step_spec import StepSpec
from linkscope.topo.formats.trace_steps import clip, total, union

ACCOUNTING_HOOKS = "hooks"
"""Communication timed by DDP hook futures (exact on gloo)."""
ACCOUNTING_BASELINE = "baseline"
"""Exposed communication = step time - compute-only baseline (NCCL futures complete early)."""


def run_step_experiment(spec_data: dict[str, Any], rank: int, local_rank: int, progress: Callable[..., None],
                        keep: Callable[[str, Any], None] | None = None) -> dict[str, Any] | None:
    """Every mode of the experiment on this rank (process group initialised); rank 0 returns all ranks' runs."""
    import torch

    from linkscope.probes.bench.worker import gather_json
    from linkscope.topo.model.codec import from_jsonable

    spec = from_jsonable(StepSpec, spec_data)
    device = torch.device("cuda", local_rank) if spec.backend == "nccl" else torch.device("cpu")
    runs = []
    for mode, cap in spec.runs:
        steps = _run_mode(spec, mode, cap, device, rank)
        run = {"mode": mode, "bucket_cap_mb": cap, "rank": rank, "steps": steps,
               "accounting": ACCOUNTING_HOOKS if spec.backend == "gloo" or mode != "ddp" else ACCOUNTING_BASELINE}
        runs.append(run)
        if keep is not None:
            keep("step", run)
        if rank == 0:
            progress(mode, cap)
    gathered = gather_json(runs, device)
    if rank != 0:
        return None
    return {"runs": [run for part in gathered for run in part], "setup_ms": [], "notes": []}


def _run_mode(spec: StepSpec, mode: str, cap: float | None, device: Any, rank: int) -> list[dict[str, float]]:
    import torch
    import torch.distributed as dist

    torch.manual_seed(1234)
    layers: list[torch.nn.Module] = []
    for _ in range(spec.layers):
        layers += [torch.nn.Linear(spec.width, spec.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(device)
    data = torch.randn(spec.batch, spec.width, device=device)
    stepper = _Stepper(spec, mode, cap, model, device)
    for _ in range(spec.warmup):
        stepper.step(data)
    dist.barrier()
    timed: list[dict[str, float]] = []
    trace_path = _trace_path(spec, mode, cap, rank)
    if trace_path is not None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities, record_shapes=True) as prof:
            for _ in range(spec.steps):
                with torch.profiler.record_function(f"ProfilerStep#{len(timed)}"):
                    timed.append(stepper.step(data))
        prof.export_chrome_trace(trace_path)
    else:
        timed = [stepper.step(data) for _ in range(spec.steps)]
    dist.barrier()
    # DDP's reducer holds the process group and gloo threads: let it go now, not at interpreter exit,
    # where a gloo thread still running ends the process with std::terminate
    del stepper
    gc.collect()
    return timed


def run_label(mode: str, cap: float | None) -> str:
    """`ddp-25mb`, `no-overlap`, ...: the name of one run, also its profile sub-directory."""
    return f"{mode}-{cap:g}mb" if cap is not None else mode


def _trace_path(spec: StepSpec, mode: str, cap: float | None, rank: int) -> str | None:
    """Where this rank's trace of one mode goes (`--profile DIR/<mode>/rank<N>.json`), or None."""
    if spec.profile_dir is None:
        return None
    directory = os.path.join(spec.profile_dir, run_label(mode, cap))
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"rank{rank}.json")


class _Stepper:
    """One mode's training step and its time accounting."""

    def __init__(self, spec: StepSpec, mode: str, cap: float | None, model: Any, device: Any) -> None:
        import torch
        import torch.distributed as dist

        self.mode, self.device, self.world = mode, device, dist.get_world_size()
        self.intervals: list[tuple[float, float]] = []
        if mode == "no-overlap":
            self.module = model
        else:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [device.index] if device.type == "cuda" else None
            self.module = DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=cap if cap is not None else 25)
            if mode == "ddp":
                self.module.register_comm_hook(self.intervals, _timed_allreduce_hook)
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=1e-4)

    def _now(self) -> float:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def step(self, data: Any) -> dict[str, float]:
        self.intervals.clear()
        start = self._now()
        if self.mode == "ddp-no-sync":
            with self.module.no_sync():
                self.module(data).float().pow(2).mean().backward()
        else:
            self.module(data).float().pow(2).mean().backward()
        backward_end = self._now()
        comm_s = exposed_s = 0.0
        if self.mode == "no-overlap":
            comm_s = exposed_s = self._reduce_every_gradient()
        elif self.mode == "ddp" and self.intervals:
            in_flight = union(self.intervals)
            comm_s = total(in_flight)
            last_launch = max(launch for launch, _ in self.intervals)
            exposed_s = total(clip(in_flight, last_launch, backward_end))
        optimizer_start = self._now()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        end = self._now()
        step_s = end - start
        compute_s = (backward_end - start) + (end - optimizer_start) - (exposed_s if self.mode == "ddp" else 0.0)
        return {"step_ms": step_s * 1e3, "compute_ms": compute_s * 1e3, "comm_ms": comm_s * 1e3,
                "exposed_comm_ms": exposed_s * 1e3}

    def _reduce_every_gradient(self) -> float:
        import torch.distributed as dist

        start = self._now()
        for parameter in self.module.parameters():
            if parameter.grad is not None:
                dist.all_reduce(parameter.grad)
                parameter.grad.div_(self.world)
        return self._now() - start


def _timed_allreduce_hook(intervals, bucket):
    """DDP's all_reduce of one bucket (average over ranks), recording when it was launched and finished.

    Unannotated on purpose: DDP refuses a hook whose `bucket` annotation is not `dist.GradBucket`, and
    with postponed annotations every annotation is a string."""
    import torch.distributed as dist

    launched = time.perf_counter()
    world = dist.get_world_size()
    tensor = bucket.buffer().div_(world)
    future = dist.all_reduce(tensor, async_op=True).get_future()

    def finished(done: Any) -> Any:
        intervals.append((launched, time.perf_counter()))
        return done.value()[0]

    return future.then(finished)


