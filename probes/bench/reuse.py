"""What a communicator costs: all_reduce on one reused process group against a group created (and
destroyed) for every call, as training code that builds groups on the fly does.

Per size: microseconds per call both ways and the difference, which is what re-creating the
group costs (NCCL communicator or gloo context set-up: a store round trip and connections).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

RECREATED_CALLS_MAX = 20
"""Calls timed with a fresh group each (group set-up takes milliseconds: a few calls show it)."""


def run_reuse_experiment(spec_data: dict[str, Any], rank: int, local_rank: int, progress: Callable[..., None],
                         keep: Callable[[str, Any], None] | None = None) -> dict[str, Any] | None:
    """all_reduce per size on a reused group and on a group made per call; rank 0 returns every rank's rows."""
    import torch
    import torch.distributed as dist

    from linkscope.probes.bench.spec import DTYPE_BYTES, CollectiveSpec
    from linkscope.probes.bench.worker import gather_json
    from linkscope.topo.model.codec import from_jsonable

    spec = from_jsonable(CollectiveSpec, spec_data)
    device = torch.device("cuda", local_rank) if spec.backend == "nccl" else torch.device("cpu")
    ranks = list(range(spec.world_size))
    reused = dist.new_group(ranks)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[spec.dtype]
    rows = []
    for size in spec.sizes_bytes:
        tensor = torch.ones(max(1, size // DTYPE_BYTES[spec.dtype]), dtype=dtype, device=device)
        for _ in range(spec.warmup):
            dist.all_reduce(tensor, group=reused)
        def reused_group_call(data: Any = tensor) -> None:
            dist.all_reduce(data, group=reused)

        reuse_us = _per_call_us(reused_group_call, spec.iters, device)
        calls = min(spec.iters, RECREATED_CALLS_MAX)

        def fresh_group_call(data: Any = tensor) -> None:
            group = dist.new_group(ranks)
            dist.all_reduce(data, group=group)
            dist.destroy_process_group(group)

        recreate_us = _per_call_us(fresh_group_call, calls, device)
        row = {"op": "all_reduce", "size_bytes": size, "rank": rank, "reuse_us": reuse_us, "recreate_us": recreate_us,
               "calls_reused": spec.iters, "calls_recreated": calls}
        rows.append(row)
        if keep is not None:
            keep("reuse", row)
        if rank == 0:
            progress("reuse", size)
    gathered = gather_json(rows, device)
    if rank != 0:
        return None
    return {"rows": [row for part in gathered for row in part], "setup_ms": [], "notes": []}


def _per_call_us(call: Callable[[], None], count: int, device: Any) -> float:
    import torch.distributed as dist

    dist.barrier()
    _sync(device)
    start = time.perf_counter()
    for _ in range(count):
        call()
    _sync(device)
    return (time.perf_counter() - start) / count * 1e6


def _sync(device: Any) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def summarise_reuse(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size, the slowest rank's per-call times (a collective ends when its last rank does)."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_size.setdefault(row["size_bytes"], []).append(row)
    summary = []
    for size, members in sorted(by_size.items()):
        reuse_us = max(row["reuse_us"] for row in members)
        recreate_us = max(row["recreate_us"] for row in members)
        summary.append({"op": "all_reduce", "size_bytes": size, "reuse_us": round(reuse_us, 2),
                        "recreate_us": round(recreate_us, 2), "group_setup_us": round(recreate_us - reuse_us, 2),
                        "slowdown": round(recreate_us / reuse_us, 2) if reuse_us > 0 else None})
    return summary
