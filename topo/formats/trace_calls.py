"""A collective call's op, size and process group, from its NCCL kernel, its gloo op or the op that launched it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from linkscope.topo.common.limits import MAX_GPUS_PER_HOST, MAX_SIZE_BYTES, MAX_WORLD_RANKS
from linkscope.topo.common.numbers import is_integer
from linkscope.topo.formats.trace_events import (
    NCCL_KERNEL,
    CpuOp,
    NcclKernel,
    TraceCollective,
    TraceEvents,
    dtype_bytes,
    op_name,
)


def int_or_none(value: object, upper: int = MAX_WORLD_RANKS) -> int | None:
    """`value` when it is an integer in [0, upper]; None (unknown) for anything else, a value no real
    trace holds (a 40-digit element count, a negative rank) included."""
    return value if type(value) is int and 0 <= value <= upper else None


def kernel_collective(kernel: NcclKernel, collected: TraceEvents, groups: dict[str, tuple[int, ...]],
                       shared: tuple[int, ...] | None) -> TraceCollective:
    args = kernel.args
    metadata = args if "Collective name" in args or "In msg nelems" in args else _launching_op_args(args, collected)
    kernel_op = NCCL_KERNEL.match(kernel.name)
    fallback_op = op_name(kernel_op.group(1)) if kernel_op else "unknown"
    correlation = args.get("correlation")
    launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
    return _collective(metadata, fallback_op, kernel.start_us, kernel.duration_us, True,
                       int_or_none(args.get("device"), MAX_GPUS_PER_HOST), groups, shared,
                       launched_us=launch[2] if launch is not None else None)


def _launching_op_args(kernel_args: dict[str, Any], collected: TraceEvents) -> dict[str, Any]:
    """The metadata of the CPU op that launched a kernel: the innermost comm op around its launch."""
    correlation = kernel_args.get("correlation")
    launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
    if launch is None:
        return {}
    pid, tid, launch_us = launch
    ops = collected.metadata_ops.get((pid, tid), [])
    index = _bisect(ops, launch_us)
    best: dict[str, Any] = {}
    outer_bytes = 0
    for op in reversed(ops[max(0, index - 16):index]):
        if op.end_us < launch_us:
            continue
        if "Collective name" in op.args or "In msg nelems" in op.args:
            return op.args | {"_op": op.name}
        if not best and ("Input Dims" in op.args or op.name.startswith("nccl:")):
            best = op.args | {"_op": op.name}
        elif best:
            outer_bytes = max(outer_bytes, _largest_tensor_bytes(op.args) or 0)
    return best | {"_outer_bytes": outer_bytes} if best else best


def _bisect(ops: Sequence[CpuOp], start_us: float) -> int:
    low, high = 0, len(ops)
    while low < high:
        middle = (low + high) // 2
        if ops[middle].start_us <= start_us:
            low = middle + 1
        else:
            high = middle
    return low


def gloo_collective(op: CpuOp, groups: dict[str, tuple[int, ...]], shared: tuple[int, ...] | None) -> TraceCollective:
    return _collective(op.args | {"_op": op.name}, op_name(op.name), op.start_us, op.end_us - op.start_us, False,
                       None, groups, shared)


def cpu_op_collectives(collected: TraceEvents, groups: dict[str, tuple[int, ...]],
                        shared: tuple[int, ...] | None) -> list[TraceCollective]:
    """Calls known only from their `nccl:*` CPU ops (no NCCL kernel in the trace: the kernels were not
    profiled, or NCCL launched none, as at world size 1): counted, with the metadata of the nearest comm op
    around or inside each (`record_param_comms`), and timed on the CPU (what the call cost the CPU, not
    what it moved)."""
    return [call for _, _, call in _annotated(collected, groups, shared)]


def _annotated(collected: TraceEvents, groups: dict[str, tuple[int, ...]],
               shared: tuple[int, ...] | None) -> list[tuple[tuple[Any, Any], CpuOp, TraceCollective]]:
    """Each outermost `nccl:*` op of each thread as a CPU-timed call, with its thread and op."""
    found = []
    for key, ops in collected.metadata_ops.items():
        outer_end = -math.inf
        for position, op in enumerate(ops):  # sorted by start
            if not op.name.startswith("nccl:") or op.start_us < outer_end:
                continue
            outer_end = op.end_us
            near = [other for other in (*reversed(ops[max(0, position - 8):position]), *ops[position + 1:position + 8])
                    if other.start_us <= op.end_us and other.end_us >= op.start_us
                    and ("Collective name" in other.args or "In msg nelems" in other.args)]
            metadata = (near[0].args if near else op.args | {"_outer_bytes": _enclosing_bytes(ops, position)}) | \
                {"_op": op.name}
            call = _collective(metadata, op_name(op.name), op.start_us, op.end_us - op.start_us, False, None, groups,
                               shared)
            found.append((key, op, replace(call, launch_only=True)))
    return found


def _enclosing_bytes(ops: list[CpuOp], position: int) -> int:
    """The largest tensor of the comm ops around `ops[position]` (`c10d::_allgather_base_` holds an all_gather's
    output, the `nccl:_all_gather_base` inside it only its input)."""
    op = ops[position]
    around = [other for other in ops[max(0, position - 16):position] if other.end_us >= op.end_us]
    return max((_largest_tensor_bytes(other.args) or 0 for other in around), default=0)


def launched_calls(collected: TraceEvents, groups: dict[str, tuple[int, ...]],
                   shared: tuple[int, ...] | None, notes: list[str]) -> list[TraceCollective] | None:
    """The calls of a trace whose collectives are annotated (`nccl:all_to_all` around each launch): one per
    outermost `nccl:*` op, whatever kernels NCCL ran for it (an all_to_all runs as grouped send/recv, its
    kernels named `SendRecv`; a call may launch several kernels, or none the trace caught). Kernels give each
    call its GPU timing: those launched inside its op. A kernel launched outside every annotated call is a call
    of its own, as its launching op says; one whose launch the trace lacks (launched before the trace began) is
    no call. None when the trace annotates no call or no kernel's launch is in it: kernels then count calls."""
    annotated = _annotated(collected, groups, shared)
    if not annotated or not any(isinstance(kernel_correlation(kernel), int) and kernel_correlation(kernel)
                                in collected.launches for kernel in collected.nccl_kernels):
        return None
    by_thread: dict[tuple[Any, Any], list[int]] = {}
    for index, (key, _, _) in enumerate(annotated):
        by_thread.setdefault(key, []).append(index)
    kernels: dict[int, list[NcclKernel]] = {}
    own: list[TraceCollective] = []
    unlaunched = 0
    for kernel in collected.nccl_kernels:
        correlation = kernel_correlation(kernel)
        launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
        if launch is None:
            unlaunched += 1
            continue
        call_index = _call_at(annotated, by_thread.get((launch[0], launch[1]), []), launch[2])
        if call_index is None:
            own.append(kernel_collective(kernel, collected, groups, shared))
        else:
            kernels.setdefault(call_index, []).append(kernel)
    calls = [_timed(call, kernels.get(index, []), collected) for index, (_, _, call) in enumerate(annotated)]
    if unlaunched:
        notes.append(f"{unlaunched} NCCL kernel(s) launched before the trace began (no launch in it): timed in their "
                     "steps, not counted as calls")
    untimed = sum(1 for index in range(len(annotated)) if index not in kernels)
    if untimed:
        notes.append(f"{untimed} call(s) with no NCCL kernel launched inside them: timed on the CPU (their launch)")
    return calls + own


