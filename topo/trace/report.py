"""What the profiler traces of a slow job say: exposed communication per step, collectives below
their links' speed, and the rank everyone waited for.

Collectives of several ranks are matched by process group and op, in call order; in an op where every
member exchanges data with every other, the calls of one collective overlap in time, so a call that ended
before another rank's next one began is one the other traces miss (a sampled window, a trace cut short)
and is passed over. Within a matched call, the rank whose collective began
last arrived last: the others waited for it. Clocks of different hosts are not synchronised, so
waits across hosts are only as good as the hosts' clocks (NTP keeps them within ~1 ms; PTP far
better); the report says when the ranks came from more than one host.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.units import format_seconds, format_share
from linkscope.topo.formats.trace_events import RankTrace, TraceCollective
from linkscope.topo.model.busbw import BUS_FACTOR_OPS, bus_factor
from linkscope.topo.model.findings import SEVERITIES, Finding
from linkscope.topo.trace.pricing import Expected, Pricer, group_ranks, placed_pricer, why_not_priced

if TYPE_CHECKING:  # what pricing on a machine needs is loaded only when a machine is given (`trace --source`)
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.layout.measured import MeasuredPlacement

EXPOSED_SHARE = 0.2
"""Default share of a step above which exposed communication is a finding."""
SMALL_MESSAGE_CALLS = 0.5
"""Share of a group's calls below the half-bandwidth size above which buckets are called too small."""
STRAGGLER_MEAN_WAIT_US = 10.0
"""Mean wait per call, for the others, below which a rank that keeps arriving last is not a finding: the
few microseconds by which kernel launches on different ranks differ anyway."""
DEFAULT_HALF_BANDWIDTH_BYTES = 1 << 20
"""Size at which a link reaches half its bandwidth when no machine is given (NVLink-class: alpha x beta ~ 1 MiB)."""
EVERY_MEMBER_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier"})
"""Ops in which every member needs data from every other: no member's call can end before the last one joins.
(A broadcast's root, a reduce's senders, a send can finish before their peers start.)"""
CLOCK_SKEW_US = 1_000.0
"""How far the clocks of different hosts may disagree (NTP keeps them within about a millisecond); traces of
one host share its clock."""


@frozen
class CollectiveRow:
    """One collective call of one rank, with what it achieved and (when priced) what it should have."""

    rank: int | None
    call: TraceCollective
    algbw_gbps: float | None
    busbw_gbps: float | None
    expected: Expected | None
    unpriced: str | None = None
    """Why a call was not priced against its links when a machine was given (None when it was, or none was given)."""
    group_assumed: bool = False
    """True when the trace names neither the call's group nor its size and it was priced as the whole job."""

    @property
    def ratio(self) -> float | None:
        """Expected time / measured time: 1.0 is as fast as the links allow, below is slower."""
        if self.expected is None or self.call.duration_us <= 0:
            return None
        return self.expected.time_us / self.call.duration_us

    def to_json(self) -> dict[str, object]:
        call = self.call
        row: dict[str, object] = {
            "rank": self.rank, "op": call.op, "bytes": call.size_bytes, "group_size": call.group_size,
            "ranks": list(call.group_ranks) if call.group_ranks is not None else None, "group": call.group_name,
            "step": call.step, "start_us": round(call.start_us, 3), "duration_us": round(call.duration_us, 3),
            "timed_on": "gpu" if call.on_device else ("cpu-launch" if call.launch_only else "cpu"), "device": call.device,
            "algbw_gbps": _round(self.algbw_gbps), "busbw_gbps": _round(self.busbw_gbps),
        }
        if self.expected is not None:
            row |= {"expected_us": round(self.expected.time_us, 3), "link": self.expected.link,
                    "measured_vs_expected": _round(self.ratio), "limited_by": self.expected.limited_by,
                    "path": list(self.expected.path)}
        if self.unpriced is not None:
            row["not_priced"] = self.unpriced
        if self.group_assumed:
            row["group_assumed"] = "the whole job: the trace names neither the group nor its size"
        return row


