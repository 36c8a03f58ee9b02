"""The doctor rule over measurements: rows that ran below what their links should deliver."""

from __future__ import annotations

import re
from collections.abc import Iterator

from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.expect import FAR_BELOW_FRACTION, SLOW_FRACTION, Expected, row_expectations
from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines

_GPU = re.compile(r"GPU(\d+)")


def measured_below_expected(context: HealthContext) -> Iterator[HealthFinding]:
    """`measured-below-expected`: judged rows under SLOW_FRACTION of the model (error under FAR_BELOW_FRACTION)."""
    measurements = context.measurements
    if measurements is None or not context.snapshot.hosts:
        return
    rows = [row for row in row_expectations(measurements, context.snapshot).all() if row.verdict in ("slow", "far below")]
    if not rows:
        return
    worst = min(rows, key=lambda row: row.ratio if row.ratio is not None else 1.0)
    far = [row for row in rows if row.verdict == "far below"]
    gpus = tuple(sorted({int(number) for row in rows if row.kind != "collective" for number in _GPU.findall(row.subject)}))
    yield HealthFinding(
        code="measured-below-expected",
        severity="error" if far else "warning",
        host=context.snapshot.host.hostname,
        gpus=gpus,
        message=(f"{len(rows)} measurement(s) below {SLOW_FRACTION:.0%} of what their links should deliver "
                 f"({len(far)} below {FAR_BELOW_FRACTION:.0%}); worst: {_line(worst)}"),
        evidence=evidence_lines(_line(row) for row in sorted(rows, key=lambda row: row.ratio or 0.0)),
        fix="look at the links named: NVLinks down (doctor's nvlink findings), a narrow PCIe link, P2P off or "
            "NCCL settings; re-measure with linkscope bench after fixing",
    )


def _line(row: Expected) -> str:
    ratio = f"{row.ratio:.0%}" if row.ratio is not None else "?"
    expected = f"{row.expected_gbps:.1f}" if row.expected_gbps is not None else "?"
    return f"{row.subject} over {row.link}: {row.metric} {format_gbps(row.measured_gbps, '.1f')}, expected {expected} ({ratio})"
