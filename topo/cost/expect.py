"""Expected next to measured: what the cost model says each measurement row should have been.

For every row of :class:`topo.model.measurements.Measurements` on the machine it belongs to:
- a collective: the group's links priced by :class:`topo.cost.GroupPricer` and
  :func:`topo.cost.collective_cost` (default parameters, never calibrated from the rows it judges),
  compared as nccl-tests busbw;
- a peer copy: what the pair's link typically delivers (:func:`topo.machine.links.link_speed`);
- a host copy: what the GPU's PCIe link (generation and width) typically delivers.

The ratio is measured / expected (:func:`speed_ratio`), and one verdict rule (:func:`verdict`) serves the
command line, the benchmarks and the app alike, both ways: below the model is `slow` or `far below`, far
above it is `faster than model` (the model or the assumed placement is wrong), never `ok`. Rows too small
to say anything about bandwidth get a ratio but no verdict (:func:`copy_judged`).

A collective's ranks are placed once (:func:`topo.layout.measured.place_measured`, the placement said in one
line) and priced by the pricing `linkscope estimate` uses; each row says which part of its path sets the
expectation (`limited_by`: nvlink, pcie, network, shm, host-memory or unknown) and the link tokens of the path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.memo import remember_last
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.units import format_gbps
from linkscope.topo.machine.links import DEGRADED_FRACTION, gpu_pcie_speed, link_speed
from linkscope.topo.model.busbw import PRICED_OPS
from linkscope.topo.model.findings import Severity
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.measurements import CollectiveResult, HostCopy, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot

if TYPE_CHECKING:  # the cost model and rank placement load with the first collective row (copies need neither)
    from linkscope.topo.cost.collectives import GroupLinks
    from linkscope.topo.cost.groups import GroupPricer
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.layout.measured import MeasuredPlacement
    from linkscope.topo.layout.placement import Placement

SLOW_FRACTION = DEGRADED_FRACTION
"""Below this share of expected a measurement is `slow` (the degraded-link threshold of topo.machine.links)."""
FAR_BELOW_FRACTION = 0.5
"""Below this share of expected a measurement is `far below`: no noise or tuning explains half the bandwidth."""
ABOVE_MODEL_FRACTION = 1.25
"""Above this share of expected a measurement is `faster than model`: no link beats its model by a quarter, so the
model or the placement it assumed is wrong."""
Verdict = Literal["ok", "slow", "far below", "faster than model"]
"""How a measurement compares with what its link should deliver."""
LimitedBy = Literal["nvlink", "pcie", "network", "shm", "host-memory", "unknown"]
"""Which part of a row's path sets its expectation (and so where a shortfall points)."""
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

COPY_JUDGE_MIN_BYTES = 32 * 1024**2
"""Smallest copy judged for speed: a smaller one spends a large share of its time on its fixed cost."""
COLLECTIVE_JUDGE_MIN_BYTES = 1 << 20
"""Smallest collective judged: below it a collective is latency-bound and its busbw mostly noise."""
CROSS_NODE_JUDGE_MIN_BYTES = 256 << 20
"""Smallest collective judged when its group crosses nodes. Below it NCCL picks LL/LL128 and its network latencies
set the time, which the model does not price: on the corpus's healthy multi-node runs (vendor and documentation
examples: B200 over InfiniBand and gIB, H200 over gIB, DGX A100 over HDR) rows of 1-128 MiB read 0.33-0.74 of the
model, every row from 256 MiB up 0.8-1.2."""
CROSS_NODE_NOT_JUDGED = ("not judged: below 256 MiB a group across nodes is bound by NCCL's protocols and network "
                         "latency, which the model does not price")

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
    """`ok`, `slow` (below SLOW_FRACTION of expected), `far below` (below FAR_BELOW_FRACTION) or `faster than
    model` (above ABOVE_MODEL_FRACTION); None unknown."""
    if ratio is None or not math.isfinite(ratio):
        return None
    if ratio > ABOVE_MODEL_FRACTION:
        return "faster than model"
    if ratio < FAR_BELOW_FRACTION:
        return "far below"
    if ratio < SLOW_FRACTION:
        return "slow"
    return "ok"


def is_below(ratio: float | None) -> bool:
    """True when `ratio` earns a verdict other than `ok`."""
    return verdict(ratio) in ("slow", "far below")


