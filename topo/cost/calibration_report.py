"""What calibrating the cost model from measurements changed, in words people can check.

`check --measurements` fits the model to the numbers (:func:`topo.cost.calibrate`); this module
prices the same rows with the model before and after, so the command can say "all_reduce over NV18
measured 312 GB/s busbw, model 355" instead of changing its predictions without a word.
"""

from __future__ import annotations

import statistics
from typing import Any

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.expect import COLLECTIVE_JUDGE_MIN_BYTES, expect_collective, host_of
from linkscope.topo.cost.params import CostModel
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot


@frozen
class CalibrationChange:
    """One kind of measured row: what was measured, what the model said before, and after calibration."""

    subject: str
    """`all_reduce 1 GiB x8` or `peer copies (56 pairs)`."""
    link: str
    metric: str
    """`busbw` or `unidir`."""
    measured_gbps: float
    model_gbps: float
    calibrated_gbps: float

    @property
    def message(self) -> str:
        """`all_reduce 1 GiB x8 over NV18 measured 312 GB/s busbw, model 355 (now 312)`."""
        return (f"{self.subject} over {self.link} measured {format_gbps(self.measured_gbps, '.3g')} {self.metric}, model "
                f"{self.model_gbps:.3g}" + ("" if abs(self.calibrated_gbps - self.model_gbps) < 0.005 * self.model_gbps
                                            else f" (calibrated: {self.calibrated_gbps:.3g})"))

    def to_json(self) -> dict[str, Any]:
        """The JSON form of `check --json` (`calibration`)."""
        return {"subject": self.subject, "link": self.link, "metric": self.metric, "measured_gbps": self.measured_gbps,
                "model_gbps": self.model_gbps, "calibrated_gbps": self.calibrated_gbps, "message": self.message}


def calibration_changes(measurements: Measurements, snapshot: Snapshot, base: CostModel | None = None) -> list[CalibrationChange]:
    """Per all_reduce rank count (its largest size) and per peer-copy link kind: measured, model, calibrated."""
    if not snapshot.hosts or not snapshot.host.gpus:
        return []
    model = base or CostModel()
    host = snapshot.host
    fitted = calibrate(model, measurements, host)
    per_host = measurements.identity.gpu_count if measurements.identity is not None else None
    changes: list[CalibrationChange] = []
    largest: dict[int, Any] = {}
    for result in measurements.collectives:
        ranks = result.nranks or len(result.ranks)
        if result.op != "all_reduce" or result.size_bytes < COLLECTIVE_JUDGE_MIN_BYTES or ranks < 2:
            continue
        if ranks not in largest or result.size_bytes > largest[ranks].size_bytes:
            largest[ranks] = result
    for _, result in sorted(largest.items()):
        before = expect_collective(result, snapshot, model, per_host)
        after = expect_collective(result, snapshot, fitted, per_host)
        if before is None or after is None or before.expected_gbps is None or after.expected_gbps is None:
            continue
        subject = before.subject
        changes.append(CalibrationChange(subject, before.link, "busbw", result.busbw_gbps, before.expected_gbps,
                                         after.expected_gbps))
    by_link: dict[str, list[tuple[float, float, float]]] = {}
    for copy in measurements.peer_copies:
        place = host_of(snapshot, copy.host)
        positions = {gpu.index: position for position, gpu in enumerate(place.gpus)}
        a, b = positions.get(copy.src), positions.get(copy.dst)
        if copy.unidir_gbps is None or a is None or b is None or a == b or place is not host:
            continue
        hop, calibrated = model.gpu_hop(host, a, b), fitted.gpu_hop(host, a, b)
        by_link.setdefault(hop.label, []).append((copy.unidir_gbps, hop.bandwidth_gbps, calibrated.bandwidth_gbps))
    for label, rows in by_link.items():
        changes.append(CalibrationChange(f"peer copies ({len(rows)} pairs, median)", label, "unidir",
                                         statistics.median(row[0] for row in rows), statistics.median(row[1] for row in rows),
                                         statistics.median(row[2] for row in rows)))
    return changes
