"""What differs between machines: facts of each host, the differences of two, the odd host among many.

A host is reduced to named facts (`GPU3 NVLinks up` = 16, `GPU0-GPU3 link` = NV16, `NIC mlx5_2 rate Gb/s`
= 400, `driver` = 535.129.03, `peer copy GPU0->GPU1 GB/s` = 389.2 ...). Two snapshots differ where a
fact's values differ (measured figures only beyond NOISE_FRACTION); among many hosts the odd one is the
host whose value differs from what more than half of them have. Each fact knows which direction is
better, so a difference can say whether it got worse (the baseline rule of `doctor` reads that).
Only facts a source knows are listed: an `nvidia-smi topo -m` text has no GPU names, so a missing
name is not a difference.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot

NOISE_FRACTION = 0.10
"""Measured bandwidths closer than this fraction (of the larger) count as the same."""

Value = str | int | float | bool | None

_LINK_SCORE = {LinkKind.SYS: 1, LinkKind.NODE: 2, LinkKind.PHB: 3, LinkKind.PXB: 4, LinkKind.PIX: 5}


@frozen
class Fact:
    """One comparable fact of a host."""

    value: Value
    score: float | None = None
    """Higher is better; None when no direction is better (a version, a NUMA node)."""
    gpus: tuple[int, ...] = ()
    """NVML indices the fact is about."""
    measured: bool = False
    """A measured figure: compared with NOISE_FRACTION tolerance."""
    presence: bool = False
    """A fact whose absence is a difference (`NIC mlx5_0` present); any other fact one side lacks is
    unknown there, not different."""


@frozen
class Difference:
    """One fact that differs: its value before (A, or the majority) and after (B, or the odd host)."""

    what: str
    before: Value
    after: Value
    worse: bool | None
    """True when the change is for the worse, False for the better, None when neither."""
    gpus: tuple[int, ...] = ()

    def to_json(self, before_key: str = "a", after_key: str = "b") -> dict[str, object]:
        """The difference as the JSON outputs spell it."""
        return {"what": self.what, before_key: self.before, after_key: self.after, "worse": self.worse,
                "gpus": list(self.gpus)}


def host_facts(host: Host, measurements: Measurements | None = None) -> dict[str, Fact]:
    """Every comparable fact of `host` (and of the measurements taken on it)."""
    facts: dict[str, Fact] = {"GPUs": Fact(len(host.gpus), len(host.gpus), presence=True)}
    for position, gpu in enumerate(host.gpus):
        name, at = f"GPU{gpu.index}", (gpu.index,)
        if gpu.name:
            facts[f"{name} model"] = Fact(gpu.name, gpus=at)
        if gpu.nvlinks:
            up = gpu.nvlink_active_count
            facts[f"{name} NVLinks up"] = Fact(up, up, at)
        if gpu.pcie_width_current is not None:
            facts[f"{name} PCIe width"] = Fact(gpu.pcie_width_current, gpu.pcie_width_current, at)
        if gpu.pcie_width_max is not None:
            facts[f"{name} PCIe max width"] = Fact(gpu.pcie_width_max, gpu.pcie_width_max, at)
        if gpu.pcie_gen_max is not None:
            facts[f"{name} PCIe max generation"] = Fact(gpu.pcie_gen_max, gpu.pcie_gen_max, at)
        if gpu.numa_node is not None:
            facts[f"{name} NUMA node"] = Fact(gpu.numa_node, gpus=at)
        if gpu.mig_enabled is not None:
            facts[f"{name} MIG"] = Fact(gpu.mig_enabled, 0 if gpu.mig_enabled else 1, at)
        if position < len(host.gpu_nic) and host.nics:
            facts[f"{name} nearest NIC path"] = Fact(_nearest_token(host.gpu_nic[position]), gpus=at)
    for link in host.links:
        a, b = host.gpus[link.a].index, host.gpus[link.b].index
        pair = f"GPU{a}-GPU{b}"
        score = 100 + link.nvlink_count if link.kind is LinkKind.NVLINK else _LINK_SCORE.get(link.kind, 0)
        facts[f"{pair} link"] = Fact(link.token, score, (a, b))
        if link.p2p is not None and link.p2p.read is not None:
            facts[f"{pair} P2P read"] = Fact(link.p2p.read, 1 if link.p2p.read == "OK" else 0, (a, b))
    for nic in host.nics:
        subject = f"NIC {nic.name}"
        facts[subject] = Fact("present", 1, presence=True)
        if nic.state is not None:
            facts[f"{subject} state"] = Fact(nic.state, 1 if nic.state.upper() in ("ACTIVE", "UP") else 0)
        if nic.rate_gbit_per_s is not None:
            facts[f"{subject} rate Gb/s"] = Fact(nic.rate_gbit_per_s, nic.rate_gbit_per_s)
        if nic.numa_node is not None:
            facts[f"{subject} NUMA node"] = Fact(nic.numa_node)
        if nic.link_layer is not None:
            facts[f"{subject} link layer"] = Fact(nic.link_layer)
    if host.numa_nodes:
        facts["NUMA nodes"] = Fact(len(host.numa_nodes))
    for node in host.numa_nodes:
        if node.cpus:
            facts[f"NUMA node {node.id} CPUs"] = Fact(node.cpus)
    versions = host.versions
    for label, version in (("driver", versions.driver), ("CUDA driver", versions.cuda_driver), ("NCCL", versions.nccl),
                           ("torch", versions.torch)):
        if version is not None:
            facts[f"{label} version"] = Fact(version)
    caps = host.capabilities
    if caps.iommu_enabled is not None:
        facts["IOMMU"] = Fact("on" if caps.iommu_enabled else "off")
    if caps.iommu_mode is not None:
        facts["IOMMU mode"] = Fact(caps.iommu_mode, 1 if caps.iommu_mode == "identity" else 0)
    if caps.gpudirect_rdma is not None:
        facts["nvidia_peermem loaded"] = Fact(caps.gpudirect_rdma, 1 if caps.gpudirect_rdma else 0)
    if caps.nvlink_fabric is not None:
        facts["NVLink fabric"] = Fact(caps.nvlink_fabric, 1 if caps.nvlink_fabric == "Completed" else 0)
    if measurements is not None:
        facts.update(_measured_facts(host, measurements))
    return facts


def _nearest_token(row: Sequence[str]) -> str | None:
    order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
    known = [token for token in row if token in order]
    return min(known, key=order.index) if known else None


def _measured_facts(host: Host, measurements: Measurements) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    mine = (None, host.hostname)
    for copy in measurements.peer_copies:
        if copy.host in mine and copy.unidir_gbps is not None:
            facts[f"peer copy GPU{copy.src}->GPU{copy.dst} GB/s"] = Fact(copy.unidir_gbps, copy.unidir_gbps,
                                                                          (copy.src, copy.dst), measured=True)
    for host_copy in measurements.host_copies:
        if host_copy.host in mine:
            where = f"NUMA{host_copy.numa_node}" if host_copy.numa_node is not None else "host"
            facts[f"{host_copy.direction} GPU{host_copy.gpu} {where} GB/s"] = Fact(
                host_copy.gbps, host_copy.gbps, (host_copy.gpu,), measured=True)
    for row in measurements.collectives:
        ranks = f"x{row.nranks}" if row.nranks else ""
        place = " in-place" if row.in_place else ""
        group = f" {row.group}" if row.group else ""
        key = f"{row.op}{group} {format_size_bytes(row.size_bytes)} {ranks}{place} busbw GB/s".replace("  ", " ")
        facts[key] = Fact(row.busbw_gbps, row.busbw_gbps, measured=True)
    return facts


def _same(before: Fact, after: Fact) -> bool:
    if before.measured and after.measured and isinstance(before.value, (int, float)) and isinstance(after.value, (int, float)):
        larger = max(abs(before.value), abs(after.value))
        return larger == 0 or abs(before.value - after.value) <= NOISE_FRACTION * larger
    return before.value == after.value


def _worse(before: Fact | None, after: Fact | None) -> bool | None:
    if before is None or after is None:
        present = before if before is not None else after
        if present is None or present.score is None:
            return None
        return after is None
    if before.score is None or after.score is None or before.score == after.score:
        return None
    return after.score < before.score


def _difference(what: str, before: Fact | None, after: Fact | None) -> Difference | None:
    """The difference between two values of one fact (None: the same, or known on one side only)."""
    subject = before if before is not None else after
    if subject is None:
        return None
    if before is not None and after is not None:
        if _same(before, after):
            return None
    elif not subject.presence:
        return None
    return Difference(what, before.value if before else None, after.value if after else None, _worse(before, after),
                      subject.gpus)


def diff_facts(before: dict[str, Fact], after: dict[str, Fact], prefix: str = "") -> list[Difference]:
    """The facts that differ between two hosts' fact sets, in the order the first lists them."""
    found = []
    for what in [*before, *(key for key in after if key not in before)]:
        old, new = before.get(what), after.get(what)
        difference = _difference(what, old, new)
        if difference is not None:
            found.append(difference if not prefix else Difference(f"{prefix}{what}", difference.before,
                                                                  difference.after, difference.worse, difference.gpus))
    return found