@frozen
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
    limited_by: LimitedBy = "unknown"
    """Which part of the path sets the expectation: where a shortfall points."""
    path: tuple[str, ...] = ()
    """The link tokens of the path, e.g. `("NV18", "NET 8x mlx5_0 400 Gb/s InfiniBand")`."""
    size_bytes: int = 0
    """Bytes the row moved (its buffer or copy size; 0 when the tool did not say)."""
    placement: str = ""
    """How a collective's ranks were placed, in one line (`16 ranks: 2 hosts x 8 GPUs from the rank lines`)."""
    limiting_part: str = ""
    """For a row its network path limits, the part of the GPU<->NIC path that sets the rate: `network` (the NIC),
    `gpu-pcie` or `nic-pcie` (that end's PCIe link), `inter-socket` (a SYS path's socket link); empty otherwise."""

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
                "verdict": self.verdict, "expected_time_us": self.expected_time_us, "note": self.note or None,
                "limited_by": self.limited_by, "path": list(self.path), "placement": self.placement or None,
                "limiting_part": self.limiting_part or None}


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
        from linkscope.topo.cost.params import HOST_PATH_FRACTION

        staged = min((gpu_pcie_speed(host, a), gpu_pcie_speed(host, b)), key=lambda speed: speed.typical_gbps)
        return Expected("peer", subject, "unidir", copy.unidir_gbps, staged.typical_gbps * HOST_PATH_FRACTION,
                        f"host-staged {staged.basis}", judged=judged, size_bytes=copy.size_bytes or 0,
                        note="P2P off: copies go through host memory",
                        limited_by="host-memory", path=(link.token, "host memory"))
    speed = link_speed(host, link)
    return Expected("peer", subject, "unidir", copy.unidir_gbps, speed.typical_gbps, link.token, judged=judged,
                    size_bytes=copy.size_bytes or 0,
                    limited_by="nvlink" if link.kind is LinkKind.NVLINK else "pcie", path=(link.token,))


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
    return Expected("host", subject, "host copy", copy.gbps, speed.typical_gbps, speed.basis, judged=judged, note=note,
                    size_bytes=copy.size_bytes or 0,
                    limited_by="pcie", path=(speed.basis,))


def _mapped(positions: Sequence[int | None] | None, device: int, host: Host) -> int | None:
    if positions is None:
        return _position(host, device)
    return positions[device] if 0 <= device < len(positions) else None