@frozen
class StepRow:
    """One rank's step."""

    rank: int | None
    step: int
    time_us: float
    compute_us: float
    comm_us: float
    exposed_comm_us: float

    @property
    def exposed_share(self) -> float:
        return self.exposed_comm_us / self.time_us if self.time_us > 0 else 0.0

    @property
    def idle_us(self) -> float:
        """Time of the step the GPU ran neither computation nor communication (launch gaps, CPU work, data loading;
        memory copies too, since they are kept apart from compute)."""
        return max(0.0, self.time_us - self.compute_us - self.exposed_comm_us)

    @property
    def idle_share(self) -> float:
        """The GPU's idle time as a share of the step."""
        return self.idle_us / self.time_us if self.time_us > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "step": self.step, "time_us": round(self.time_us, 3),
                "compute_us": round(self.compute_us, 3), "comm_us": round(self.comm_us, 3),
                "exposed_comm_us": round(self.exposed_comm_us, 3), "exposed_share": round(self.exposed_share, 4),
                "gpu_idle_us": round(self.idle_us, 3), "gpu_idle_share": round(self.idle_share, 4)}


@frozen
class Straggler:
    """The rank that arrived last most often, and what that cost the others."""

    rank: int
    host: str | None
    device: int | None
    last_arrivals: int
    matched_calls: int
    others_waited_us: float
    """Summed over matched calls where it came last: how long the earliest rank waited for it."""


@frozen
class TraceFinding(Finding):
    """One thing worth acting on, with the ranks it concerns."""

    message: str
    ranks: tuple[int, ...] = ()


@frozen
class TraceReport:
    """Everything `linkscope trace` prints."""

    traces: tuple[RankTrace, ...]
    collectives: tuple[CollectiveRow, ...]
    steps: tuple[StepRow, ...]
    straggler: Straggler | None
    findings: tuple[TraceFinding, ...]
    hosts: tuple[str, ...]
    placed: MeasuredPlacement | None = None
    """Where the job's ranks were placed on the machine (None when no machine was given)."""

    def why_unpriced(self) -> str:
        """Why no call could be judged against its links (for a report priced on a machine that judged none): the
        reasons of the calls, most common first."""
        if not self.collectives:
            return "the traces hold no collective calls"
        reasons = Counter(row.unpriced for row in self.collectives if row.unpriced is not None)
        if not reasons:
            return "the calls whose groups are known move too few bytes for a link's bandwidth to matter"
        return "; ".join(f"{count} call(s): {reason}" for reason, count in reasons.most_common(3))

    def judged(self, priced: bool) -> dict[str, object]:
        """The `judged` object of `trace --json`: steps judged, calls read, priced against their links (with a
        machine) and, per reason, those that were not."""
        reasons = Counter(row.unpriced for row in self.collectives if row.unpriced is not None)
        return {"steps": len(self.steps), "calls": len(self.collectives),
                "priced": sum(1 for row in self.collectives if row.expected is not None) if priced else None,
                "not_priced": dict(reasons) if priced else None}

    def assumed_groups_note(self) -> str | None:
        """For people, when some priced calls name neither their group nor its size (priced as the whole job)."""
        assumed = sum(1 for row in self.collectives if row.group_assumed)
        if not assumed:
            return None
        return f"{assumed} call(s) name neither their process group nor its size: priced as the whole job (assumed)"

    def verdict_line(self) -> str | None:
        """`No findings.` only when something was judged (a step, or a call priced against its links); `NOTHING
        JUDGED` when nothing was; None when there are findings to list."""
        if self.findings:
            return None
        if self.steps or any(row.expected is not None for row in self.collectives):
            return "No findings."
        return "NOTHING JUDGED: no step and no call priced against its links"

    def slowest(self, count: int = 5) -> list[CollectiveRow]:
        """The priced collectives furthest below what their links allow (large enough to matter)."""
        priced = [row for row in self.collectives if row.ratio is not None and row.expected is not None
                  and (row.call.size_bytes or 0) >= row.expected.half_bandwidth_bytes]
        return sorted(priced, key=lambda row: row.ratio or math.inf)[:count]

    def to_json(self) -> dict[str, object]:
        straggler = None
        if self.straggler is not None:
            s = self.straggler
            straggler = {"rank": s.rank, "host": s.host, "device": s.device, "last_arrivals": s.last_arrivals,
                         "matched_calls": s.matched_calls, "others_waited_us": round(s.others_waited_us, 3)}
        return {
            "traces": [{"file": t.name, "rank": t.rank, "world_size": t.world_size, "host": t.host,
                        "backend": t.backend, "nccl_version": t.nccl_version} for t in self.traces],
            "collectives": [row.to_json() for row in self.collectives],
            "steps": [row.to_json() for row in self.steps],
            "straggler": straggler,
            "findings": [finding.to_json() for finding in self.findings],
            "judged": self.judged(self.placed is not None),
            "placement": self.placed.to_json() if self.placed is not None else None,
        }


