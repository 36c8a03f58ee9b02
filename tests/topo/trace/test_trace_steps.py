"""The step a moment falls in: the step windows as one sorted list of bounds, searched in C, say what the rule says
(the last window that began at or before the moment, when the moment is before that window's end)."""

from __future__ import annotations

import bisect
import gc
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import linkscope.topo.formats.trace as trace_module
import linkscope.topo.formats.trace_events as trace_events
from linkscope.topo.formats.trace_events import RankTrace, TraceCollective, TraceEvents, TraceStep
from linkscope.topo.formats.trace_steps import profiler_steps, subtract, union, window_bounds

TIMES = st.integers(min_value=0, max_value=40).map(float)


def window_by_rule(windows: list[tuple[int, float, float]], moment_us: float) -> int | None:
    starts = [start for _, start, _ in windows]
    index = bisect.bisect_right(starts, moment_us) - 1
    return index if index >= 0 and moment_us < windows[index][2] else None


@given(spans=st.lists(st.tuples(TIMES, st.integers(min_value=0, max_value=15).map(float)), max_size=8),
       moments=st.lists(TIMES, min_size=1, max_size=20))
def test_the_bounds_place_a_moment_as_the_rule_does(spans: list[tuple[float, float]], moments: list[float]) -> None:
    """Windows that overlap, share a start, or have no length included."""
    windows = sorted(((number, start, start + length) for number, (start, length) in enumerate(spans)),
                     key=lambda window: window[1])
    bounds = window_bounds(windows)
    assert bounds == sorted(bounds)
    for moment in moments:
        slot = bisect.bisect_right(bounds, moment)
        assert (slot // 2 if slot % 2 else None) == window_by_rule(windows, moment)


def test_union_merges_overlapping_and_touching_intervals() -> None:
    assert union([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0), (5.5, 5.7)]) == [(0.0, 4.0), (5.0, 6.0)]
    assert union([]) == []


@given(comm=st.lists(st.tuples(TIMES, TIMES), max_size=6), compute=st.lists(st.tuples(TIMES, TIMES), max_size=8))
def test_subtract_leaves_the_time_no_other_interval_covers(comm: list[tuple[float, float]],
                                                            compute: list[tuple[float, float]]) -> None:
    merged, other = union([(a, a + b) for a, b in comm]), union([(a, a + b) for a, b in compute])
    left = subtract(merged, other)
    for moment in (x / 2 for x in range(0, 170)):
        inside = any(a <= moment < b for a, b in merged) and not any(a <= moment < b for a, b in other)
        assert inside == any(a <= moment < b for a, b in left), moment


def test_the_collector_rests_while_a_rank_is_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps are worked out from the events kept with the cyclic collector paused (they make no cycles), and it
    runs again after."""
    seen: list[bool] = []

    def steps(collected: TraceEvents, collectives: list[TraceCollective]) -> list[TraceStep]:
        seen.append(gc.isenabled())
        return profiler_steps(collected, collectives)

    monkeypatch.setattr(trace_module, "profiler_steps", steps)
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1000, "pid": 1, "tid": 1}
    assert gc.isenabled()
    trace_module.read_rank_trace(io.StringIO(json.dumps({"traceEvents": [step]})), "t.json")
    assert seen == [False] and gc.isenabled()


def _rank(events: list[dict[str, object]]) -> RankTrace:
    return trace_module.read_rank_trace(io.StringIO(json.dumps({"traceEvents": events})), "t.json")


def test_a_name_is_read_by_the_category_of_each_event() -> None:
    """What the reader does with an event is worked out once per name, and again where the same name comes in
    another category: a step annotation on the GPU's row is no step, a CPU op named like a kernel is no kernel."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1000, "pid": 1, "tid": 1}
    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 50, "pid": 0, "tid": 7}
    events = [step, step | {"cat": "gpu_user_annotation", "ts": 5}, kernel, kernel | {"cat": "cpu_op", "ts": 100},
              kernel | {"ts": 200}]
    trace = _rank(events)
    assert [(s.step, s.compute_us) for s in trace.steps] == [(1, 100.0)]


def test_past_the_names_remembered_every_event_is_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[dict[str, object]] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0,
                                        "dur": 10_000, "pid": 1, "tid": 1}]
    events += [{"ph": "X", "cat": "kernel", "name": f"gemm_{index % 7}", "ts": index * 10, "dur": 5, "pid": 0, "tid": 7}
               for index in range(100)]
    whole = _rank(events)
    monkeypatch.setattr(trace_events, "MAX_REMEMBERED_EVENT_NAMES", 2)
    assert _rank(events) == whole and whole.steps[0].compute_us == 500