def diff_snapshots(a: Snapshot, b: Snapshot) -> list[Difference]:
    """What differs from snapshot `a` to snapshot `b`, host by host (matched by name when both have the
    same names, else by position)."""
    found: list[Difference] = []
    if len(a.hosts) != len(b.hosts):
        found.append(Difference("hosts", len(a.hosts), len(b.hosts), len(b.hosts) < len(a.hosts)))
    by_name = {host.hostname: host for host in b.hosts}
    matched_by_name = len(a.hosts) > 1 and {host.hostname for host in a.hosts} == set(by_name)
    for position, host_a in enumerate(a.hosts):
        host_b = by_name[host_a.hostname] if matched_by_name else b.hosts[position] if position < len(b.hosts) else None
        if host_b is None:
            continue
        prefix = f"{host_a.hostname}: " if len(a.hosts) > 1 else ""
        found += diff_facts(host_facts(host_a, a.measurements), host_facts(host_b, b.measurements), prefix)
    return found


@frozen
class Member:
    """One host among many for `odd_one_out`: a label for people and its facts."""

    label: str
    facts: dict[str, Fact]


@frozen
class OddReport:
    """The hosts that differ from the majority, and the facts on which no majority exists."""

    hosts: int
    odd: tuple[tuple[str, tuple[Difference, ...]], ...]
    """(host label, its differences from the majority), most differences first."""
    split: tuple[str, ...]
    """Facts whose values have no majority (more than half of the hosts agreeing on none)."""


