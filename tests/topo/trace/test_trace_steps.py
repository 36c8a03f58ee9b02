"""The step a moment falls in: the step windows as one sorted list of bounds, searched in C, say what the rule says
(the last window that began at or before the moment, when the moment is before that window's end)."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st

from linkscope.topo.formats.trace_steps import union, window_bounds

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
