"""Read one rank's PyTorch profiler trace into its collectives and steps.

A collective call is counted from the op that launched it and timed where the trace times it: each
outermost `nccl:*` op of a CPU thread is one call (an all_to_all NCCL runs as grouped send/recv is one
call, however many `SendRecv` kernels it launched), timed by the NCCL kernels launched inside it
(`ncclKernel_*`, `ncclDevKernel_*`); a trace that annotates no call counts its NCCL kernels; on the CPU
(gloo), the `gloo:*` op on gloo's worker thread; and where a trace holds no kernel, its `nccl:*` CPU
ops (counted, timed on the CPU). Its op, size and
process group come from the kernel's own args (newer torch), else from the CPU op that launched
it — the launch is found through the kernel's `correlation` id, and the innermost
`record_param_comms` / `nccl:*` / `c10d::*` op around that launch on the same thread gives the
metadata (`Collective name`, `In/Out msg nelems`, `dtype`, `Process Group Ranks`, or the older
`Input Dims` and `Input type`). Steps are the `ProfilerStep#N` annotations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_TRACE_CHARS
from linkscope.topo.formats.trace_calls import (
    cpu_op_collectives,
    gloo_collective,
    int_or_none,
    kernel_collective,
    launched_calls,
    parse_ranks,
)
from linkscope.topo.formats.trace_events import RankTrace, TraceEvents
from linkscope.topo.formats.trace_steps import assign_steps, profiler_steps
from linkscope.topo.formats.trace_stream import read_trace_events, str_or_none


def read_rank_trace(stream: TextIO, name: str, max_chars: int = MAX_TRACE_CHARS) -> RankTrace:
    """Read one rank's trace from `stream` (text; decompress first); InputError for what is not a trace.

    The cyclic garbage collector rests until the rank is read and joined: the events kept (hundreds of thousands of
    intervals and launches) and what joining them makes hold no reference cycles, and it would scan them again and
    again."""
    with collector_paused():
        return _read_rank_trace(stream, name, max_chars)


def _read_rank_trace(stream: TextIO, name: str, max_chars: int) -> RankTrace:
    collected = TraceEvents()
    metadata = read_trace_events(stream, name, collected.add_all, max_chars)
    info = metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    groups = _groups(info)
    for ops in collected.metadata_ops.values():
        ops.sort(key=lambda op: op.start_us)
    collected.steps.sort(key=lambda window: window[1])  # step windows by start, once for profiler_steps and assign_steps
    _check_rank(info, name)
    _check_steps(collected.steps, name)
    shared = _shared_ranks(groups)
    notes: list[str] = []
    launched = launched_calls(collected, groups, shared, notes) if collected.nccl_kernels else None
    if launched is not None:
        collectives = launched
    elif collected.nccl_kernels:
        collectives = [kernel_collective(kernel, collected, groups, shared) for kernel in collected.nccl_kernels]
    elif collected.gloo_ops:
        collectives = [gloo_collective(op, groups, shared) for op in collected.gloo_ops]
    else:
        collectives = cpu_op_collectives(collected, groups, shared)
    collectives.sort(key=lambda c: c.start_us)
    if not collectives and not collected.steps:
        raise InputError(f"{name}: a trace, but with neither ProfilerStep annotations nor collectives to read")
    steps = profiler_steps(collected, collectives)
    collectives = assign_steps(collectives, steps, [end for _, _, end in collected.steps])
    return RankTrace(
        name=name, rank=int_or_none(info.get("rank")), world_size=int_or_none(info.get("world_size")),
        host=str_or_none(metadata.get("host_name")), backend=str_or_none(info.get("backend")),
        nccl_version=str_or_none(info.get("nccl_version")), collectives=tuple(collectives), steps=tuple(steps),
        groups=groups, gpu_names=_gpu_names(metadata.get("deviceProperties")), notes=tuple(notes),
    )


def _check_rank(info: dict[str, Any], name: str) -> None:
    """Refuse a `distributedInfo` whose rank and world size cannot be one job's: world_size 0, or a rank not below it."""
    world_size, rank = int_or_none(info.get("world_size")), int_or_none(info.get("rank"))
    if world_size == 0:
        raise InputError(f"{name}: distributedInfo.world_size is 0 (a job has at least one rank)")
    if rank is not None and world_size is not None and rank >= world_size:
        raise InputError(f"{name}: distributedInfo.rank {rank} is not below distributedInfo.world_size {world_size} "
                         "(ranks count from 0)")


def _check_steps(windows: Sequence[tuple[int, float, float]], name: str) -> None:
    """Refuse two `ProfilerStep#N` windows of one number in one rank's file (two profiler sessions saved as one
    trace, or files concatenated): joined, they would read as one step twice as long or over twice the ranks."""
    first_us: dict[int, float] = {}
    for number, start_us, _ in windows:
        if number in first_us:
            raise InputError(f"{name}: ProfilerStep#{number} appears twice (at ts {first_us[number]:.0f} and "
                             f"{start_us:.0f} us): one profiler session per file")
        first_us[number] = start_us


def _gpu_names(properties: object) -> tuple[str, ...]:
    names = [device.get("name") for device in properties if isinstance(device, dict)] if isinstance(properties, list) else []
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str) and name))


def _groups(info: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    groups: dict[str, tuple[int, ...]] = {}
    config = info.get("pg_config")
    for group in config if isinstance(config, list) else ():
        ranks = parse_ranks(group.get("ranks")) if isinstance(group, dict) else None
        if ranks is not None:
            groups[str(group.get("pg_name"))] = ranks
    return groups


def _shared_ranks(groups: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The ranks of every group the trace knows of, when all have the same ranks (a job whose groups all span
    the world); None otherwise: a call that names no group is then on one of several, unknown which."""
    values = iter(groups.values())
    first = next(values, None)
    return first if first is not None and all(ranks == first for ranks in values) else None
