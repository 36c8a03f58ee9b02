"""The health findings (:mod:`topo.health`) of the GPUs a layout uses, as findings on the ranks placed there.
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.topo.checks.context import LayoutContext
from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.common.limits import MAX_FINDING_RANKS
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.step import links_per_group
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.rules import run_health
from linkscope.topo.layout.spec import GROUP_NAMES
from linkscope.topo.machine.links import gpu_nvlink_generation
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.snapshot import Snapshot

_last_health: tuple[Snapshot, tuple[HealthFinding, ...]] | None = None


def snapshot_health(snapshot: Snapshot) -> tuple[HealthFinding, ...]:
    """The health findings (:mod:`topo.health`) of `snapshot` alone: measurements calibrate check, doctor
    judges them. They do not depend on the layout, so those of the last snapshot are kept: the app
    re-checks one machine on every edit of its form, and on 1,024 hosts the rules take most of a check."""
    global _last_health
    last = _last_health
    if last is not None and last[0] is snapshot:  # snapshots are frozen: the same object, the same findings
        return last[1]
    found = run_health(HealthContext(snapshot))
    _last_health = (snapshot, found)
    return found


def health_on_ranks(ctx: LayoutContext) -> list[LayoutFinding]:
    """Health findings on GPUs this layout uses, as findings on the ranks placed there."""
    found = [finding for finding in snapshot_health(ctx.snapshot) if not finding.code.startswith("env-")]
    if not found:
        return []
    ranks_at: dict[tuple[str, int | None], list[int]] = {}
    named = {finding.host for finding in found}
    gpu_of = ctx.placement.gpu_of_rank
    for node, ranks in enumerate(ctx.ranks_on_node()):
        host = ctx.placement.hosts[node]
        if host.hostname not in named:  # only the hosts with findings: a few of a thousand
            continue
        for rank in ranks:
            for key in ((host.hostname, host.gpus[gpu_of[rank]].index), (host.hostname, None)):
                ranks_at.setdefault(key, []).append(rank)
    dims = [dim for dim in ("tp", "cp", "ep", "dp", "pp") if ctx.layout.size(dim) > 1]
    findings = []
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
            repaired = _cost_with_links_repaired(ctx, dim, health_finding.host, set(health_finding.gpus))
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
    nodes = ctx.placement.node_of_rank
    for dim in dims:
        group = ctx.groups[dim][ctx.group_of_rank(dim)[rank]]
        if len({nodes[member] for member in group}) > 1:
            return dim
    return ""


def _cost_with_links_repaired(ctx: LayoutContext, dim: str, hostname: str, gpus: set[int]) -> float | None:
    """`dim`'s time per step if the NVLink pairs of `gpus` on `hostname` had the count the other pairs have.

    Only the groups on hosts whose pricing the repair changes are priced again; every other group keeps the time
    the check gave it, so a cluster with many odd hosts costs a check one pricing of each group, not one per finding."""
    repaired: dict[int, Host] = {}
    for host in ctx.placement.hosts:
        if host.hostname != hostname or id(host) in repaired:
            continue
        short = {position for position, gpu in enumerate(host.gpus) if gpu.index in gpus}
        full = max((link.nvlink_count for link in host.links if link.kind is LinkKind.NVLINK
                    and link.a not in short and link.b not in short), default=0)
        if not full:
            return None
        links = tuple(replace(link, nvlink_count=full) if link.kind is LinkKind.NVLINK and {link.a, link.b} & short else link
                      for link in host.links)
        repaired[id(host)] = replace(host, links=links)
    # the repaired hosts become a class of their own: only the groups with a rank on them are priced again,
    # and every other group keeps the time the check gave it
    new_class = max(ctx.placement.host_class, default=0) + 1
    placement = replace(ctx.placement, hosts=tuple(repaired.get(id(host), host) for host in ctx.placement.hosts),
                        host_class=tuple(new_class if id(host) in repaired else host_class
                                         for host, host_class in zip(ctx.placement.hosts, ctx.placement.host_class,
                                                                     strict=True)))
    items = [item for item in ctx.traffic if item.dim == dim]
    if not items:
        return None
    group_of_rank, ranks_on = ctx.group_of_rank(dim), ctx.ranks_on_node()
    touched = {group_of_rank[rank] for node, host in enumerate(ctx.placement.hosts) if id(host) in repaired
               for rank in ranks_on[node]}
    groups = ctx.groups[dim]
    again = links_per_group(dim, [groups[index] for index in touched], GroupPricer(placement, ctx.pricer.model))
    known = [time for time in (ctx.dim_time_s(dim, links) for links in again) if time is not None]
    times = ctx.group_times_s(dim)
    slowest_untouched = next((times[index] for index in ctx.slowest_groups(dim) if index not in touched), None)
    if slowest_untouched is not None:
        known.append(slowest_untouched)
    return max(known) if known else None
