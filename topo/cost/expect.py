"""Expected next to measured: what the cost model says each measurement row should have been.

For every row of :class:`topo.model.measurements.Measurements` on the machine it belongs to:
- a collective: the group's links priced by :class:`topo.cost.GroupPricer` and
  :func:`topo.cost.collective_cost` (default parameters, never calibrated from the rows it judges),
  compared as nccl-tests busbw;
- a peer copy: what the pair's link typically delivers (:func:`topo.machine.links.link_speed`);
- a host copy: what the GPU's PCIe link (generation and width) typically delivers.

The ratio is measured / expected (:func:`speed_ratio`), and one verdict rule (:func:`verdict`) serves the
command line, the benchmarks and the app alike. Rows too small to say anything about bandwidth get a ratio
but no verdict (:func:`copy_judged`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.cost.collectives import collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import HOST_PATH_FRACTION, CostModel
from linkscope.topo.layout.placement import Placement
from linkscope.topo.machine.links import DEGRADED_FRACTION, gpu_pcie_speed, link_speed
from linkscope.topo.model.busbw import PRICED_OPS
from linkscope.topo.model.host import Host
from linkscope.topo.model.measurements import CollectiveResult, HostCopy, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot

SLOW_FRACTION = DEGRADED_FRACTION
"""Below this share of expected a measurement is `slow` (the degraded-link threshold of topo.machine.links)."""
FAR_BELOW_FRACTION = 0.5
"""Below this share of expected a measurement is `far below`: no noise or tuning explains half the bandwidth."""
Verdict = Literal["ok", "slow", "far below"]
"""How a measurement compares with what its link should deliver."""
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

COPY_JUDGE_MIN_BYTES = 32 * 1024**2
"""Smallest copy judged for speed: a smaller one spends a large share of its time on its fixed cost."""
COLLECTIVE_JUDGE_MIN_BYTES = 1 << 20
"""Smallest collective judged: below it a collective is latency-bound and its busbw mostly noise."""

_PRICED_AS = {"reduce": "broadcast"}
"""Ops the cost model has no formula for, priced as one that moves the same bytes the same way (NCCL's
reduce is a pipelined ring like broadcast, with the same busbw factor 1)."""


def speed_ratio(measured: float | None, expected: float | None) -> float | None:
    """Measured over expected (both GB/s, or both 1/time): 1 is as fast as the link should be, below is slower;
    None unless both are known and the expectation is positive and finite."""
    if measured is None or expected is None or not 0 < expected < math.inf:
        return None
    return measured / expected


def copy_judged(size_bytes: int | None) -> bool:
    """Whether a copy of `size_bytes` (None: the tool did not say) is large enough to judge its bandwidth."""
    return size_bytes is None or size_bytes >= COPY_JUDGE_MIN_BYTES


def verdict(ratio: float | None) -> Verdict | None:
    """`ok`, `slow` (below SLOW_FRACTION of expected) or `far below` (below FAR_BELOW_FRACTION); None unknown."""
    if ratio is None or not math.isfinite(ratio):
        return None
    if ratio < FAR_BELOW_FRACTION:
        return "far below"
    if ratio < SLOW_FRACTION:
        return "slow"
    return "ok"


def is_below(ratio: float | None) -> bool:
    """True when `ratio` earns a verdict other than `ok`."""
    return verdict(ratio) in ("slow", "far below")


@dataclass(frozen=True)
class Expected:
    """One measurement row next to what its link should deliver."""

    kind: str
    """`collective`, `peer` or `host`."""
    subject: str
    """The row for people: `all_reduce 1 GiB x8`, `GPU0->GPU1 256 MiB`, `GPU0 h2d`."""
    metric: str
    """What is compared: `busbw`, `unidir` or `host copy`, all in GB/s."""
    measured_gbps: float
    expected_gbps: float | None
    link: str
    """The link that sets the expectation: `NV18`, `PCIe Gen5 x16`, `mlx5_0 400 Gb/s`."""
    judged: bool = True
    """False when the row is too small (or otherwise unfit) for a bandwidth verdict."""
    expected_time_us: float | None = None
    """The model's time of the call (collectives)."""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """Measured / expected, when the expectation is known and positive."""
        return speed_ratio(self.measured_gbps, self.expected_gbps)

    @property
    def verdict(self) -> Verdict | None:
        """The shared verdict of the ratio; None for rows not judged."""
        return verdict(self.ratio) if self.judged else None

    def to_json(self) -> dict[str, Any]:
        """The JSON form every `--json` output uses."""
        return {"kind": self.kind, "subject": self.subject, "metric": self.metric, "link": self.link,
                "measured_gbps": self.measured_gbps, "expected_gbps": self.expected_gbps, "ratio": self.ratio,
                "verdict": self.verdict, "expected_time_us": self.expected_time_us, "note": self.note or None}


