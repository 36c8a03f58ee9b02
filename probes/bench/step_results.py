"""Summaries of the overlap experiment: per mode, what a step costs and what overlap buys."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from linkscope.probes.bench.step import run_label
from linkscope.topo.common.frozen import frozen


@frozen
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


def reading_notes(summaries: Sequence[ModeSummary], gradient_bytes: int, profiled: bool) -> list[str]:
    """What a reader of the table needs to weigh it: speedups inside the step-to-step spread, bucket caps that
    make the same single bucket, timings taken under the profiler."""
    notes = []
    baseline = next((s for s in summaries if s.mode == "no-overlap"), None)
    if baseline is not None:
        within = [s.label for s in summaries if s.mode == "ddp"
                  and s.step_p10_ms <= baseline.step_p90_ms and baseline.step_p10_ms <= s.step_p90_ms]
        if within:
            notes.append(f"{', '.join(within)}: the 10-90% step range overlaps no-overlap's, so its speedup is within "
                         "this machine's step-to-step spread (more --steps narrows it)")
    unhidden = [s.label for s in summaries if s.mode == "ddp" and s.comm_ms > 0 and s.exposed_comm_ms >= 0.9 * s.comm_ms
                and (s.speedup_vs_no_overlap or 0) > 1.2]
    if unhidden:
        notes.append(f"{', '.join(unhidden)}: almost none of the communication is hidden behind backward, so the speedup "
                     "comes from fewer, larger all_reduce calls (buckets), not from overlap")
    whole = [s.label for s in summaries if s.mode == "ddp" and s.bucket_cap_mb is not None
             and s.bucket_cap_mb * 1e6 >= gradient_bytes]
    if len(whole) > 1:
        notes.append(f"{', '.join(whole)}: each cap holds all {gradient_bytes / 1e6:.3g} MB of gradients, so they run "
                     "the same single bucket; their differences are noise")
    if profiled:
        notes.append("steps were timed under the profiler (--profile), which adds to each step")
    return notes
