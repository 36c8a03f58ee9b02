"""The events of one rank's profiler trace that say anything about collectives and steps, and what they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from linkscope.topo.formats.trace_stream import TraceEvent


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
_LARGEST = 1e300
"""Times at or beyond this many microseconds are no times (an overflowed or garbage value)."""
_GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
_KEPT_CATEGORIES = _GPU_CATEGORIES | _RUNTIME_CATEGORIES | {"cpu_op", "user_annotation"}
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
    args: Any


@dataclass(slots=True)
class TraceEvents:
    metadata_ops: dict[tuple[Any, Any], list[CpuOp]] = field(default_factory=dict)
    launches: dict[int, tuple[Any, Any, float]] = field(default_factory=dict)
    nccl_kernels: list[NcclKernel] = field(default_factory=list)
    gpu_compute: list[tuple[float, float, int | None]] = field(default_factory=list)
    """(start, end, correlation) of every non-NCCL GPU kernel."""
    gpu_copies: list[tuple[float, float, int | None]] = field(default_factory=list)
    """(start, end, correlation) of every GPU memory copy and memset: kept apart from compute, as Holistic Trace
    Analysis keeps them, so communication hidden behind a copy is not counted as overlapped with compute."""
    gloo_ops: list[CpuOp] = field(default_factory=list)
    cpu_compute: list[tuple[float, float]] = field(default_factory=list)
    steps: list[tuple[int, float, float]] = field(default_factory=list)

    def add_all(self, events: Iterable[TraceEvent]) -> None:
        """Keep what `events` say of collectives, steps and GPU work (a chunk's events in one call: this loop is
        most of the time spent reading a trace after the decoding)."""
        for event in events:
            category = event.cat
            if category not in _KEPT_CATEGORIES or event.ph != "X":
                continue
            name, start, duration = event.name, event.ts, event.dur
            if name is None or start is None or duration is None or not (-_LARGEST < start < _LARGEST
                                                                         and 0 <= duration < _LARGEST):
                continue  # a named event whose start and duration are finite (NaN fails the range tests), duration >= 0
            end = start + duration
            if category in _GPU_CATEGORIES or category in _RUNTIME_CATEGORIES:
                args = event.args
                correlation = args.get("correlation") if isinstance(args, dict) else None
                if not isinstance(correlation, int):
                    correlation = None
                if category in _RUNTIME_CATEGORIES:
                    if correlation is not None and _LAUNCH.match(name):
                        self.launches[correlation] = (event.pid, event.tid, start)
                elif category != "kernel":
                    self.gpu_copies.append((start, end, correlation))
                elif NCCL_KERNEL.match(name):
                    self.nccl_kernels.append(NcclKernel(name, start, duration, event.args))
                else:
                    self.gpu_compute.append((start, end, correlation))
                continue
            # cpu_op, user_annotation
            step = _STEP.match(name) if name.startswith("ProfilerStep#") else None
            if step:
                self.steps.append((int(step.group(1)), start, end))
            elif name.startswith("aten::"):
                self.cpu_compute.append((start, end))
            elif name.startswith("gloo:"):
                self.gloo_ops.append(CpuOp(name, start, end, _args(event.args)))
            elif _COMM_OP.match(name):
                key = (event.pid, event.tid)
                self.metadata_ops.setdefault(key, []).append(CpuOp(name, start, end, _args(event.args)))


def _args(args: object) -> dict[str, Any]:
    return args if isinstance(args, dict) else {}
