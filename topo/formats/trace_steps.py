"""Profiler steps: each step's window, compute and communication, and the step each call belongs to; time intervals.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import repeat
from operator import itemgetter

from linkscope.topo.formats.trace_events import TraceCollective, TraceEvents, TraceStep

_START, _END, _CORRELATION = itemgetter(0), itemgetter(1), itemgetter(2)
"""The fields of an interval (start, end) or of a kernel (start, end, correlation)."""


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
    # its own start falls in. Compute kernels are many (one per layer and pass): placed in C (maps and bisect).
    bounds = window_bounds(windows)
    launched_us = {correlation: launch[2] for correlation, launch in collected.launches.items()}
    kernels = collected.gpu_compute
    moments = map(launched_us.get, map(_CORRELATION, kernels), map(_START, kernels))
    slots = map(functools.partial(bisect.bisect_right, bounds), moments)
    compute = _window_unions(zip(slots, map(_START, kernels), map(_END, kernels), strict=True), len(windows))
    comm: list[list[tuple[float, float]]] = [[] for _ in windows]
    for kernel in collected.nccl_kernels:
        start = kernel.start_us
        correlation = kernel.args.get("correlation")
        slot = bisect.bisect_right(bounds, launched_us.get(correlation, start) if isinstance(correlation, int) else start)
        if slot & 1:
            comm[slot >> 1].append((start, start + kernel.duration_us))
    return [_step(number, start, end, compute[index], union(comm[index]))
            for index, (number, start, end) in enumerate(windows)]


def window_bounds(windows: Sequence[tuple[int, float, float]]) -> list[float]:
    """The step windows (sorted by start) as one sorted list of bounds, [start 0, end 0, start 1, end 1, ...], each
    window ending where the next begins at the latest: `bisect_right(bounds, moment)` is odd inside a window (the
    window's index times two, plus one), even outside every window. Where windows overlap, a moment is in the last
    window that began at or before it."""
    bounds: list[float] = []
    for index, (_, start, end) in enumerate(windows):
        bounds += (start, min(end, windows[index + 1][1]) if index + 1 < len(windows) else end)
    return bounds


def _step(number: int, start: float, end: float, compute: list[tuple[float, float]],
          comm: list[tuple[float, float]]) -> TraceStep:
    """A step's accounting from its (merged) compute and communication intervals. Its time is the CPU window's,
    or, when the GPU took longer over the work the step launched (first kernel start to last kernel end), that:
    a step cannot take less time than its own kernels, so compute and communication always fit in it."""
    spans = [*compute[:1], *comm[:1], *compute[-1:], *comm[-1:]]
    gpu_time_us = max(b for _, b in spans) - min(a for a, _ in spans) if spans else 0.0
    return TraceStep(step=number, start_us=start, time_us=max(end - start, gpu_time_us), compute_us=total(compute),
                     comm_us=total(comm), exposed_comm_us=total(subtract(comm, compute)))


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
    return _window_unions(zip(repeat(1), map(_START, intervals), map(_END, intervals)), 1)[0]


def _window_unions(placed: Iterable[tuple[int, float, float]], count: int) -> list[list[tuple[float, float]]]:
    """The union of the intervals in each of `count` windows, from (slot, start, end): the interval is in window
    `slot // 2` when the slot is odd (as :func:`window_bounds` numbers them), in none when it is even."""
    unions: list[list[tuple[float, float]]] = [[] for _ in range(count)]
    merged: list[tuple[float, float]] = []
    current = -1
    for slot, start, end in sorted(placed):
        if not slot & 1:
            continue
        if slot != current:
            current, merged = slot, unions[slot >> 1]
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return unions


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
    """Time in `merged` not covered by `other` (both sorted and non-overlapping: their ends are sorted too, so the
    first of `other` to end after each start is found by bisection)."""
    result: list[tuple[float, float]] = []
    ends = list(map(_END, other))
    index = 0
    for start, end in merged:
        cursor = start
        index = bisect.bisect_right(ends, cursor, index)
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
