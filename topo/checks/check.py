"""Findings over a job layout on a machine: which group crosses which slow link, and the fix.

`check_layout` expands the layout into process groups (:mod:`topo.layout`), places the ranks
(:mod:`topo.layout.placement`), prices every group's collectives (:mod:`topo.cost`) and runs every rule of
:mod:`topo.checks.rules` (the table of codes is there) over the result.

Layouts whose groups cannot be built at all (sizes that do not divide the world, an order that
leaves out a dimension in use) are bad input (InputError, exit 2), with Megatron's reason where it has one.
"""

from __future__ import annotations

from linkscope.topo.checks.context import LayoutContext
from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.checks.request import CheckRequest, model_for, volume_assumptions
from linkscope.topo.checks.rules import RULES
from linkscope.topo.checks.suggest import suggest_layout
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.memo import remember_last
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.cost.step import step_costs
from linkscope.topo.layout.groups import build_groups, order_needs
from linkscope.topo.layout.placement import (
    LayoutMismatch,
    Placement,
    cluster_hosts,
    place_from_rank_map,
    place_ranks,
)
from linkscope.topo.layout.spec import resolve_layout
from linkscope.topo.layout.volumes import step_traffic
from linkscope.topo.model.findings import SEVERITIES
from linkscope.topo.model.host import Host
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot

DEFAULT_COST_MODEL = CostModel()
"""The cost model of a check that names none (one object, so checks of one snapshot share their pricing)."""


@remember_last
def _hosts_pricer(hosts: tuple[Host, ...], host_class: tuple[int, ...], cost_model: CostModel) -> GroupPricer:
    """A pricer of these hosts whose memos (hops, rings, group shapes: they depend on the hosts, not on the ranks)
    the next check of the same hosts reuses: the app re-checks one snapshot on every edit of its Ranks form."""
    return GroupPricer(Placement(hosts, host_class, (), (), ""), cost_model)


def check_layout(
    snapshot: Snapshot,
    request: CheckRequest,
    measurements: Measurements | None = None,
    suggest: bool = False,
) -> CheckReport:
    """Expand, place and price the layout of `request` on `snapshot`; return groups and findings.

    Raises InputError for bad input (unknown dimensions, sizes that do not fit); returns a
    `layout-mismatch` finding when the layout and the machine disagree.
    """
    hosts, classes = cluster_hosts(snapshot, request.nodes if request.rank_map is None else 1)
    if request.rank_map is not None:
        capacity = len(request.rank_map)
    elif request.visible_devices is not None:
        capacity = len(request.visible_devices) * len(hosts)
    else:
        capacity = min(len(host.gpus) for host in hosts) * len(hosts)
    layout = resolve_layout(request.sizes, capacity, request.order, request.mesh, request.etp, request.vpp,
                            request.mesh_roles, request.optimizer_instances)
    spec, assumptions = model_for(request)
    if layout.optimizer_instances > 1 and spec.zero_stage not in (1, 2):
        raise InputError(f"--optimizer-instances {layout.optimizer_instances}: needs Megatron's distributed optimizer "
                         f"(--zero 1 or 2), not ZeRO-{spec.zero_stage}")
    groups = build_groups(layout)
    try:
        if request.rank_map is not None:
            placement = place_from_rank_map(snapshot, request.rank_map, layout.world_size)
        else:
            placement = place_ranks(hosts, classes, layout.world_size, request.distribution, request.visible_devices)
    except LayoutMismatch as mismatch:
        finding = LayoutFinding("layout-mismatch", "error", "", mismatch.ranks, mismatch.message,
                          fix="make the rank map / visible devices match the GPUs the machine has")
        return CheckReport(groups, (), (finding,), None, layout)
    cost_model = request.cost_model or DEFAULT_COST_MODEL
    if measurements is not None:
        cost_model = calibrate(cost_model, measurements, hosts[0])
    assumptions = (*assumptions, volume_assumptions(spec, layout))
    if measurements is not None:
        assumptions = (*assumptions, f"cost model calibrated from measurements ({measurements.source})")
    if layout.order:
        assumptions = (*assumptions, f"these groups are what {order_needs(layout)} builds")
    traffic = step_traffic(spec, {**dict(layout.sizes), "vpp": layout.vpp}, layout.gradient_groups())
    pricer = _hosts_pricer(placement.hosts, placement.host_class, cost_model).rebind(placement)
    context = LayoutContext(snapshot, request, spec, hosts, capacity, cost_model, layout, groups, placement, pricer,
                            traffic, {})
    costs = step_costs(groups, pricer, traffic, context.links)
    context.costs.update({cost.dim: cost for cost in costs})
    findings = [finding for rule in RULES for finding in rule(context)]
    findings.sort(key=lambda finding: -SEVERITIES.index(finding.severity))
    suggestion = None
    if suggest and request.rank_map is None:
        suggestion = suggest_layout(layout, placement, pricer, traffic, request.distribution, request.visible_devices)
    repeated = len({id(host) for host in placement.hosts}) == 1 and len(placement.hosts) > 1
    hostnames = tuple(f"{host.hostname}#{node}" if repeated else host.hostname for node, host in enumerate(placement.hosts))
    return CheckReport(groups, placement.pairs(), tuple(findings), suggestion, layout, costs, placement.description,
                       hostnames, assumptions, pricer.ring_order)