def kernel_correlation(kernel: NcclKernel) -> object:
    return kernel.args.get("correlation")


def _call_at(annotated: list[tuple[tuple[Any, Any], CpuOp, TraceCollective]], indices: list[int],
             moment_us: float) -> int | None:
    """The annotated call of one thread whose op holds `moment_us` (the ops of a thread do not overlap)."""
    low, high = 0, len(indices)
    while low < high:
        middle = (low + high) // 2
        if annotated[indices[middle]][1].start_us <= moment_us:
            low = middle + 1
        else:
            high = middle
    if low == 0:
        return None
    index = indices[low - 1]
    return index if moment_us <= annotated[index][1].end_us else None


def _timed(call: TraceCollective, kernels: list[NcclKernel], collected: TraceEvents) -> TraceCollective:
    """A call timed by the kernels launched inside it: from the first start to the last end, on their device."""
    if not kernels:
        return call
    start = min(kernel.start_us for kernel in kernels)
    end = max(kernel.start_us + kernel.duration_us for kernel in kernels)
    args = kernels[0].args
    launches = [collected.launches[correlation][2] for kernel in kernels
                if isinstance(correlation := kernel_correlation(kernel), int) and correlation in collected.launches]
    op = call.op
    if op == "unknown":
        kernel_op = NCCL_KERNEL.match(kernels[0].name)
        op = op_name(kernel_op.group(1)) if kernel_op else op
    return replace(call, op=op, start_us=start, duration_us=end - start, on_device=True, launch_only=False,
                   device=int_or_none(args.get("device"), MAX_GPUS_PER_HOST),
                   launched_us=min(launches) if launches else None)


