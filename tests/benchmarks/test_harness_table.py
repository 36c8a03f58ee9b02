"""The harness-overhead table says which rows its A/A control cannot resolve, rather than judging them."""

from __future__ import annotations

import sys

import pytest

from support.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_harness_overhead import control_resolves, verdict


@pytest.mark.parametrize(("interval", "control", "expected"), [
    ((-1.0, 2.0), (-2.0, 2.5), "within 5%"),
    ((8.0, 20.0), (-1.0, 3.0), "over 5%"),
    ((-1.0, 2.0), (-7.0, 2.0), "unresolvable (A/A noise beyond 5%)"),
    ((14.0, 17.0), (-3.0, 6.2), "unresolvable (A/A noise beyond 5%)"),
    ((-1.0, 2.0), (0.5, 3.0), "not shown (control off)"),
    ((-1.0, 7.0), (-2.0, 2.0), "not shown"),
])
def test_a_row_is_judged_only_where_the_control_resolves_the_goal(interval: tuple[float, float],
                                                                   control: tuple[float, float], expected: str) -> None:
    assert verdict(interval, control, 5.0) == expected
    assert control_resolves(control, 5.0) == (control[0] > -5.0 and control[1] < 5.0)
