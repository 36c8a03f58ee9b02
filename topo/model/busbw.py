"""Collective bandwidth as nccl-tests defines it: algbw (bytes over time) and busbw (algbw times the
op's factor, what each link carries). Used by the readers, the benchmarks, the cost model and the traces alike."""

from __future__ import annotations

from typing import Literal, get_args

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"]
"""A collective, as nccl-tests names it."""
BUS_FACTOR_OPS: tuple[Op, ...] = get_args(Op)
"""Ops whose busbw factor nccl-tests defines (and linkscope's own benchmarks use)."""
PRICED_OPS: tuple[Op, ...] = tuple(op for op in BUS_FACTOR_OPS if op != "reduce")
"""Ops the cost model prices and `linkscope bench` runs (NCCL's reduce is priced as a broadcast, never run)."""


def bus_factor(op: str, nranks: int) -> float:
    """nccl-tests' busbw/algbw factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
    (n-1)/n; broadcast, reduce, send_recv 1. It turns algbw into what each link carries.
    `op` may name two ops of one factor (`all_gather|all_to_all`, as an nccl-tests table can leave it)."""
    if nranks < 1:
        raise ValueError(f"nranks must be at least 1, got {nranks}")
    first = op.split("|", 1)[0]
    if first == "all_reduce":
        return 2 * (nranks - 1) / nranks
    if first in ("all_gather", "reduce_scatter", "all_to_all"):
        return (nranks - 1) / nranks
    if first in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(BUS_FACTOR_OPS)})")


def algbw_gbps(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 B/s): `size_bytes` moved in `time_us` microseconds."""
    if time_us <= 0:
        return 0.0
    return size_bytes / (time_us * 1e3)


def busbw_gbps(op: str, nranks: int, size_bytes: int, time_us: float) -> float:
    """Bus bandwidth in GB/s: algbw times the op's factor."""
    return algbw_gbps(size_bytes, time_us) * bus_factor(op, nranks)
