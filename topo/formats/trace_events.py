"""The events of one rank's profiler trace that say anything about collectives and steps, and what they are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from linkscope.topo.common.limits import MAX_REMEMBERED_EVENT_NAMES
from linkscope.topo.formats.trace_stream import TraceEvent, args_dict


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
    notes: tuple[str, ...] = ()
    """What the reader could not attribute (kernels launched before the trace began, calls no kernel timed)."""


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
NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_LAUNCH = re.compile(r"(?:cuda|cu)Launch|hip(?:Ext)?(?:Module)?Launch|(?:cuda|hip)GraphLaunch")
"""Runtime calls that launch a kernel: CUDA's, and ROCm's (`hipLaunchKernel`, `hipExtModuleLaunchKernel`, which
ROCm traces record under the same `cuda_runtime` category)."""
_STEP = re.compile(r"ProfilerStep#(\d{1,9})\Z")
_KERNEL, _COPY, _RUNTIME, _CPU = range(4)
_KIND_OF_CATEGORY = {"kernel": _KERNEL, "gpu_memcpy": _COPY, "gpu_memset": _COPY, "cuda_runtime": _RUNTIME,
                     "cuda_driver": _RUNTIME, "cpu_op": _CPU, "user_annotation": _CPU}
"""Event categories the reader looks at, and what each is (the GPU's kernels, its memory copies and memsets, the
runtime's calls, the CPU's ops); flows, metadata and the rest are skipped."""
_SKIP, _GPU_COMPUTE, _LAUNCH_CALL, _CPU_COMPUTE, _GPU_COPY, _NCCL_KERNEL, _COMM_METADATA, _STEP_WINDOW, _GLOO_CALL = range(9)
"""What the reader does with an event (:func:`_action`): the common ones first, then those of calls and steps."""
_COMM_OP = re.compile(r"(?:nccl|gloo):|c10d::|record_param_comms\Z")


@functools.lru_cache(maxsize=256)
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
    return _dtype_text_bytes(raw) if isinstance(raw, str) else None


@functools.lru_cache(maxsize=256)
def _dtype_text_bytes(raw: str) -> int | None:
    word = raw.split("::")[-1].lower().replace(" ", "").replace("_", "")
    return _DTYPE_BYTES.get(word)


@dataclass(slots=True)
class CpuOp:
    """A CPU op kept for metadata lookup, or for its time when it is a gloo op or a CPU compute op."""

    name: str
    start_us: float
    end_us: float
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NcclKernel:
    """An NCCL kernel of the trace: what its launch and metadata are found by (`args`), and when it ran."""

    name: str
    start_us: float
    duration_us: float
    args: dict[str, Any]


@dataclass(slots=True)
class TraceEvents:
    metadata_ops: dict[tuple[Any, Any], list[CpuOp]] = field(default_factory=dict)
    launches: dict[int, tuple[Any, Any, float]] = field(default_factory=dict)
    nccl_kernels: list[NcclKernel] = field(default_factory=list)
    gpu_compute: list[tuple[float, float, int | None]] = field(default_factory=list)
    """(start, end, correlation) of every non-NCCL GPU kernel."""
    gpu_copies: int = 0
    """How many GPU memory copies and memsets: GPU work, but not compute (as Holistic Trace Analysis keeps them apart,
    so communication hidden behind a copy is not counted as overlapped with compute)."""
    gloo_ops: list[CpuOp] = field(default_factory=list)
    cpu_compute: list[tuple[float, float]] = field(default_factory=list)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    actions: dict[str, tuple[str | None, int]] = field(default_factory=dict, repr=False, compare=False)
    """Event name -> the category it was last seen in and what is done with such an event (:func:`_action`): a trace
    repeats a few hundred names, so each is worked out once (up to MAX_REMEMBERED_EVENT_NAMES names)."""

    def add_all(self, events: Iterable[TraceEvent]) -> None:
        """Keep what `events` say of collectives, steps and GPU work (a chunk's events in one call: this loop is
        most of the time spent reading a trace after the decoding)."""
        actions, gpu_compute, launches, cpu_compute = self.actions, self.gpu_compute, self.launches, self.cpu_compute
        for event in events:
            name, category = event.name, event.cat
            known = actions.get(name)  # type: ignore[arg-type]  # no name: not found
            if known is not None and known[0] == category:
                action = known[1]
            elif name is None:
                continue
            else:
                action = _action(category, name)
                if len(actions) < MAX_REMEMBERED_EVENT_NAMES:
                    actions[name] = (category, action)
            if action == _SKIP or event.ph != "X":
                continue
            start, duration = event.ts, event.dur
            if start is None or duration is None:
                continue  # an event with a start and a duration, in range (checked while decoding)
            if action == _GPU_COMPUTE:
                args = event.args
                correlation = args.correlation if args is not None else None
                gpu_compute.append((start, start + duration, correlation if isinstance(correlation, int) else None))
            elif action == _LAUNCH_CALL:
                args = event.args
                correlation = args.correlation if args is not None else None
                if isinstance(correlation, int):
                    launches[correlation] = (event.pid, event.tid, start)
            elif action == _CPU_COMPUTE:
                cpu_compute.append((start, start + duration))
            elif action == _GPU_COPY:
                self.gpu_copies += 1
            else:
                assert name is not None  # only a name's action is remembered
                self._keep_rare(action, name, start, duration, event)

    def _keep_rare(self, action: int, name: str, start: float, duration: float, event: TraceEvent) -> None:
        """Keep an event of the few kinds that are not every layer's: an NCCL kernel, a comm op, a step, a gloo op."""
        if action == _NCCL_KERNEL:
            self.nccl_kernels.append(NcclKernel(name, start, duration, args_dict(event.args)))
        elif action == _COMM_METADATA:
            self.metadata_ops.setdefault((event.pid, event.tid), []).append(
                CpuOp(name, start, start + duration, args_dict(event.args)))
        elif action == _STEP_WINDOW:
            self.steps.append((int(_STEP.match(name).group(1)), start, start + duration))  # type: ignore[union-attr]
        else:
            self.gloo_ops.append(CpuOp(name, start, start + duration, args_dict(event.args)))


def _action(category: str | None, name: str) -> int:
    """What the reader does with an event of this category and name."""
    kind = _KIND_OF_CATEGORY.get(category)  # type: ignore[arg-type]  # no category: not found
    if kind == _CPU:
        if name.startswith("ProfilerStep#") and _STEP.match(name):
            return _STEP_WINDOW
        if name.startswith("aten::"):
            return _CPU_COMPUTE
        if name.startswith("gloo:"):
            return _GLOO_CALL
        return _COMM_METADATA if _COMM_OP.match(name) else _SKIP
    if kind == _RUNTIME:
        return _LAUNCH_CALL if _LAUNCH.match(name) else _SKIP
    if kind == _KERNEL:
        return _NCCL_KERNEL if NCCL_KERNEL.match(name) else _GPU_COMPUTE
    return _GPU_COPY if kind == _COPY else _SKIP