def analyse(traces: Sequence[RankTrace], placed: MeasuredPlacement | None = None, exposed_share: float = EXPOSED_SHARE,
            machine_gpus: Sequence[str] = (), model: CostModel | None = None) -> TraceReport:
    """Join the traces of one job's ranks: per-call bandwidths and expectations (on the machine the ranks were
    `placed` on, by :func:`topo.trace.files.place_traces`), steps, straggler, findings.

    InputError when the traces cannot be one job's: a rank twice, or different world sizes.
    """
    _check_one_job(traces)
    pricer = None
    if placed is not None:
        from linkscope.topo.cost.params import CostModel

        pricer = placed_pricer(placed, model or CostModel())
    rows = tuple(_row(trace, call, pricer) for trace in traces for call in trace.collectives)
    steps = tuple(StepRow(trace.rank, s.step, s.time_us, s.compute_us, s.comm_us, s.exposed_comm_us)
                  for trace in traces for s in trace.steps)
    straggler = _straggler(traces)
    findings = sorted((*_exposed_findings(steps, exposed_share), *_idle_findings(steps), *_slow_findings(rows),
                       *_not_priced_findings(rows, pricer is not None), *_straggler_findings(straggler),
                       *_small_message_findings(rows), *_other_gpu_findings(traces, machine_gpus if pricer else ())),
                      key=lambda finding: -SEVERITIES.index(finding.severity))  # most severe first, stable within
    hosts = tuple(sorted({t.host for t in traces if t.host}))
    return TraceReport(tuple(traces), rows, steps, straggler, tuple(findings), hosts, placed)


def _check_one_job(traces: Sequence[RankTrace]) -> None:
    """Refuse traces that are not one job's ranks (a directory that collected several runs, a file given twice):
    joined, they would double-count steps and pair calls that never met."""
    seen: dict[int, str] = {}
    for trace in traces:
        if trace.rank is None:
            continue
        if trace.rank in seen:
            raise InputError(f"rank {trace.rank} is in both {seen[trace.rank]} and {trace.name}: give one job's traces, "
                             "one file per rank (a directory that holds several runs: pass one run's files)")
        seen[trace.rank] = trace.name
    sizes = {trace.world_size: trace.name for trace in traces if trace.world_size is not None}
    if len(sizes) > 1:
        (small, first), (large, second) = min(sizes.items()), max(sizes.items())
        raise InputError(f"{first} is from a job of {small} ranks and {second} from one of {large}: give one job's traces")


def _row(trace: RankTrace, call: TraceCollective, pricer: Pricer | None) -> CollectiveRow:
    algbw = busbw = None
    if call.size_bytes is not None and call.duration_us > 0 and not call.launch_only:
        algbw = call.size_bytes / (call.duration_us * 1e3)
        if call.op in BUS_FACTOR_OPS and call.group_size:
            busbw = algbw * bus_factor(call.op, call.group_size) if call.group_size > 1 else 0.0
    if pricer is None:
        return CollectiveRow(trace.rank, call, algbw, busbw, None)
    ranks, assumed = group_ranks(trace, call)
    reason = why_not_priced(call, ranks)
    expected = None
    if reason is None and ranks is not None and call.size_bytes:
        expected, reason = pricer(call.op, call.size_bytes, ranks)
    return CollectiveRow(trace.rank, call, algbw, busbw, expected, reason, assumed and expected is not None)


def _straggler(traces: Sequence[RankTrace]) -> Straggler | None:
    traces = [trace for trace in traces if trace.rank is not None]  # a trace that does not say its rank: left out
    if len(traces) < 2:
        return None
    skew_us = CLOCK_SKEW_US if len({t.host for t in traces if t.host}) > 1 else 0.0
    sequences: dict[object, dict[int, list[tuple[int, TraceCollective, RankTrace]]]] = defaultdict(dict)
    for trace in traces:
        for call in trace.collectives:
            key = (call.group_ranks or call.group_name or "default", call.op)
            sequences[key].setdefault(trace.rank, []).append((trace.rank, call, trace))  # type: ignore[arg-type]
    last_count: Counter[int] = Counter()
    waited: defaultdict[int, float] = defaultdict(float)
    where: dict[int, tuple[str | None, int | None]] = {}
    matched = 0
    for members in (call for per_rank in sequences.values() for call in _matched_calls(per_rank, skew_us)):
        matched += 1
        first = min(call.start_us for _, call, _ in members)
        rank, call, trace = max(members, key=lambda member: member[1].start_us)
        if call.start_us <= first:
            continue  # every rank started together: no one came last
        last_count[rank] += 1
        waited[rank] += call.start_us - first
        where[rank] = (trace.host, call.device)
    if not last_count:
        return None
    rank, count = max(last_count.items(), key=lambda item: (item[1], waited[item[0]]))  # most often last
    host, device = where[rank]
    return Straggler(rank, host, device, count, matched, waited[rank])


