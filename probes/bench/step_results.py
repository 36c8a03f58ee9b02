"""Summaries of the overlap experiment: per mode, what a step costs and what overlap buys."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from linkscope.probes.bench.step import run_label


@dataclass(frozen=True)
class ModeSummary:
    """One mode (one bucket size for `ddp`) over every timed step of every rank (medians)."""

    label: str
    mode: str
    bucket_cap_mb: float | None
    steps: int
    step_ms: float
    step_p10_ms: float
    step_p90_ms: float
    compute_ms: float
    comm_ms: float
    exposed_comm_ms: float
    accounting: str
    speedup_vs_no_overlap: float | None
    """no-overlap median step time / this mode's: above 1, overlap made steps faster."""

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "label": self.label, "bucket_cap_mb": self.bucket_cap_mb, "steps": self.steps,
                "step_ms": round(self.step_ms, 3), "step_p10_ms": round(self.step_p10_ms, 3),
                "step_p90_ms": round(self.step_p90_ms, 3), "compute_ms": round(self.compute_ms, 3),
                "comm_ms": round(self.comm_ms, 3), "exposed_comm_ms": round(self.exposed_comm_ms, 3),
                "accounting": self.accounting,
                "speedup_vs_no_overlap": round(self.speedup_vs_no_overlap, 3) if self.speedup_vs_no_overlap else None}


def summarise(runs: Sequence[dict[str, Any]]) -> list[ModeSummary]:
    """Pool every rank's timed steps per run; a step's time is the slowest rank's (they wait for each other)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        grouped.setdefault(run_label(run["mode"], run["bucket_cap_mb"]), []).append(run)
    baseline_ms: float | None = None
    summaries: list[ModeSummary] = []
    for label, members in grouped.items():
        per_step = list(zip(*(run["steps"] for run in members), strict=False))
        slowest = [max(step["step_ms"] for step in ranks) for ranks in per_step]
        pooled = [step for run in members for step in run["steps"]]
        if not slowest:
            continue
        deciles = statistics.quantiles(slowest, n=10, method="inclusive") if len(slowest) > 1 else [slowest[0]] * 9
        summary = ModeSummary(
            label=label, mode=members[0]["mode"], bucket_cap_mb=members[0]["bucket_cap_mb"], steps=len(slowest),
            step_ms=statistics.median(slowest), step_p10_ms=deciles[0], step_p90_ms=deciles[-1],
            compute_ms=statistics.median(s["compute_ms"] for s in pooled),
            comm_ms=statistics.median(s["comm_ms"] for s in pooled),
            exposed_comm_ms=statistics.median(s["exposed_comm_ms"] for s in pooled),
            accounting=members[0]["accounting"], speedup_vs_no_overlap=None,
        )
        if summary.mode == "no-overlap":
            baseline_ms = summary.step_ms
        summaries.append(summary)
    if baseline_ms is None:
        return summaries

    return [replace(s, speedup_vs_no_overlap=baseline_ms / s.step_ms if s.step_ms > 0 and s.mode != "ddp-no-sync" else None)
            for s in summaries]