def members_of(snapshots: Iterable[tuple[str, Snapshot]]) -> list[Member]:
    """One member per host of every (file name, snapshot): labelled by host name, with the file when a
    name repeats, and a number when even that repeats (the same file given twice)."""
    pending = [(name, snapshot, host) for name, snapshot in snapshots for host in snapshot.hosts]
    counts = Counter(host.hostname for _, _, host in pending)
    labels = [host.hostname if counts[host.hostname] == 1 else f"{host.hostname} ({name})" for name, _, host in pending]
    repeated = Counter(labels)
    seen: Counter[str] = Counter()
    members = []
    for label, (_, snapshot, host) in zip(labels, pending, strict=True):
        seen[label] += 1
        unique = label if repeated[label] == 1 else f"{label} #{seen[label]}"
        members.append(Member(unique, host_facts(host, snapshot.measurements)))
    return members


K = TypeVar("K", bound=Hashable)


def usual_value(values: Sequence[K]) -> tuple[K, int]:
    """What most have: the most common of `values` and how many have it (the first seen wins a tie). Both the
    odd-one-out of `diff` and the cluster rules of `doctor` and `show` compare each host with it."""
    value, count = Counter(values).most_common(1)[0]
    return value, count


def below_usual_per_gpu(hosts: Sequence[Host], value: Callable[[Host, int], int | None]) -> dict[str, list[tuple[int, int, int]]]:
    """Per host name, the GPUs with less of `value` than the same GPU position has on most hosts:
    (NVML index, its value, the usual value)."""
    positions = max((len(host.gpus) for host in hosts), default=0)
    by_host: dict[str, list[tuple[int, int, int]]] = {}
    for position in range(positions):
        values = [value(host, position) if position < len(host.gpus) else None for host in hosts]
        known = [item for item in values if item is not None]
        if not known:
            continue
        most, _ = usual_value(known)
        for host, item in zip(hosts, values, strict=True):
            if item is not None and item < most:
                by_host.setdefault(host.hostname, []).append((host.gpus[position].index, item, most))
    return by_host


def odd_one_out(members: Sequence[Member]) -> OddReport:
    """The members whose facts differ from what more than half of all members have."""
    total = len(members)
    keys: dict[str, None] = {}
    for member in members:
        keys.update(dict.fromkeys(member.facts))
    odd: dict[str, list[Difference]] = {}
    split = []
    for what in keys:
        facts = [member.facts.get(what) for member in members]
        found = _majority(facts, total)
        if found is _SPLIT:
            split.append(what)
            continue
        majority = None if found is _ABSENT else found
        for member, fact in zip(members, facts, strict=True):
            difference = _difference(what, majority, fact)
            if difference is not None:
                odd.setdefault(member.label, []).append(difference)
    ranked = sorted(odd.items(), key=lambda item: -len(item[1]))
    return OddReport(total, tuple((label, tuple(found)) for label, found in ranked), tuple(split))


_ABSENT = Fact(None)
"""`_majority`'s answer when more than half of the members lack the fact."""
_SPLIT = Fact(None)
"""`_majority`'s answer when no value is shared by more than half."""


def _majority(facts: list[Fact | None], total: int) -> Fact:
    """The fact more than half of the members share (measured: the median, when more than half sit within noise)."""
    present = [fact for fact in facts if fact is not None]
    if len(present) * 2 <= total:
        return _ABSENT if (total - len(present)) * 2 > total else _SPLIT
    if all(fact.measured for fact in present):
        numbers = [fact.value for fact in present if isinstance(fact.value, (int, float))]
        if len(numbers) == len(present):
            median = statistics.median(numbers)
            typical = Fact(median, median, present[0].gpus, measured=True)
            agreeing = sum(1 for fact in present if _same(typical, fact))
            return typical if agreeing * 2 > total else _SPLIT
    value, count = usual_value([fact.value for fact in present])
    if count * 2 <= total:
        return _SPLIT
    return next(fact for fact in present if fact.value == value)


def shown_value(value: Value) -> str:
    """A fact's value for people: `-` where it is absent (a NIC gone, a width not read), never `None`."""
    return "-" if value is None else str(value)