_Member = tuple[int, TraceCollective, RankTrace]


def _matched_calls(per_rank: dict[int, list[_Member]], skew_us: float) -> list[list[_Member]]:
    """The calls of one (group, op) that are one collective call on every rank that traced it.

    In an op where every member needs data from every other, the calls of one collective overlap in time: no
    member's ends before the last one starts (give or take the hosts' clock skew). So the ranks' calls are
    walked in order together, and a call that ended before another rank's next one began is one the other
    traces miss (a sampled window, a trace cut short) and is passed over. Other ops pair by call order."""
    queues = [calls for calls in per_rank.values()]
    if len(queues) < 2:
        return []
    if queues[0][0][1].op not in EVERY_MEMBER_OPS:
        return [list(members) for members in zip(*queues, strict=False)]
    matched, heads = [], [0] * len(queues)
    while all(head < len(queue) for head, queue in zip(heads, queues, strict=True)):
        members = [queue[head] for head, queue in zip(heads, queues, strict=True)]
        last_start = max(call.start_us for _, call, _ in members)
        ended = [index for index, (_, call, _) in enumerate(members) if call.start_us + call.duration_us + skew_us < last_start]
        if ended:
            for index in ended:
                heads[index] += 1
            continue
        matched.append(members)
        heads = [head + 1 for head in heads]
    return matched


def _other_gpu_findings(traces: Sequence[RankTrace], machine_gpus: Sequence[str]) -> list[TraceFinding]:
    """The traces name their GPUs and none is the priced machine's: the expectations are another machine's."""
    ran_on = tuple(dict.fromkeys(name for trace in traces for name in trace.gpu_names))
    if not ran_on or not machine_gpus:
        return []
    from linkscope.topo.model.provenance import same_gpu_model

    if any(same_gpu_model(a, b) for a in ran_on for b in machine_gpus):
        return []
    return [TraceFinding("priced-on-other-gpu", "info",
                    f"the traces ran on {', '.join(ran_on)}, the machine they are priced on has "
                    f"{', '.join(dict.fromkeys(machine_gpus))}: expected times are that machine's, not the one the job ran on")]


def _exposed_findings(steps: Sequence[StepRow], share: float) -> list[TraceFinding]:
    over = [s for s in steps if s.exposed_share > share]
    if not over:
        return []
    worst = max(over, key=lambda s: s.exposed_share)
    ranks = tuple(sorted({s.rank for s in over if s.rank is not None}))
    return [TraceFinding("exposed-comm", "warning",
                    f"{len(over)} of {len(steps)} rank-steps spend more than {share:.0%} of the step waiting on "
                    f"communication that no computation hides (worst: rank {worst.rank} step {worst.step}, "
                    f"{worst.exposed_comm_us / 1e3:.1f} ms exposed of {worst.time_us / 1e3:.1f} ms = {worst.exposed_share:.0%}); "
                    "overlap it (DDP buckets, FSDP prefetch) or shrink it", ranks)]


IDLE_SHARE = 0.5
"""Share of a step above which the GPU idling (neither computing nor communicating) is a finding: most of the step."""


def _idle_findings(steps: Sequence[StepRow]) -> list[TraceFinding]:
    """`gpu-idle`: rank-steps whose GPU idles most of the step (input pipeline, CPU work, launch gaps, waits on the
    host): no link is to blame, and faster links would not help."""
    idle = [step for step in steps if step.time_us > 0 and step.idle_share > IDLE_SHARE]
    if not idle:
        return []
    worst = max(idle, key=lambda step: step.idle_share)
    where = f"rank {worst.rank} step {worst.step}" if worst.rank is not None else f"step {worst.step}"
    return [TraceFinding("gpu-idle", "warning",
                         f"{len(idle)} of {len(steps)} rank-steps leave the GPU idle for most of the step (worst: {where}, "
                         f"idle {format_seconds(worst.idle_us / 1e6)} of {format_seconds(worst.time_us / 1e6)} = "
                         f"{format_share(worst.idle_share)}): the step waits on the host (data loading, CPU work, "
                         "kernel launches, synchronisation), not on a link; profile the CPU side",
                         tuple(sorted({step.rank for step in idle if step.rank is not None})))]


