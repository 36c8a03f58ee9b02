"""Read one rank's PyTorch profiler trace into its collectives and steps.

A collective is found where the trace times it: on the GPU, the NCCL kernel (`ncclKernel_*`,
`ncclDevKernel_*`); on the CPU (gloo), the `gloo:*` op on gloo's worker thread; and where a trace
holds neither, from its `nccl:*` CPU ops (counted, timed on the CPU). Its op, size and
process group come from the kernel's own args (newer torch), else from the CPU op that launched
it — the launch is found through the kernel's `correlation` id, and the innermost
`record_param_comms` / `nccl:*` / `c10d::*` op around that launch on the same thread gives the
metadata (`Collective name`, `In/Out msg nelems`, `dtype`, `Process Group Ranks`, or the older
`Input Dims` and `Input type`). Steps are the `ProfilerStep#N` annotations.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO, TypeGuard

from linkscope.topo.errors import InputError
from linkscope.topo.formats.trace_stream import MAX_TRACE_CHARS, read_trace_events
from linkscope.topo.limits import MAX_GPUS_PER_HOST, MAX_SIZE_BYTES, MAX_WORLD_RANKS


@dataclass(frozen=True, slots=True)
class TraceCollective:
    """One collective call as one rank's trace timed it."""

    op: str
    """linkscope op name (`all_reduce`, `all_gather`, ...; `unknown` when nothing says)."""
    size_bytes: int | None
    """Bytes in nccl-tests' convention (all_gather: the gathered output; others: the buffer)."""
    group_size: int | None
    group_ranks: tuple[int, ...] | None
    group_name: str | None
    start_us: float
    duration_us: float
    on_device: bool
    """True when timed by a GPU kernel, False when timed on the CPU (gloo)."""
    device: int | None = None
    """CUDA device the kernel ran on."""
    step: int | None = None
    launched_us: float | None = None
    """When the CPU launched its kernel (None: timed on the CPU, or the launch is outside the trace)."""
    launch_only: bool = False
    """Known only from its `nccl:*` CPU op: its duration is the CPU's launch of the call, not the transfer."""


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One `ProfilerStep#N` window of one rank and how its time was spent."""

    step: int
    start_us: float
    time_us: float
    compute_us: float
    comm_us: float
    exposed_comm_us: float


@dataclass(frozen=True, slots=True)
class RankTrace:
    """What one rank's trace says: who it is, its collectives and its steps."""

    name: str
    rank: int | None
    world_size: int | None
    host: str | None
    backend: str | None
    nccl_version: str | None
    collectives: tuple[TraceCollective, ...]
    steps: tuple[TraceStep, ...]
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Process group name -> its global ranks, from `distributedInfo.pg_config`."""
    gpu_names: tuple[str, ...] = ()
    """The GPU models the profiler saw (`deviceProperties`), without repeats."""


_OP_WORDS: dict[str, str] = {
    "allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all", "alltoallv": "all_to_all", "broadcast": "broadcast", "reduce": "reduce",
    "sendrecv": "send_recv", "send": "send_recv", "recv": "send_recv", "gather": "gather", "scatter": "scatter",
    "barrier": "barrier",
}
_DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int": 4, "int32": 4, "long": 8, "longint": 8, "int64": 8, "short": 2, "int16": 2, "byte": 1, "char": 1,
    "unsignedchar": 1, "signedchar": 1, "uint8": 1, "int8": 1, "bool": 1, "float8e4m3fn": 1, "float8e5m2": 1,
    "complexfloat": 8, "complexdouble": 16,
}
_NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_LAUNCH = re.compile(r"(?:cuda|cu)Launch|hip(?:Ext)?(?:Module)?Launch|(?:cuda|hip)GraphLaunch")
"""Runtime calls that launch a kernel: CUDA's, and ROCm's (`hipLaunchKernel`, `hipExtModuleLaunchKernel`, which
ROCm traces record under the same `cuda_runtime` category)."""
_STEP = re.compile(r"ProfilerStep#(\d{1,9})\Z")
_KEPT_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
                               "user_annotation"})
"""Event categories the reader looks at; flows, metadata and the rest are skipped at once."""
_COMM_OP = re.compile(r"(?:nccl|gloo):|c10d::|record_param_comms\Z")


def op_name(raw: str) -> str:
    """linkscope's op name for a profiler name (`allreduce`, `nccl:all_reduce`, `c10d::_allgather_base_`,
    `AllGather` of a kernel, `reduce_scatter_tensor_coalesced`); `unknown` when it names none."""
    word = raw.split(":")[-1].lower()
    for noise in ("_into_tensor", "_tensor", "_coalesced", "_base", "_single"):
        word = word.replace(noise, "")
    word = word.replace("_", "")
    return _OP_WORDS.get(word, "unknown")


def dtype_bytes(raw: object) -> int | None:
    """Element size for a profiler dtype (`Float`, `c10::BFloat16`, `long int`), None when unknown."""
    if not isinstance(raw, str):
        return None
    word = raw.split("::")[-1].lower().replace(" ", "").replace("_", "")
    return _DTYPE_BYTES.get(word)


@dataclass(slots=True)
class _Op:
    """A CPU op kept for metadata lookup, or for its time when it is a gloo op or a CPU compute op."""

    name: str
    start_us: float
    end_us: float
    args: dict[str, Any]


@dataclass(slots=True)
class _Collected:
    metadata_ops: dict[tuple[Any, Any], list[_Op]] = field(default_factory=dict)
    launches: dict[int, tuple[Any, Any, float]] = field(default_factory=dict)
    nccl_kernels: list[dict[str, Any]] = field(default_factory=list)
    gpu_compute: list[tuple[float, float, int | None]] = field(default_factory=list)
    """(start, end, correlation) of every non-NCCL GPU kernel, copy and memset."""
    gloo_ops: list[_Op] = field(default_factory=list)
    cpu_compute: list[tuple[float, float]] = field(default_factory=list)
    steps: list[tuple[int, float, float]] = field(default_factory=list)

    def add(self, event: dict[str, Any]) -> None:
        category = event.get("cat")
        if category not in _KEPT_CATEGORIES or event.get("ph") != "X":
            return
        name = event.get("name")
        raw_start, raw_duration = event.get("ts"), event.get("dur")
        if not isinstance(name, str) or not _is_number(raw_start) or not _is_number(raw_duration) or raw_duration < 0:
            return
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        start = float(raw_start)
        end = start + float(raw_duration)
        if category in ("kernel", "gpu_memcpy", "gpu_memset"):
            if category == "kernel" and _NCCL_KERNEL.match(name):
                self.nccl_kernels.append(event)
            else:
                correlation = args.get("correlation")
                self.gpu_compute.append((start, end, correlation if isinstance(correlation, int) else None))
        elif category == "cuda_runtime" or category == "cuda_driver":
            correlation = args.get("correlation")
            if isinstance(correlation, int) and _LAUNCH.match(name):
                self.launches[correlation] = (event.get("pid"), event.get("tid"), start)
        else:  # cpu_op, user_annotation
            step = _STEP.match(name) if name.startswith("ProfilerStep#") else None
            if step:
                self.steps.append((int(step.group(1)), start, end))
            elif name.startswith("gloo:"):
                self.gloo_ops.append(_Op(name, start, end, args))
            elif _COMM_OP.match(name):
                key = (event.get("pid"), event.get("tid"))
                self.metadata_ops.setdefault(key, []).append(_Op(name, start, end, args))
            elif name.startswith("aten::"):
                self.cpu_compute.append((start, end))


def _is_number(value: object) -> TypeGuard[float]:
    return type(value) in (float, int) and value == value and -1e300 < value < 1e300  # type: ignore[operator]


def read_rank_trace(stream: TextIO, name: str, max_chars: int = MAX_TRACE_CHARS) -> RankTrace:
    """Read one rank's trace from `stream` (text; decompress first); InputError for what is not a trace."""
    collected = _Collected()
    metadata = read_trace_events(stream, name, collected.add, max_chars)
    info = metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    groups = _groups(info)
    for ops in collected.metadata_ops.values():
        ops.sort(key=lambda op: op.start_us)
    collected.steps.sort(key=lambda window: window[1])  # step windows by start, once for _steps and _assign_steps
    shared = _shared_ranks(groups)
    if collected.nccl_kernels:
        collectives = [_kernel_collective(kernel, collected, groups, shared) for kernel in collected.nccl_kernels]
    elif collected.gloo_ops:
        collectives = [_gloo_collective(op, groups, shared) for op in collected.gloo_ops]
    else:
        collectives = _cpu_op_collectives(collected, groups, shared)
    collectives.sort(key=lambda c: c.start_us)
    if not collectives and not collected.steps:
        raise InputError(f"{name}: a trace, but with neither ProfilerStep annotations nor collectives to read")
    steps = _steps(collected, collectives)
    collectives = _assign_steps(collectives, steps, [end for _, _, end in collected.steps])
    return RankTrace(
        name=name, rank=_int_or_none(info.get("rank")), world_size=_int_or_none(info.get("world_size")),
        host=_str_or_none(metadata.get("host_name")), backend=_str_or_none(info.get("backend")),
        nccl_version=_str_or_none(info.get("nccl_version")), collectives=tuple(collectives), steps=tuple(steps),
        groups=groups, gpu_names=_gpu_names(metadata.get("deviceProperties")),
    )