def collective_placement(result: CollectiveResult, snapshot: Snapshot, gpus_per_host: int | None = None,
                         hosts: Sequence[str] = ()) -> MeasuredPlacement:
    """Where the result's ranks ran (:func:`topo.layout.measured.place_measured`): the world its ranks belong to
    (its listed ranks, else 0..n-1), from the hosts and GPUs per host the evidence gives, else assumed."""
    from linkscope.topo.layout.measured import MeasuredPlacement, place_measured

    ranks = result.ranks or tuple(range(result.nranks or 0))
    if len(set(ranks)) != len(ranks):
        return MeasuredPlacement(len(ranks), None, basis="a rank listed twice")
    world = max(ranks) + 1 if ranks else 0
    if result.ranks and snapshot.hosts and snapshot.host.gpus:  # a group of a layout run: its world fills whole hosts
        per_host = gpus_per_host or len(snapshot.host.gpus)
        world = -(-world // per_host) * per_host
    return place_measured(world, snapshot, result.hosts or hosts, gpus_per_host)


_LINK_TOKEN = re.compile(r"^(NV\d+|PIX|PXB|PHB|NODE|SYS)$")


NIC_PATH_PCIE_PARTS = ("gpu-pcie", "nic-pcie", "inter-socket")
"""GPU<->NIC path parts that are PCIe (either end's link, or the CPUs' socket link a SYS path crosses)."""


def limited_by(links: GroupLinks, via_host: bool = False) -> LimitedBy:
    """Which part of a group's path sets its expectation: across nodes the network path (the NIC, or the PCIe side of
    the GPU<->NIC path when that is narrower: `links.net_limit`), unless a slower PCIe hop inside a node is; inside
    one the ring's slowest link (shared memory where PCIe has no peer-to-peer)."""
    if links.bottleneck_class == "NET":
        return "pcie" if links.net_limit in NIC_PATH_PCIE_PARTS else "network"
    if via_host:
        return "shm"
    if links.intra_class == "NV":
        return "nvlink"
    return "pcie" if links.intra_class in ("PIX", "PXB", "PHB", "NODE", "SYS") else "unknown"


def limiting_part(links: GroupLinks) -> str:
    """For a group its network path limits, the part of the GPU<->NIC path that sets the rate (`network`, `gpu-pcie`,
    `nic-pcie`, `inter-socket`); empty when its links inside a node limit it."""
    return links.net_limit if links.bottleneck_class == "NET" else ""


def link_path(links: GroupLinks) -> tuple[str, ...]:
    """The link tokens a group rides: its in-node links, then the network as `NET <rails>x <NIC>`."""
    inside = [label for label in links.links_used if _LINK_TOKEN.match(label)]
    if links.nodes > 1:
        nic = links.net_label.split(", shared by")[0]
        inside.append(f"NET {links.net_rails}x {nic}" if links.net_rails > 1 else f"NET {nic}")
    return tuple(dict.fromkeys(inside))


ONE_NIC_MARGIN = 1.25
"""A multi-node group's busbw within this factor of one NIC's share is "about one NIC's worth"."""


def _network_note(result: CollectiveResult, links: GroupLinks) -> str:
    """For a multi-node group whose busbw is about one NIC's worth where several rails should carry it, the
    words that send the reader to the network path."""
    if links.nodes < 2 or links.net_rails < 2 or not 0 < links.node_net_gbps < math.inf:
        return ""
    per_nic = links.node_net_gbps / links.net_rails
    if result.busbw_gbps > per_nic * ONE_NIC_MARGIN:
        return ""
    nic = links.net_label.split(", shared by")[0]
    return (f"about one NIC's worth ({nic}, ~{format_gbps(per_nic, '.0f')}) of {links.net_rails} rails: look at the network "
            "path, NCCL_IB_HCA, GPUDirect RDMA (NCCL_NET_GDR_LEVEL) and the GPU<->NIC PCIe path")


def expect_collective(result: CollectiveResult, snapshot: Snapshot, model: CostModel | None = None,
                      gpus_per_host: int | None = None, hosts: Sequence[str] = (),
                      placed: MeasuredPlacement | None = None) -> Expected | None:
    """The result's busbw against the model's for the same op, size and ranks on the links the group
    crosses; None for ops the model cannot price. A rank count that cannot be placed is a row not judged,
    saying why."""
    from linkscope.topo.cost.collectives import collective_cost
    from linkscope.topo.cost.params import CostModel

    op = _PRICED_AS.get(result.op, result.op)
    subject = f"{result.op} {format_size_bytes(result.size_bytes)} x{result.nranks or len(result.ranks) or '?'}"
    if result.group:
        subject += f" {result.group}"
    if op not in PRICED_OPS:
        return None
    placed = placed or collective_placement(result, snapshot, gpus_per_host, hosts)
    if placed.ranks < 2:  # one rank moves nothing between GPUs: nothing to price
        return None
    if placed.placement is None:
        return Expected("collective", subject, "busbw", result.busbw_gbps, None, "?", judged=False,
                        note=f"not placed: {placed.basis}", placement=placed.line, size_bytes=result.size_bytes)
    placement = placed.placement
    pricer = group_pricer(placement, model or CostModel())
    ranks = result.ranks or tuple(range(placement.world_size))
    links = pricer.links(ranks)
    cost = collective_cost(op, links, result.size_bytes)
    across_nodes = links.nodes > 1
    smallest = CROSS_NODE_JUDGE_MIN_BYTES if across_nodes else COLLECTIVE_JUDGE_MIN_BYTES
    judged = result.size_bytes >= smallest and result.busbw_gbps > 0
    notes = [f"model: {cost.algo}"]
    if across_nodes and COLLECTIVE_JUDGE_MIN_BYTES <= result.size_bytes < smallest:
        notes.insert(0, CROSS_NODE_NOT_JUDGED)
    via_host = _without_p2p(placement)
    if via_host:
        notes.append("no P2P between these GPUs: NCCL stages through host memory")
    if network := _network_note(result, links):
        notes.append(network)
    part = limiting_part(links)
    if part and links.net_assumed:
        notes.append(f"assumed: {links.net_assumed}")
    row = Expected("collective", subject, "busbw", result.busbw_gbps, cost.busbw_gbps, links.bottleneck_label,
                   judged=judged, expected_time_us=cost.time_s * 1e6, note="; ".join(notes),
                   limited_by=limited_by(links, via_host), path=link_path(links), placement=placed.line,
                   size_bytes=result.size_bytes, limiting_part=part)
    if row.verdict == "faster than model":
        row = replace(row, note=f"{row.note}; faster than the model: the model or the assumed placement is wrong "
                                f"({placed.line})")
    return row


@remember_last
def group_pricer(placement: Placement, model: CostModel) -> GroupPricer:
    """One pricer for the rows of a file: they share one placement (and model), and the pricer's memo of each
    group's links serves every size and op of the same group."""
    from linkscope.topo.cost.groups import GroupPricer

    return GroupPricer(placement, model)


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


@frozen
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
    if model is None and measurements.collectives:  # one model object for every row, so the rows share one pricer
        from linkscope.topo.cost.params import CostModel

        model = CostModel()
    per_host = measurements.identity.gpu_count if measurements.identity is not None else None
    hosts = measurements.identity.hosts if measurements.identity is not None else ()
    return RowExpectations(
        tuple(expect_collective(result, snapshot, model, per_host, hosts) for result in measurements.collectives),
        tuple(expect_peer_copy(copy, host_of(snapshot, copy.host)) for copy in measurements.peer_copies),
        tuple(expect_host_copy(copy, host_of(snapshot, copy.host)) for copy in measurements.host_copies),
    )


def expectations(measurements: Measurements, snapshot: Snapshot, model: CostModel | None = None) -> list[Expected]:
    """Every row of `measurements` that can be priced on `snapshot`: collectives, then peer copies, then host copies."""
    return row_expectations(measurements, snapshot, model).all()


def judged_counts(rows: Sequence[Expected | None]) -> dict[str, int]:
    """The `judged` JSON object: rows judged and not judged (too small, not placed, not priced), and per verdict."""
    verdicts = [row.verdict for row in rows if row is not None and row.verdict is not None]
    counts = {"judged": len(verdicts), "not_judged": len(rows) - len(verdicts)}
    counts.update({name: verdicts.count(name) for name in VERDICTS})
    return counts


VERDICT_SEVERITY: dict[str, Severity] = {"far below": "error", "slow": "warning", "faster than model": "warning"}
"""How much each verdict weighs against `--fail-on`: far below is an error, slow and faster than the model warnings."""


def severities(rows: Sequence[Expected | None]) -> list[Severity]:
    """The severities the rows raise (`--fail-on`): one per row off the model, and a warning when rows were asked to
    be judged and none was (nothing judged is never clean)."""
    found: list[Severity] = [VERDICT_SEVERITY[row.verdict] for row in rows
                             if row is not None and row.verdict in VERDICT_SEVERITY]
    if rows and not judged_counts(rows)["judged"]:
        found.append("warning")
    return found


def placement_lines(rows: Sequence[Expected]) -> list[str]:
    """The distinct placements the collective rows were priced on, each once, for people."""
    return list(dict.fromkeys(row.placement for row in rows if row.placement))


def summary(rows: Sequence[Expected | None]) -> str:
    """One line for people: how many rows were judged and how many are ok, slow, far below or faster than model;
    when none was, that nothing was judged (never a clean verdict)."""
    counts = judged_counts(rows)
    if not counts["judged"]:
        reasons = list(dict.fromkeys(row.note for row in rows if row is not None and row.note.startswith("not placed")))
        why = f" ({reasons[0]})" if reasons else " (no row large enough, placed and priced)"
        return f"NOTHING JUDGED: {counts['not_judged']} row(s), none judged against the model{why}"
    verdicts = ", ".join(f"{counts[name]} {name}" for name in VERDICTS if counts[name])
    left = f"; {counts['not_judged']} not judged" if counts["not_judged"] else ""
    if any(row is not None and row.note.startswith(CROSS_NODE_NOT_JUDGED) for row in rows):
        left += " (rows below 256 MiB across nodes: the model does not price NCCL's protocols over the network)"
    return f"{counts['judged']} row(s) judged: {verdicts}{left}"


def worst_rows(rows: Sequence[Expected], count: int = 3) -> list[Expected]:
    """The decisive rows off the model (slow, far below or faster than model): those that moved the most bytes
    first (a large buffer says more about a link than a small one), then the furthest from the model."""
    off = [row for row in rows if row.verdict not in (None, "ok") and row.ratio is not None]

    def distance(row: Expected) -> float:
        ratio = row.ratio or 1.0
        return ratio if ratio <= 1 else 1 / ratio

    return sorted(off, key=lambda row: (-row.size_bytes, distance(row)))[:count]