def host_of(snapshot: Snapshot, hostname: str | None) -> Host:
    """The host a row names (the first host when it names none or one the snapshot lacks)."""
    if hostname is not None:
        for host in snapshot.hosts:
            if host.hostname == hostname:
                return host
    return snapshot.host


def _position(host: Host, device: int) -> int | None:
    """The position in `host.gpus` of the GPU a result file calls `device` (its NVML/CUDA index)."""
    for position, gpu in enumerate(host.gpus):
        if gpu.index == device:
            return position
    return device if device < len(host.gpus) else None


def expect_peer_copy(copy: PeerCopy, host: Host, positions: Sequence[int | None] | None = None) -> Expected | None:
    """The copy against what its pair's link typically delivers; None without a unidirectional figure.

    `positions` maps the copy's device numbers to positions in `host.gpus` (bench p2p matches them by
    bus id); by default a device number is the GPU's index.
    """
    if copy.unidir_gbps is None:
        return None
    size = f" {format_size_bytes(copy.size_bytes)}" if copy.size_bytes else ""
    subject = f"GPU{copy.src}->GPU{copy.dst}{size}"
    a, b = (_mapped(positions, copy.src, host), _mapped(positions, copy.dst, host))
    if a is None or b is None or a == b:
        return Expected("peer", subject, "unidir", copy.unidir_gbps, None, "?", judged=False,
                        note="the GPU is not in the snapshot")
    try:
        link = host.link(a, b)
    except KeyError:
        return Expected("peer", subject, "unidir", copy.unidir_gbps, None, "?", judged=False,
                        note="the snapshot does not describe this pair")
    judged = copy_judged(copy.size_bytes)
    if copy.p2p_enabled is False:
        # P2P off (p2pBandwidthLatencyTest's "P2P=Disabled" matrix, or no peer access): every chunk is staged
        # through host memory, so the figure is the slower GPU's PCIe link at the staged share, not the pair's link
        staged = min((gpu_pcie_speed(host, a), gpu_pcie_speed(host, b)), key=lambda speed: speed.typical_gbps)
        return Expected("peer", subject, "unidir", copy.unidir_gbps, staged.typical_gbps * HOST_PATH_FRACTION,
                        f"host-staged {staged.basis}", judged=judged, note="P2P off: copies go through host memory")
    speed = link_speed(host, link)
    return Expected("peer", subject, "unidir", copy.unidir_gbps, speed.typical_gbps, link.token, judged=judged)


def expect_host_copy(copy: HostCopy, host: Host, positions: Sequence[int | None] | None = None) -> Expected:
    """A host<->GPU copy against what the GPU's PCIe link typically delivers (remote NUMA nodes are not judged)."""
    numa = "" if copy.numa_node is None else f" NUMA {copy.numa_node}"
    subject = f"GPU{copy.gpu} {copy.direction}{numa}"
    position = _mapped(positions, copy.gpu, host)
    if position is None:
        return Expected("host", subject, "host copy", copy.gbps, None, "?", judged=False, note="the GPU is not in the snapshot")
    speed = gpu_pcie_speed(host, position)
    judged = copy.local is not False and copy_judged(copy.size_bytes)
    note = "pinned memory on a remote NUMA node" if copy.local is False else ""
    return Expected("host", subject, "host copy", copy.gbps, speed.typical_gbps, speed.basis, judged=judged, note=note)


def _mapped(positions: Sequence[int | None] | None, device: int, host: Host) -> int | None:
    if positions is None:
        return _position(host, device)
    return positions[device] if 0 <= device < len(positions) else None