def _gpu_names(properties: object) -> tuple[str, ...]:
    names = [device.get("name") for device in properties if isinstance(device, dict)] if isinstance(properties, list) else []
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str) and name))


def _groups(info: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    groups: dict[str, tuple[int, ...]] = {}
    config = info.get("pg_config")
    for group in config if isinstance(config, list) else ():
        ranks = _ranks(group.get("ranks")) if isinstance(group, dict) else None
        if ranks is not None:
            groups[str(group.get("pg_name"))] = ranks
    return groups


def _shared_ranks(groups: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The ranks of every group the trace knows of, when all have the same ranks (a job whose groups all span
    the world); None otherwise: a call that names no group is then on one of several, unknown which."""
    values = iter(groups.values())
    first = next(values, None)
    return first if first is not None and all(ranks == first for ranks in values) else None


def _int_or_none(value: object, upper: int = MAX_WORLD_RANKS) -> int | None:
    """`value` when it is an integer in [0, upper]; None (unknown) for anything else, a value no real
    trace holds (a 40-digit element count, a negative rank) included."""
    return value if type(value) is int and 0 <= value <= upper else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _kernel_collective(kernel: dict[str, Any], collected: _Collected, groups: dict[str, tuple[int, ...]],
                       shared: tuple[int, ...] | None) -> TraceCollective:
    args = kernel.get("args") if isinstance(kernel.get("args"), dict) else {}
    assert isinstance(args, dict)
    metadata = args if "Collective name" in args or "In msg nelems" in args else _launching_op_args(args, collected)
    kernel_op = _NCCL_KERNEL.match(kernel["name"])
    fallback_op = op_name(kernel_op.group(1)) if kernel_op else "unknown"
    collective = _collective(metadata, fallback_op, float(kernel["ts"]), float(kernel["dur"]), True,
                             _int_or_none(args.get("device"), MAX_GPUS_PER_HOST), groups, shared)
    correlation = args.get("correlation")
    launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
    return replace(collective, launched_us=launch[2]) if launch is not None else collective


def _launching_op_args(kernel_args: dict[str, Any], collected: _Collected) -> dict[str, Any]:
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


def _bisect(ops: Sequence[_Op], start_us: float) -> int:
    low, high = 0, len(ops)
    while low < high:
        middle = (low + high) // 2
        if ops[middle].start_us <= start_us:
            low = middle + 1
        else:
            high = middle
    return low


def _gloo_collective(op: _Op, groups: dict[str, tuple[int, ...]], shared: tuple[int, ...] | None) -> TraceCollective:
    return _collective(op.args | {"_op": op.name}, op_name(op.name), op.start_us, op.end_us - op.start_us, False,
                       None, groups, shared)


def _cpu_op_collectives(collected: _Collected, groups: dict[str, tuple[int, ...]],
                        shared: tuple[int, ...] | None) -> list[TraceCollective]:
    """Calls known only from their `nccl:*` CPU ops (no NCCL kernel in the trace: the kernels were not
    profiled, or NCCL launched none, as at world size 1): counted, with the metadata of the nearest comm op
    around or inside each (`record_param_comms`), and timed on the CPU (what the call cost the CPU, not
    what it moved)."""
    found = []
    for ops in collected.metadata_ops.values():
        outer_end = -math.inf
        for position, op in enumerate(ops):  # sorted by start
            if not op.name.startswith("nccl:") or op.start_us < outer_end:
                continue
            outer_end = op.end_us
            near = [other for other in (*reversed(ops[max(0, position - 8):position]), *ops[position + 1:position + 8])
                    if other.start_us <= op.end_us and other.end_us >= op.start_us
                    and ("Collective name" in other.args or "In msg nelems" in other.args)]
            metadata = (near[0].args if near else op.args) | {"_op": op.name}
            call = _collective(metadata, op_name(op.name), op.start_us, op.end_us - op.start_us, False, None, groups,
                               shared)
            found.append(replace(call, launch_only=True))
    return found


def _collective(args: dict[str, Any], fallback_op: str, start_us: float, duration_us: float, on_device: bool,
                device: int | None, groups: dict[str, tuple[int, ...]], shared: tuple[int, ...] | None) -> TraceCollective:
    op = op_name(str(args["Collective name"])) if isinstance(args.get("Collective name"), str) else "unknown"
    if op == "unknown" and isinstance(args.get("_op"), str):
        op = op_name(args["_op"])
    if op == "unknown":
        op = fallback_op
    ranks = _ranks(args.get("Process Group Ranks"))
    group_name = args.get("Process Group Name")
    group_name = str(group_name) if isinstance(group_name, (str, int)) else None
    if ranks is None and group_name is not None:
        ranks = groups.get(group_name)
    if ranks is None and group_name is None and len(groups) == 1:
        group_name, ranks = next(iter(groups.items()))  # the trace knows of one group only: the default one
    elif ranks is None and group_name is None:
        ranks = shared  # several groups, all of the same ranks: which one is unknown, its ranks are not
    group_size = _int_or_none(args.get("Group size"))
    if group_size is None and ranks is not None:
        group_size = len(ranks)
    return TraceCollective(op=op, size_bytes=_size_bytes(args, op, group_size), group_size=group_size,
                           group_ranks=ranks, group_name=group_name, start_us=start_us, duration_us=duration_us,
                           on_device=on_device, device=device)


def _ranks(raw: object) -> tuple[int, ...] | None:
    if isinstance(raw, str):
        return _ranks_text(raw)
    if not isinstance(raw, list) or not raw or not all(_int_or_none(v) is not None for v in raw):
        return None
    return tuple(raw)


@functools.lru_cache(maxsize=256)
def _ranks_text(raw: str) -> tuple[int, ...] | None:
    """`"[0, 1, 2, 3]"` as kernels and `record_param_comms` write a group (the same few strings on
    every call: cached)."""
    if not re.fullmatch(r"\[[0-9, ]{0,100000}\]", raw):
        return None
    values = [int(word) for word in raw.strip("[]").replace(",", " ").split()]
    return tuple(values) if values and all(v <= MAX_WORLD_RANKS for v in values) else None


def _size_bytes(args: dict[str, Any], op: str, group_size: int | None) -> int | None:
    element = dtype_bytes(args.get("dtype"))
    in_elems = _int_or_none(args.get("In msg nelems"), MAX_SIZE_BYTES)
    out_elems = _int_or_none(args.get("Out msg nelems"), MAX_SIZE_BYTES)
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
        if _int_or_none(dim, MAX_SIZE_BYTES) is None:
            return None
        count = min(count * dim, MAX_SIZE_BYTES + 1)
    return _bounded_size(count * element)


def _bounded_size(size_bytes: int) -> int | None:
    """A size a real message can have (at most MAX_SIZE_BYTES), else None: the trace's numbers are not a size."""
    return size_bytes if size_bytes <= MAX_SIZE_BYTES else None


def _steps(collected: _Collected, collectives: list[TraceCollective]) -> list[TraceStep]:
    # GPU work is timed on the GPU, unless the trace communicates on the CPU (gloo): then its CPU ops are the compute.
    on_device = bool(collected.nccl_kernels) or (bool(collected.gpu_compute) and not collected.gloo_ops)
    windows = collected.steps  # sorted by start
    if not on_device:
        comm_union = union([(c.start_us, c.start_us + c.duration_us) for c in collectives])
        compute_union = union(collected.cpu_compute)
        return [_step(number, start, end, clip(compute_union, start, end), clip(comm_union, start, end))
                for number, start, end in windows]
    # The GPU runs behind the CPU (by up to the launch queue's depth): a kernel belongs to the step that
    # launched it, found through its correlation id; a kernel whose launch the trace lacks, to the step
    # its own start falls in.
    starts = [start for _, start, _ in windows]
    compute: list[list[tuple[float, float]]] = [[] for _ in windows]
    comm: list[list[tuple[float, float]]] = [[] for _ in windows]
    for start, end, correlation in collected.gpu_compute:
        index = _step_index(windows, starts, _launched_at(collected, correlation, start))
        if index is not None:
            compute[index].append((start, end))
    for kernel in collected.nccl_kernels:
        args = kernel.get("args") if isinstance(kernel.get("args"), dict) else {}
        start = float(kernel["ts"])
        index = _step_index(windows, starts, _launched_at(collected, args.get("correlation"), start))  # type: ignore[union-attr]
        if index is not None:
            comm[index].append((start, start + float(kernel["dur"])))
    return [_step(number, start, end, union(compute[index]), union(comm[index]))
            for index, (number, start, end) in enumerate(windows)]


def _step(number: int, start: float, end: float, compute: list[tuple[float, float]],
          comm: list[tuple[float, float]]) -> TraceStep:
    """A step's accounting from its (merged) compute and communication intervals. Its time is the CPU window's,
    or, when the GPU took longer over the work the step launched (first kernel start to last kernel end), that:
    a step cannot take less time than its own kernels, so compute and communication always fit in it."""
    spans = [*compute[:1], *comm[:1], *compute[-1:], *comm[-1:]]
    gpu_time_us = max(b for _, b in spans) - min(a for a, _ in spans) if spans else 0.0
    return TraceStep(step=number, start_us=start, time_us=max(end - start, gpu_time_us), compute_us=total(compute),
                     comm_us=total(comm), exposed_comm_us=total(subtract(comm, compute)))


def _launched_at(collected: _Collected, correlation: object, fallback_us: float) -> float:
    """When the CPU launched the kernel with `correlation` (its own start when the trace holds no launch)."""
    launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
    return launch[2] if launch is not None else fallback_us


def _step_index(windows: Sequence[tuple[int, float, float]], starts: Sequence[float], moment_us: float) -> int | None:
    """The step window [start, end) holding `moment_us`, or None."""
    index = bisect.bisect_right(starts, moment_us) - 1
    return index if index >= 0 and moment_us < windows[index][2] else None


def _assign_steps(collectives: list[TraceCollective], steps: list[TraceStep],
                  windows_end: Sequence[float]) -> list[TraceCollective]:
    """Each call's step: the one whose CPU window launched it, else the one its start falls in (or shortly after)."""
    if not steps:
        return collectives
    starts = [step.start_us for step in steps]
    assigned = []
    for collective in collectives:
        moment = collective.launched_us if collective.launched_us is not None else collective.start_us
        if collective.launched_us is not None or not collective.on_device:
            # the CPU window that launched it (or, on gloo, that ran it), as _steps counts it
            index = bisect.bisect_right(starts, moment) - 1
            inside = index >= 0 and moment < windows_end[index]
        else:  # a GPU kernel whose launch the trace lacks: it may run a little after its step's CPU window
            index = bisect.bisect_right(starts, collective.start_us) - 1
            inside = index >= 0 and collective.start_us < steps[index].start_us + steps[index].time_us * 2
        assigned.append(replace(collective, step=steps[index].step if inside else None))
    return assigned


def union(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, non-overlapping intervals covering the same time as `intervals`."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def clip(merged: Sequence[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of sorted, non-overlapping intervals inside [start, end)."""
    first = bisect.bisect_right(merged, (start, math.inf)) - 1
    clipped = []
    for a, b in merged[max(first, 0):]:
        if a >= end:
            break
        if b > start:
            clipped.append((max(a, start), min(b, end)))
    return clipped


def subtract(merged: Sequence[tuple[float, float]], other: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Time in `merged` not covered by `other` (both sorted and non-overlapping)."""
    result: list[tuple[float, float]] = []
    index = 0
    for start, end in merged:
        cursor = start
        while index < len(other) and other[index][1] <= cursor:
            index += 1
        scan = index
        while scan < len(other) and other[scan][0] < end:
            if other[scan][0] > cursor:
                result.append((cursor, other[scan][0]))
            cursor = max(cursor, other[scan][1])
            scan += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def total(merged: Sequence[tuple[float, float]]) -> float:
    """Summed length of non-overlapping intervals."""
    return sum(end - start for start, end in merged)
