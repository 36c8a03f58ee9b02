"""Versus a baseline snapshot: what got worse since the box was known good."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines

if TYPE_CHECKING:  # the comparison loads only when there is a baseline to compare with (`doctor --baseline`)
    from linkscope.topo.machine.compare import Difference


def _line(difference: Difference) -> str:
    from linkscope.topo.machine.compare import shown_value

    return f"{difference.what}: {shown_value(difference.before)} -> {shown_value(difference.after)}"


def worse_than_baseline(context: HealthContext) -> Iterator[HealthFinding]:
    """Every fact (links, PCIe, NICs, measured bandwidth beyond noise...) that is worse than in the baseline."""
    if context.baseline is None or not context.snapshot.hosts:
        return
    from linkscope.topo.machine.compare import diff_snapshots

    current = context.snapshot
    if context.measurements is not None and context.measurements is not current.measurements:
        current = replace(current, measurements=context.measurements)
    worse = [difference for difference in diff_snapshots(context.baseline, current) if difference.worse]
    if not worse:
        return
    indices = tuple(sorted({index for difference in worse for index in difference.gpus}))
    yield HealthFinding(
        "worse-than-baseline", "warning", current.host.hostname, indices,
        f"{len(worse)} fact(s) are worse than in the baseline ({context.baseline.source or 'baseline'}): "
        + "; ".join(_line(difference) for difference in worse[:3]) + ("; ..." if len(worse) > 3 else ""),
        evidence_lines(_line(difference) for difference in worse),
        "run `linkscope diff BASELINE CURRENT` for every difference; the rules above name the fix for most of them",
    )
