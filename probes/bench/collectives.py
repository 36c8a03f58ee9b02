"""Worker side of `bench collectives`: buffers, the ops, the timed batches and the correctness pass.

Runs inside a worker process with torch.distributed initialised. Every rank fills its send
buffer with a rank-dependent pattern of small integers (exact in every dtype), so the expected
result of each op is known without a second copy of the data and `wrong` counts the elements
that differ, summed over the group, as nccl-tests' `#wrong` does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from linkscope.probes.bench.spec import DTYPE_BYTES, PER_RANK_OPS, CollectiveSpec, GroupSpec, op_elements
from linkscope.probes.bench.timing import BatchClock, CpuClock, CudaEventClock
from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.busbw import algbw_gbps, busbw_gbps

TORCH_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
EXACT_INTEGER_LIMIT: dict[str, int] = {"float32": 2**24, "bfloat16": 256, "float16": 2048}
"""Largest integer each dtype holds exactly: sums of the fill pattern stay below it."""

EMULATE_ENV = "LINKSCOPE_BENCH_EMULATE"
"""Debug/test knob: comma-separated ops to run with the send/recv fallback even where the backend has them."""


def fill_modulus(dtype: str, nranks: int) -> int:
    """Period of the fill pattern: values 1..m, chosen so a sum over `nranks` ranks stays exact."""
    return 4 if 4 * nranks <= EXACT_INTEGER_LIMIT[dtype] else 2


def pattern(rank: int, start: int, count: int, modulus: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Elements `start..start+count` of rank `rank`'s fill: 1 + (rank + index) % modulus."""
    period = torch.tensor([1 + (rank + start + k) % modulus for k in range(modulus)], dtype=dtype, device=device)
    return period.repeat((count + modulus - 1) // modulus)[:count]


def reduced_pattern(nranks: int, start: int, count: int, modulus: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Elements `start..start+count` of the sum of every rank's fill (the expected all_reduce result)."""
    period = [sum(1 + (rank + start + k) % modulus for rank in range(nranks)) for k in range(modulus)]
    values = torch.tensor(period, dtype=dtype, device=device)
    return values.repeat((count + modulus - 1) // modulus)[:count]


@dataclass
class OpCase:
    """One op at one size in one group: the buffers, the call, and how to check the result."""

    op: str
    size_bytes: int
    in_place: bool
    run: Callable[[], None]
    refill: Callable[[], None]
    count_wrong: Callable[[], int]
    corrupt: Callable[[], None]


def _collective(name: str, *fallbacks: str) -> Callable[..., Any]:
    for candidate in (name, *fallbacks):
        function = getattr(dist, candidate, None)
        if function is not None:
            return function
    raise RuntimeError(f"torch.distributed has none of {name}, {', '.join(fallbacks)}")


def ring_reduce_scatter(output: torch.Tensor, send: torch.Tensor, group: GroupSpec, me: int, pg: Any) -> None:
    """reduce_scatter as a ring of n-1 send/recv steps (for backends without it): each rank sends
    (n-1)/n of its buffer, the same traffic as NCCL's ring, so busbw stays comparable."""
    n = len(group.ranks)
    chunks = send.view(n, -1)
    acc = chunks.clone()
    incoming = torch.empty_like(chunks[0])
    nxt, prv = group.ranks[(me + 1) % n], group.ranks[(me - 1) % n]
    for step in range(n - 1):
        out_idx, in_idx = (me - step - 1) % n, (me - step - 2) % n
        ops = [dist.P2POp(dist.isend, acc[out_idx], nxt, pg), dist.P2POp(dist.irecv, incoming, prv, pg)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        acc[in_idx] += incoming
    output.copy_(acc[me])


def make_case(op: str, size_bytes: int, spec: CollectiveSpec, group: GroupSpec, pg: Any, device: torch.device,
              emulated: frozenset[str] = frozenset()) -> OpCase | None:
    """Buffers and calls for `op` at `size_bytes` (nccl-tests' meaning of size), or None when the
    size rounds down to zero elements per rank."""
    n = len(group.ranks)
    me = group.ranks.index(dist.get_rank())
    dtype = TORCH_DTYPES[spec.dtype]
    element = DTYPE_BYTES[spec.dtype]
    modulus = fill_modulus(spec.dtype, n)
    per_rank = op in PER_RANK_OPS
    chunk = op_elements(op, size_bytes, spec.dtype, n)
    if chunk == 0:
        return None
    total = chunk * n if per_rank else chunk
    send_count = chunk if op == "all_gather" else total
    recv_count = chunk if op == "reduce_scatter" else total
    send = pattern(me, 0, send_count, modulus, dtype, device)
    recv = torch.zeros(recv_count, dtype=dtype, device=device)

    def refill() -> None:
        send.copy_(pattern(me, 0, send_count, modulus, dtype, device))
        recv.zero_()

    def wrong_vs(expected_chunks: list[torch.Tensor]) -> int:
        parts = recv.split([len(part) for part in expected_chunks])
        return int(sum(int((got != want).sum().item()) for got, want in zip(parts, expected_chunks, strict=True)))

    def corrupt() -> None:
        recv[0] += 7

    run: Callable[[], None]
    if op == "all_reduce":
        def run() -> None:
            dist.all_reduce(recv, group=pg)

        def refill_all_reduce() -> None:
            refill()
            recv.copy_(send)

        refill_all_reduce()
        return OpCase(op, total * element, True, run, refill_all_reduce,
                      lambda: wrong_vs([reduced_pattern(n, 0, total, modulus, dtype, device)]), corrupt)
    if op == "all_gather":
        gather = _collective("all_gather_single", "all_gather_into_tensor")

        def run() -> None:
            gather(recv, send, group=pg)

        expected = lambda: [pattern(j, 0, chunk, modulus, dtype, device) for j in range(n)]  # noqa: E731
        return OpCase(op, total * element, False, run, refill, lambda: wrong_vs(expected()), corrupt)
    if op == "reduce_scatter":
        if "reduce_scatter" in emulated:
            def run() -> None:
                ring_reduce_scatter(recv, send, group, me, pg)
        else:
            scatter = _collective("reduce_scatter_single", "reduce_scatter_tensor")

            def run() -> None:
                scatter(recv, send, group=pg)

        expected = lambda: [reduced_pattern(n, me * chunk, chunk, modulus, dtype, device)]  # noqa: E731
        return OpCase(op, total * element, False, run, refill, lambda: wrong_vs(expected()), corrupt)
    if op == "all_to_all":
        def run() -> None:
            dist.all_to_all_single(recv, send, group=pg)

        expected = lambda: [pattern(j, me * chunk, chunk, modulus, dtype, device) for j in range(n)]  # noqa: E731
        return OpCase(op, total * element, False, run, refill, lambda: wrong_vs(expected()), corrupt)
    if op == "broadcast":
        root = group.ranks[0]
        buffer = send if me == 0 else recv

        def run() -> None:
            dist.broadcast(buffer, src=root, group=pg)

        def wrong_broadcast() -> int:
            got = send if me == 0 else recv
            return int((got != pattern(0, 0, total, modulus, dtype, device)).sum().item())

        def corrupt_broadcast() -> None:
            buffer[0] += 7

        return OpCase(op, total * element, False, run, refill, wrong_broadcast, corrupt_broadcast)
    if op == "send_recv":
        if n < 2:
            return None
        nxt, prv = group.ranks[(me + 1) % n], group.ranks[(me - 1) % n]

        def run() -> None:
            ops = [dist.P2POp(dist.isend, send, nxt, pg), dist.P2POp(dist.irecv, recv, prv, pg)]
            for request in dist.batch_isend_irecv(ops):
                request.wait()

        expected = lambda: [pattern((me - 1) % n, 0, total, modulus, dtype, device)]  # noqa: E731
        return OpCase(op, total * element, False, run, refill, lambda: wrong_vs(expected()), corrupt)
    raise ValueError(f"unknown op {op!r}")


def _clock(device: torch.device) -> BatchClock:
    return CudaEventClock(torch) if device.type == "cuda" else CpuClock()


def time_case(case: OpCase, warmup: int, iters: int, device: torch.device, world_pg: Any) -> float:
    """Warm up, line every rank up with a barrier, then time `iters` calls with one sync; microseconds per call."""
    for _ in range(warmup):
        case.run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier(group=world_pg)
    clock = _clock(device)
    clock.start()
    for _ in range(iters):
        case.run()
    return clock.stop() / iters


def check_case(case: OpCase, inject_fault: bool) -> int:
    """The correctness pass: fresh buffers, one call, count the elements that differ from the expected result."""
    case.refill()
    case.run()
    if inject_fault:
        case.corrupt()
    return case.count_wrong()


def _native_reduce_scatter_works(device: torch.device) -> bool:
    """Whether this backend has reduce_scatter (older gloo builds do not); every rank must agree."""
    n = dist.get_world_size()
    try:
        _collective("reduce_scatter_single", "reduce_scatter_tensor")(
            torch.empty(1, device=device), torch.ones(n, device=device))
        works = 1.0
    except (RuntimeError, NotImplementedError):
        works = 0.0
    flag = torch.tensor([works], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def choose_emulated(spec: CollectiveSpec, device: torch.device) -> tuple[frozenset[str], list[str]]:
    """Ops to run through the send/recv fallback, and what the output must say about how ops ran."""
    forced = {part.strip() for part in os.environ.get(EMULATE_ENV, "").split(",")} & {"reduce_scatter"}
    notes = []
    if "reduce_scatter" in spec.ops:
        if forced:
            notes.append(f"reduce_scatter ran as a ring of send/recv steps ({EMULATE_ENV}), not the backend's own")
        elif not _native_reduce_scatter_works(device):
            forced.add("reduce_scatter")
            notes.append(f"{spec.backend} in this torch has no reduce_scatter: it ran as a ring of send/recv steps, "
                         "the same traffic per rank as NCCL's ring")
    if "all_reduce" in spec.ops:
        notes.append("all_reduce runs in place (torch.distributed has no out-of-place all_reduce); other ops out of place")
    return frozenset(forced), notes


@frozen
class RowStat:
    """What one rank contributes to one row before the group reduces it."""

    time_us: float
    wrong: int


def measure_group(case: OpCase, spec: CollectiveSpec, group: GroupSpec, pg: Any, world_pg: Any,
                  device: torch.device, inject_fault: bool) -> dict[str, Any] | None:
    """Time and check one case; returns the row on the group's first rank, None on the others.

    The time is the average over the group's ranks (nccl-tests' default), wrong the sum.
    """
    local_us = time_case(case, spec.warmup, spec.iters, device, world_pg)
    wrong = check_case(case, inject_fault) if spec.check else 0
    stats = torch.tensor([local_us, float(wrong)], dtype=torch.float64, device=device)
    dist.all_reduce(stats, group=pg)
    if dist.get_rank() != group.ranks[0]:
        return None
    n = len(group.ranks)
    time_us = float(stats[0].item()) / n
    return {
        "op": case.op,
        "bytes": case.size_bytes,
        "dtype": spec.dtype,
        "time_us": time_us,
        "algbw_gbps": algbw_gbps(case.size_bytes, time_us),
        "busbw_gbps": busbw_gbps(case.op, n, case.size_bytes, time_us),
        "wrong": int(stats[1].item()) if spec.check else None,
        "group": group.label,
        "dim": group.dim,
        "ranks": list(group.ranks),
        "nranks": n,
        "in_place": case.in_place,
        "backend": spec.backend,
    }


def create_groups(spec: CollectiveSpec, device: torch.device) -> tuple[dict[str, Any], dict[str, float]]:
    """Create every group of every dimension (all ranks take part, as torch requires) and time it:
    creation plus a first tiny all_reduce, which is when NCCL builds its communicator."""
    handles: dict[str, Any] = {}
    setup_ms: dict[str, float] = {}
    me = dist.get_rank()
    for _dim, groups in spec.dims:
        dist.barrier()
        t0 = time.perf_counter()
        for group in groups:
            handles[group.label] = dist.group.WORLD if group.label == "world" else dist.new_group(list(group.ranks))
        mine = next((g for g in groups if me in g.ranks), None)
        if mine is not None:
            dist.all_reduce(torch.ones(1, device=device), group=handles[mine.label])
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            setup_ms[mine.label] = (time.perf_counter() - t0) * 1e3
    return handles, setup_ms