def _collective(args: dict[str, Any], fallback_op: str, start_us: float, duration_us: float, on_device: bool,
                device: int | None, groups: dict[str, tuple[int, ...]], shared: tuple[int, ...] | None,
                launched_us: float | None = None) -> TraceCollective:
    op = op_name(str(args["Collective name"])) if isinstance(args.get("Collective name"), str) else "unknown"
    if op == "unknown" and isinstance(args.get("_op"), str):
        op = op_name(args["_op"])
    if op == "unknown":
        op = fallback_op
    ranks = parse_ranks(args.get("Process Group Ranks"))
    group_name = args.get("Process Group Name")
    group_name = str(group_name) if isinstance(group_name, (str, int)) else None
    if ranks is None and group_name is not None:
        ranks = groups.get(group_name)
    if ranks is None and group_name is None and len(groups) == 1:
        group_name, ranks = next(iter(groups.items()))  # the trace knows of one group only: the default one
    elif ranks is None and group_name is None:
        ranks = shared  # several groups, all of the same ranks: which one is unknown, its ranks are not
    group_size = int_or_none(args.get("Group size"))
    if group_size is None and ranks is not None:
        group_size = len(ranks)
    return TraceCollective(op=op, size_bytes=_size_bytes(args, op, group_size), group_size=group_size,
                           group_ranks=ranks, group_name=group_name, start_us=start_us, duration_us=duration_us,
                           on_device=on_device, device=device, launched_us=launched_us)


def parse_ranks(raw: object) -> tuple[int, ...] | None:
    if isinstance(raw, str):
        return _ranks_text(raw)
    if not isinstance(raw, list) or not raw or not all(int_or_none(v) is not None for v in raw):
        return None
    return tuple(raw)


@functools.lru_cache(maxsize=256)
def _ranks_text(raw: str) -> tuple[int, ...] | None:
    """`"[0, 1, 2, 3]"` as kernels and `record_param_comms` write a group (the same few strings on
    every call: cached)."""
    if not re.fullmatch(r"\[[0-9, ]{0,100000}\]", raw):
        return None
    words = raw.strip("[]").replace(",", " ").split()
    if not words or not all(is_integer(word) for word in words):
        return None  # a rank of thousands of digits is no rank: the group is unknown, as for any damaged value
    values = tuple(int(word) for word in words)
    return values if all(v <= MAX_WORLD_RANKS for v in values) else None


def _size_bytes(args: dict[str, Any], op: str, group_size: int | None) -> int | None:
    element = dtype_bytes(args.get("dtype"))
    in_elems = int_or_none(args.get("In msg nelems"), MAX_SIZE_BYTES)
    out_elems = int_or_none(args.get("Out msg nelems"), MAX_SIZE_BYTES)
    if element is not None and (in_elems is not None or out_elems is not None):
        return _bounded_size(max(in_elems or 0, out_elems or 0) * element)
    known = _tensor_sizes(args)
    if not known:
        return None
    largest = max(known)
    if op == "all_gather" and len(known) == 1:
        return _bounded_size(largest * group_size) if group_size else _gathered_output(args, largest)
    return largest


def _tensor_sizes(args: dict[str, Any]) -> list[int]:
    """Bytes of each tensor argument an op records (`Input Dims` with `Input type`) whose size is known."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return []
    sizes = [_tensor_bytes(dim, kind) for dim, kind in zip(dims, types, strict=False)]
    return [size for size in sizes if size is not None]


def _largest_tensor_bytes(args: dict[str, Any]) -> int | None:
    return max(_tensor_sizes(args), default=None)


def _gathered_output(args: dict[str, Any], input_bytes: int) -> int:
    """An all_gather's output when the op that launched it records only its input (`nccl:_all_gather_base`):
    the op around it that records output and input (`c10d::_allgather_base_`) holds the output, a whole
    multiple of the input (one share per rank). Without one, the input is all the trace says."""
    outer = args.get("_outer_bytes")
    if isinstance(outer, int) and input_bytes > 0 and outer > input_bytes and outer % input_bytes == 0:
        return outer
    return input_bytes


def _tensor_bytes(dims: object, kind: object) -> int | None:
    if isinstance(dims, list) and dims and isinstance(dims[0], list):
        dims = dims[0]  # a TensorList argument: its first tensor
    element = dtype_bytes(kind if not (isinstance(kind, str) and kind == "TensorList") else None)
    if not isinstance(dims, list) or not dims or element is None:
        return None
    count = 1
    for dim in dims:
        if int_or_none(dim, MAX_SIZE_BYTES) is None:
            return None
        count = min(count * dim, MAX_SIZE_BYTES + 1)
    return _bounded_size(count * element)


def _bounded_size(size_bytes: int) -> int | None:
    """A size a real message can have (at most MAX_SIZE_BYTES), else None: the trace's numbers are not a size."""
    return size_bytes if size_bytes <= MAX_SIZE_BYTES else None