def _not_priced_findings(rows: Sequence[CollectiveRow], priced: bool) -> list[TraceFinding]:
    """`collectives-not-judged`: a machine was given but no call could be priced on it: never a clean verdict."""
    if not priced or not rows or any(row.expected is not None for row in rows):
        return []
    reasons = Counter(row.unpriced for row in rows if row.unpriced is not None)
    said = "; ".join(f"{count} call(s): {reason}" for reason, count in reasons.most_common(3))
    return [TraceFinding("collectives-not-judged", "warning",
                         f"none of the {len(rows)} collective call(s) could be priced on the machine ({said}): their "
                         "links were not judged")]


def _slow_findings(rows: Sequence[CollectiveRow]) -> list[TraceFinding]:
    if all(row.expected is None for row in rows):
        return []  # nothing priced (no machine given): the links' model is not needed
    from linkscope.topo.machine.links import DEGRADED_FRACTION

    slow = [row for row in rows if row.ratio is not None and row.ratio < DEGRADED_FRACTION
            and row.expected is not None and (row.call.size_bytes or 0) >= row.expected.half_bandwidth_bytes]
    if not slow:
        return []
    worst = min(slow, key=lambda row: row.ratio or math.inf)
    assert worst.expected is not None and worst.ratio is not None
    ranks = tuple(sorted({row.rank for row in slow if row.rank is not None}))
    return [TraceFinding("slow-collective", "warning",
                    f"{len(slow)} collective call(s) ran below {DEGRADED_FRACTION:.0%} of what their links allow; worst: "
                    f"{worst.call.op} of {_size(worst.call.size_bytes)} on rank {worst.rank} over {worst.expected.link} took "
                    f"{format_seconds(worst.call.duration_us / 1e6)}, expected {format_seconds(worst.expected.time_us / 1e6)} "
                    f"({format_share(worst.ratio)} of expected speed)", ranks)]


def _straggler_findings(straggler: Straggler | None) -> list[TraceFinding]:
    if straggler is None or straggler.matched_calls == 0 or straggler.last_arrivals < max(2, straggler.matched_calls // 2):
        return []
    if straggler.others_waited_us < STRAGGLER_MEAN_WAIT_US * straggler.last_arrivals:
        return []
    where = " on ".join(part for part in (f"GPU {straggler.device}" if straggler.device is not None else "",
                                          straggler.host or "") if part)
    return [TraceFinding("straggler-rank", "warning",
                    f"rank {straggler.rank}{' (' + where + ')' if where else ''} arrived last at {straggler.last_arrivals} of "
                    f"{straggler.matched_calls} matched collective calls; the earliest rank waited "
                    f"{straggler.others_waited_us / 1e3:.1f} ms for it in all", (straggler.rank,))]


def _small_message_findings(rows: Sequence[CollectiveRow]) -> list[TraceFinding]:
    by_group: dict[object, list[CollectiveRow]] = defaultdict(list)
    for row in rows:
        if row.call.size_bytes and row.call.op in ("all_reduce", "reduce_scatter", "all_gather"):
            by_group[row.call.group_ranks or row.call.group_name].append(row)
    findings = []
    for group, members in by_group.items():
        threshold = members[0].expected.half_bandwidth_bytes if members[0].expected else DEFAULT_HALF_BANDWIDTH_BYTES
        small = [row for row in members if (row.call.size_bytes or 0) < threshold]
        if len(members) >= 8 and len(small) > SMALL_MESSAGE_CALLS * len(members):
            ranks = tuple(sorted({row.rank for row in small if row.rank is not None}))
            copies = max(1, len({row.rank for row in members}))  # every rank's trace holds its own copy of a call
            findings.append(TraceFinding(
                "small-messages", "info",
                f"{len(small) // copies} of {len(members) // copies} collective calls per rank on group {_group(group)} "
                f"move less than {_size(int(threshold))}, where the link spends as long on latency as on bytes: "
                "the messages are too small (larger gradient buckets, DDP's bucket_cap_mb, or coalesced calls)", ranks))
    return findings


def _group(group: object) -> str:
    if isinstance(group, tuple):
        return "[" + ",".join(map(str, group[:8])) + (",..." if len(group) > 8 else "") + "]"
    return str(group)


def _size(size_bytes: int | None) -> str:
    return format_size_bytes(size_bytes) if size_bytes is not None else "unknown size"


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None and math.isfinite(value) else None
