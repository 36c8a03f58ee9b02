"""The Bench tab's requests on the real benchmark engine (`probes.bench.api`): peer copies and collectives.

Runs in the Bench tab's worker thread; the engine starts its own child processes, honours the
cancel event and always ends them. torch is only imported by the engine, and only when a run starts.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable

from linkscope.topo.common.errors import InputError
from linkscope.topo.model.measurements import Measurements
from linkscope.tui.services import BENCH_KINDS, BenchPlan, BenchProgress, BenchRequest, Unavailable

TIMEOUT_S = 900.0
"""Deadline of one engine call (one size for peer copies, the whole sweep for a collective)."""
PEER_SAMPLES = 5
PEER_COPIES = 4


GLOO_PROCESSES_MAX = 4
"""Most processes a gloo collective runs in on this machine's CPUs (at least two; no more than its cores)."""
COLLECTIVE_KINDS = tuple(kind for kind in BENCH_KINDS if kind != "p2p")


def bench_plan() -> BenchPlan:
    """What this machine can run: with two or more GPUs everything over NCCL; otherwise the collectives over gloo on
    its CPUs (peer copies need two GPUs); nothing without torch. GPUs are counted with NVML, so torch is not
    imported until a run starts."""
    if importlib.util.find_spec("torch") is None:
        return BenchPlan(kinds=(), cannot=("no benchmark: torch is not installed (pip install 'linkscope[bench]')",))
    from linkscope.probes.bench.preflight import read_gpu_states

    states = read_gpu_states()
    gpus = len(states) if states is not None else 0
    if gpus >= 2:
        return BenchPlan(kinds=BENCH_KINDS, backend="nccl", processes=gpus, where=f"NCCL on this machine's {gpus} GPUs")
    found = "NVML found no GPU" if states is not None else "no NVIDIA driver (NVML) here"
    return gloo_plan(min(GLOO_PROCESSES_MAX, max(2, os.cpu_count() or 2)), "this machine has one GPU" if gpus == 1 else found)


def gloo_plan(processes: int, why_no_gpus: str) -> BenchPlan:
    """The plan of a machine with fewer than two GPUs: the collectives over gloo in `processes` CPU processes."""
    return BenchPlan(kinds=COLLECTIVE_KINDS, backend="gloo", processes=processes,
                     where=f"collectives over gloo on this machine's CPUs ({processes} processes)",
                     cannot=(f"p2p peer copies and NCCL collectives need two GPUs: {why_no_gpus}",))


def _gpu_count() -> int:
    from linkscope.probes.bench.preflight import cuda_device_count, gpu_preflight

    count = cuda_device_count()
    if count == 0:
        raise Unavailable("torch sees no CUDA GPU (CPU-only torch build or no driver)")
    gpu_preflight(count, force=False)
    return count


def run_request(
    plan: BenchPlan,
    request: BenchRequest,
    progress: Callable[[BenchProgress], None],
    cancel: threading.Event,
) -> Measurements:
    """Run `request` as `plan` says: peer copies size by size (each a short engine run), collectives as one sweep
    (NCCL on every GPU, or gloo in `plan.processes` CPU processes)."""
    from linkscope.probes.bench.preflight import GpuBusy
    from linkscope.probes.bench.runner import BenchError, BenchInterrupted

    try:
        if plan.backend == "gloo":
            return _collective(request, plan.processes, progress, cancel, backend="gloo")
        count = _gpu_count()
        if request.kind == "p2p":
            return _peer_copies(request, count, progress, cancel)
        return _collective(request, count, progress, cancel)
    except BenchInterrupted:  # stopped before anything was measured
        return Measurements(source=f"linkscope bench {request.kind} (stopped)")
    except (BenchError, GpuBusy) as exc:
        raise Unavailable(str(exc)) from None


def _peer_copies(
    request: BenchRequest, count: int, progress: Callable[[BenchProgress], None], cancel: threading.Event
) -> Measurements:
    from linkscope.probes.bench.api import run_peer_copies
    from linkscope.probes.bench.p2p_report import all_pairs
    from linkscope.probes.bench.runner import BenchInterrupted

    pairs = all_pairs(count)
    if not pairs:
        raise Unavailable("peer copies need at least two GPUs")
    copies: list = []
    notes: list[str] = []
    sizes = request.sizes_bytes
    for step, size in enumerate(sizes):

        def report(done: int, total: int, step: int = step) -> None:
            progress(BenchProgress((step + done / max(total, 1)) / len(sizes), f"peer copies, size {step + 1} of {len(sizes)}"))

        try:
            outcome = run_peer_copies(pairs, size, PEER_SAMPLES, PEER_COPIES, False, TIMEOUT_S, report, cancel, count)
        except BenchInterrupted:
            break
        assert outcome.measurements is not None
        copies.extend(outcome.measurements.peer_copies)
        if outcome.stopped is not None:  # stopped mid-size: keep what it measured, end here (a failure is raised)
            if not isinstance(outcome.stopped, BenchInterrupted):
                raise outcome.stopped
            break
        notes.extend(outcome.measurements.notes)
        partial = Measurements("linkscope bench p2p", peer_copies=tuple(copies), notes=tuple(notes))
        progress(BenchProgress((step + 1) / len(sizes), f"peer copies, size {step + 1} of {len(sizes)} done", partial))
    return Measurements("linkscope bench p2p", peer_copies=tuple(copies), notes=tuple(notes))


def _collective(
    request: BenchRequest,
    count: int,
    progress: Callable[[BenchProgress], None],
    cancel: threading.Event,
    backend: str = "nccl",
) -> Measurements:
    """One collective swept over the request's sizes in `count` processes (one per GPU with NCCL, on CPUs with gloo)."""
    from linkscope.probes.bench.api import run_collectives
    from linkscope.probes.bench.runner import BenchInterrupted
    from linkscope.probes.bench.spec import CollectiveSpec, layout_groups
    from linkscope.topo.model.busbw import PRICED_OPS

    if request.kind not in PRICED_OPS:
        raise InputError(f"benchmark: {request.kind!r} is not one of p2p, {', '.join(PRICED_OPS)}")
    if count < 2:
        raise Unavailable("collectives need at least two processes")
    spec = CollectiveSpec(
        ops=(request.kind,),
        sizes_bytes=request.sizes_bytes,
        dtype="float32",
        warmup=5,
        iters=20,
        backend=backend,
        world_size=count,
        dims=layout_groups(None, count),
    )

    def report(done: int, total: int) -> None:
        progress(BenchProgress(done / max(total, 1), f"{request.kind}: {done} of {total} sizes"))

    outcome = run_collectives(spec, TIMEOUT_S, report, cancel)
    if outcome.stopped is not None and not isinstance(outcome.stopped, BenchInterrupted):
        raise outcome.stopped  # a failed run is a failure even when it measured some rows
    assert outcome.measurements is not None
    return outcome.measurements  # finished, or stopped keeping what it measured
