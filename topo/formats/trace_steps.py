"""Profiler steps: each step's window, compute and communication, and the step each call belongs to; time intervals.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import replace

from linkscope.topo.formats.trace_events import TraceCollective, TraceEvents, TraceStep


def profiler_steps(collected: TraceEvents, collectives: list[TraceCollective]) -> list[TraceStep]:
    # GPU work is timed on the GPU, unless the trace communicates on the CPU (gloo): then its CPU ops are the compute.
    gpu_work = bool(collected.gpu_compute or collected.gpu_copies)
    on_device = bool(collected.nccl_kernels) or (gpu_work and not collected.gloo_ops)
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
        args = kernel.args if isinstance(kernel.args, dict) else {}
        start = kernel.start_us
        index = _step_index(windows, starts, _launched_at(collected, args.get("correlation"), start))
        if index is not None:
            comm[index].append((start, start + kernel.duration_us))
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


def _launched_at(collected: TraceEvents, correlation: object, fallback_us: float) -> float:
    """When the CPU launched the kernel with `correlation` (its own start when the trace holds no launch)."""
    launch = collected.launches.get(correlation) if isinstance(correlation, int) else None
    return launch[2] if launch is not None else fallback_us


def _step_index(windows: Sequence[tuple[int, float, float]], starts: Sequence[float], moment_us: float) -> int | None:
    """The step window [start, end) holding `moment_us`, or None."""
    index = bisect.bisect_right(starts, moment_us) - 1
    return index if index >= 0 and moment_us < windows[index][2] else None


def assign_steps(collectives: list[TraceCollective], steps: list[TraceStep],
                  windows_end: Sequence[float]) -> list[TraceCollective]:
    """Each call's step: the one whose CPU window launched it, else the one its start falls in (or shortly after)."""
    if not steps:
        return collectives
    starts = [step.start_us for step in steps]
    assigned = []
    for collective in collectives:
        moment = collective.launched_us if collective.launched_us is not None else collective.start_us
        if collective.launched_us is not None or not collective.on_device:
            # the CPU window that launched it (or, on gloo, that ran it), as profiler_steps counts it
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
