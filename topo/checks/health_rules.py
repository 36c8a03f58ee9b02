"""The health findings (:mod:`topo.health`) of the GPUs a layout uses, as findings on the ranks placed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from linkscope.topo.checks.context import LayoutContext
from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.common.limits import MAX_FINDING_RANKS
from linkscope.topo.common.memo import remember_last
from linkscope.topo.cost.collectives import GroupLinks
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.step import links_per_group
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.rules import run_health
from linkscope.topo.layout.spec import GROUP_NAMES
from linkscope.topo.machine.links import gpu_nvlink_generation
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.snapshot import Snapshot


@remember_last
def snapshot_health(snapshot: Snapshot) -> tuple[HealthFinding, ...]:
    """The health findings (:mod:`topo.health`) of `snapshot` alone: measurements calibrate check, doctor
    judges them. They do not depend on the layout, so those of the last snapshot are kept: the app
    re-checks one machine on every edit of its form, and on 1,024 hosts the rules take most of a check."""
    return run_health(HealthContext(snapshot))


def health_on_ranks(ctx: LayoutContext) -> list[LayoutFinding]:
    """Health findings on GPUs this layout uses, as findings on the ranks placed there."""
    found = [finding for finding in snapshot_health(ctx.snapshot) if not finding.code.startswith("env-")]
    if not found:
        return []
    ranks_at: dict[tuple[str, int | None], list[int]] = {}
    named = {finding.host for finding in found}
    gpu_of = ctx.placement.gpu_of_rank
    for node, placed in enumerate(ctx.ranks_on_node()):
        host = ctx.placement.hosts[node]
        if host.hostname not in named:  # only the hosts with findings: a few of a thousand
            continue
        for rank in placed:
            for key in ((host.hostname, host.gpus[gpu_of[rank]].index), (host.hostname, None)):
                ranks_at.setdefault(key, []).append(rank)
    dims = [dim for dim in ("tp", "cp", "ep", "dp", "pp") if ctx.layout.size(dim) > 1]
    findings = []
    repairs: _Repairs | None = None
    for health_finding in found:
        keys: list[tuple[str, int | None]] = [(health_finding.host, index) for index in health_finding.gpus]
        keys = keys or [(health_finding.host, None)]
        ranks = sorted({rank for key in keys for rank in ranks_at.get(key, [])})
        if not ranks:
            continue
        dim = _dim_slowed(ctx, dims, health_finding.code, ranks[0])
        message = f"{health_finding.message}; ranks {ranks[:8]}{'...' if len(ranks) > 8 else ''} run there"
        if dim:
            group = ctx.groups[dim][ctx.group_of_rank(dim)[ranks[0]]]
            message += f", and {GROUP_NAMES[dim]} group {group[:8]} waits for {'them' if len(ranks) > 1 else 'it'}"
        repaired = None
        if dim and health_finding.code == "nvlink-fewer-links":
            if repairs is None:
                repairs = _Repairs(ctx, [finding for finding in found if finding.code == "nvlink-fewer-links"])
            repaired = repairs.cost_s(dim, health_finding.host, health_finding.gpus)
            current = ctx.cost_s(dim)
            if repaired is not None and current:
                message += (f"; with its links up, {GROUP_NAMES[dim]} communication would take "
                            f"{(1 - repaired / current) * 100:.0f}% less time per step")
        findings.append(LayoutFinding(health_finding.code, health_finding.severity, dim, tuple(ranks[:MAX_FINDING_RANKS]),
                                message, "", ctx.cost_s(dim) if dim else None, repaired, health_finding.fix))
    return findings


NETWORK_FINDING_WORDS = ("nic", "rail", "peermem")
"""Health findings about a GPU's path to the network (a NIC missing, slower or far, off-rail traffic, no GPUDirect):
they slow the dimensions whose groups leave the node, not the ones inside it (as a narrow PCIe link does on a GPU
whose peers are on NVLink)."""


def _dim_slowed(ctx: LayoutContext, dims: list[str], code: str, rank: int) -> str:
    """The dimension a health finding on `rank`'s GPU slows: for the path to the network the first whose group
    leaves the node (none when every group stays inside), else the first in use."""
    network = any(word in code for word in NETWORK_FINDING_WORDS)
    if "pcie" in code:  # a narrow PCIe link slows the GPU's NIC traffic; its peers too only where they talk over PCIe
        host, position = ctx.placement.hosts[ctx.placement.node_of_rank[rank]], ctx.placement.gpu_of_rank[rank]
        network = gpu_nvlink_generation(host, position) is not None
    if not network:
        return dims[0] if dims else ""
    for dim in dims:
        if ctx.group_leaves_node(dim, ctx.group_of_rank(dim)[rank]):
            return dim
    return ""


class _Repairs:
    """The "with its links up" figures of one check: every host a finding names, with the NVLink pairs of its GPUs
    at the count its other pairs have, priced by one pricer. Repaired hosts alike (one class, the same GPUs short)
    are one class of that pricer, so a cluster with many odd hosts prices each repaired group shape once, whatever
    the number of findings, and each finding looks at the groups on its own hosts only."""

    def __init__(self, ctx: LayoutContext, found: Sequence[HealthFinding]) -> None:
        self.ctx = ctx
        placement = ctx.placement
        self.nodes_of: dict[str, list[int]] = {}
        for node, host in enumerate(placement.hosts):
            self.nodes_of.setdefault(host.hostname, []).append(node)
        self._class_of: dict[tuple[int, frozenset[int]], int | None] = {}
        extra_hosts: list[Host] = []
        extra_classes: list[int] = []
        next_class = max(placement.host_class, default=0) + 1
        for finding in found:
            for node in self.nodes_of.get(finding.host, []):
                key = self._key(node, finding.gpus)
                if key in self._class_of:
                    continue
                repaired = _links_repaired(placement.hosts[node], key[1])
                self._class_of[key] = None if repaired is None else next_class
                if repaired is not None:
                    extra_hosts.append(repaired)
                    extra_classes.append(next_class)
                    next_class += 1
        self._extra_hosts = dict(zip(extra_classes, extra_hosts, strict=True))
        # the repaired hosts ride along as nodes without ranks, so the pricer knows their classes
        self.pricer = GroupPricer(replace(placement, hosts=(*placement.hosts, *extra_hosts),
                                          host_class=(*placement.host_class, *extra_classes)), ctx.pricer.model)
        self._times: dict[tuple[str, GroupLinks], float | None] = {}

    def _key(self, node: int, gpus: Sequence[int]) -> tuple[int, frozenset[int]]:
        host = self.ctx.placement.hosts[node]
        wanted = set(gpus)
        return (self.ctx.placement.host_class[node],
                frozenset(position for position, gpu in enumerate(host.gpus) if gpu.index in wanted))

    def cost_s(self, dim: str, hostname: str, gpus: Sequence[int]) -> float | None:
        """`dim`'s time per step if the NVLink pairs of `gpus` on `hostname` had the count the other pairs have:
        the groups with a rank there priced again, every other group at the time the check gave it."""
        ctx = self.ctx
        placement = ctx.placement
        classes, hosts = list(placement.host_class), list(placement.hosts)
        nodes = self.nodes_of.get(hostname, [])
        for node in nodes:
            repaired_class = self._class_of[self._key(node, gpus)]
            if repaired_class is None:
                return None
            classes[node], hosts[node] = repaired_class, self._extra_hosts[repaired_class]
        if not any(item.dim == dim for item in ctx.traffic):
            return None
        group_of_rank, ranks_on = ctx.group_of_rank(dim), ctx.ranks_on_node()
        touched = {group_of_rank[rank] for node in nodes for rank in ranks_on[node]}
        pricer = self.pricer.rebind(replace(placement, hosts=tuple(hosts), host_class=tuple(classes)))
        groups = ctx.groups[dim]
        known = [time for time in (self._time_s(dim, links) for links in
                                   links_per_group(dim, [groups[index] for index in sorted(touched)], pricer))
                 if time is not None]
        times = ctx.group_times_s(dim)
        slowest_untouched = next((times[index] for index in ctx.slowest_groups(dim) if index not in touched), None)
        if slowest_untouched is not None:
            known.append(slowest_untouched)
        return max(known) if known else None

    def _time_s(self, dim: str, links: GroupLinks) -> float | None:
        key = (dim, links)
        if key not in self._times:
            self._times[key] = self.ctx.dim_time_s(dim, links)
        return self._times[key]


def _links_repaired(host: Host, short: frozenset[int]) -> Host | None:
    """`host` with the NVLink pairs of GPU positions `short` at the count its other pairs have (None: no other pair
    to take the count from)."""
    full = max((link.nvlink_count for link in host.links if link.kind is LinkKind.NVLINK
                and link.a not in short and link.b not in short), default=0)
    if not full:
        return None
    return replace(host, links=tuple(replace(link, nvlink_count=full)
                                     if link.kind is LinkKind.NVLINK and {link.a, link.b} & short else link
                                     for link in host.links))