def collective_placement(result: CollectiveResult, snapshot: Snapshot, gpus_per_host: int | None = None) -> Placement | None:
    """Where the result's ranks ran, in torchrun block order: rank r on node r // g, local GPU r % g, with g
    the GPUs per host the measurements say (else the snapshot's count); its listed ranks, else 0..n-1."""
    host = snapshot.host
    gpus = len(host.gpus)
    ranks = result.ranks or tuple(range(result.nranks or 0))
    if len(ranks) < 2 or gpus == 0 or len(set(ranks)) != len(ranks):
        return None
    per_host = min(gpus_per_host or gpus, gpus)
    node_index = {node: index for index, node in enumerate(sorted({rank // per_host for rank in ranks}))}
    hosts = tuple(snapshot.hosts[node] if node < len(snapshot.hosts) else host for node in range(len(node_index)))
    positions = [_position(hosts[node_index[rank // per_host]], rank % per_host) for rank in ranks]
    if any(position is None for position in positions):
        return None
    return Placement(hosts, _classes(hosts), tuple(node_index[rank // per_host] for rank in ranks),
                     tuple(position for position in positions if position is not None), "measured")


def _classes(hosts: tuple[Host, ...]) -> tuple[int, ...]:
    seen: dict[int, int] = {}
    return tuple(seen.setdefault(id(host), len(seen)) for host in hosts)


def expect_collective(result: CollectiveResult, snapshot: Snapshot, model: CostModel | None = None,
                      gpus_per_host: int | None = None) -> Expected | None:
    """The result's busbw against the model's for the same op, size and ranks on the links the group
    crosses; None for ops the model cannot price or a rank count it cannot place."""
    op = _PRICED_AS.get(result.op, result.op)
    subject = f"{result.op} {format_size_bytes(result.size_bytes)} x{result.nranks or len(result.ranks) or '?'}"
    if result.group:
        subject += f" {result.group}"
    if op not in PRICED_OPS:
        return None
    placement = collective_placement(result, snapshot, gpus_per_host)
    if placement is None:
        return None
    pricer = GroupPricer(placement, model or CostModel())
    links = pricer.links(range(placement.world_size))
    cost = collective_cost(op, links, result.size_bytes)
    judged = result.size_bytes >= COLLECTIVE_JUDGE_MIN_BYTES and result.busbw_gbps > 0
    note = f"model: {cost.algo}"
    if _without_p2p(placement):
        note += "; no P2P between these GPUs: NCCL stages through host memory"
    return Expected("collective", subject, "busbw", result.busbw_gbps, cost.busbw_gbps, links.bottleneck_label,
                    judged=judged, expected_time_us=cost.time_s * 1e6, note=note)


def _without_p2p(placement: Placement) -> bool:
    """True when the snapshot says some GPU pair of a one-host group has no peer access."""
    if len(placement.hosts) != 1:
        return False
    host, gpus = placement.hosts[0], sorted(set(placement.gpu_of_rank))
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            try:
                p2p = host.link(a, b).p2p
            except KeyError:
                continue
            if p2p is not None and (p2p.read, p2p.write) != (None, None) and not p2p.any_ok:
                return True
    return False


@dataclass(frozen=True)
class RowExpectations:
    """Per row of a Measurements, in its order, what the model expects (None where it cannot say)."""

    collectives: tuple[Expected | None, ...] = ()
    peer_copies: tuple[Expected | None, ...] = ()
    host_copies: tuple[Expected | None, ...] = ()

    def all(self) -> list[Expected]:
        """Every known expectation: collectives, then peer copies, then host copies."""
        return [row for row in (*self.collectives, *self.peer_copies, *self.host_copies) if row is not None]


def row_expectations(measurements: Measurements, snapshot: Snapshot, model: CostModel | None = None) -> RowExpectations:
    """What the model expects for each row of `measurements` on `snapshot` (aligned with the rows)."""
    if not snapshot.hosts or not snapshot.host.gpus:
        return RowExpectations((None,) * len(measurements.collectives), (None,) * len(measurements.peer_copies),
                               (None,) * len(measurements.host_copies))
    per_host = measurements.identity.gpu_count if measurements.identity is not None else None
    return RowExpectations(
        tuple(expect_collective(result, snapshot, model, per_host) for result in measurements.collectives),
        tuple(expect_peer_copy(copy, host_of(snapshot, copy.host)) for copy in measurements.peer_copies),
        tuple(expect_host_copy(copy, host_of(snapshot, copy.host)) for copy in measurements.host_copies),
    )


def expectations(measurements: Measurements, snapshot: Snapshot, model: CostModel | None = None) -> list[Expected]:
    """Every row of `measurements` that can be priced on `snapshot`: collectives, then peer copies, then host copies."""
    return row_expectations(measurements, snapshot, model).all()


def summary(rows: Sequence[Expected]) -> str:
    """One line for people: how many judged rows are ok, slow and far below."""
    judged = [row.verdict for row in rows if row.verdict is not None]
    if not judged:
        return "no row large enough to judge against the model"
    counts = ", ".join(f"{judged.count(name)} {name}" for name in VERDICTS if judged.count(name))
    return f"{len(judged)} row(s) judged: {counts}"
