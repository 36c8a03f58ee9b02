"""Findings over a job layout on a machine: which group crosses which slow link, and the fix.

`check_layout` expands the layout into process groups (:mod:`topo.layout`), places the ranks
(:mod:`topo.layout.placement`), prices every group's collectives (:mod:`topo.cost`) and reports:

| code | severity | when |
|---|---|---|
| `layout-mismatch` | error | the layout and the machine disagree (a GPU the host lacks, two ranks on one GPU) |
| `layout-rejected-by-megatron` | error | Megatron-Core refuses the layout at start-up (`megatron_refusal`) |
| `tp-crosses-node` | error | a tensor-parallel group spans nodes |
| `tp-slow-link` | warning | a TP group's best ring crosses PCIe on an NVLink box, SYS, or a far slower link than the best |
| `ep-crosses-node` | warning | an expert-parallel group spans nodes |
| `group-imbalance` | warning | groups of one dimension ride different links, so one group straggles |
| `nic-far-from-gpu` | warning | a GPU with cross-node traffic reaches its nearest NIC through the CPU |
| `dp-not-rail-aligned` | info | a DP group uses different local GPUs on different nodes, so its traffic changes rails |
| `layout-underfills` | warning | the layout uses fewer GPUs than the cluster has: the others sit idle |
| `layers-not-divisible` | warning | a named model's layers do not split evenly over pp (or over vpp chunks) |

Layouts whose groups cannot be built at all (sizes that do not divide the world, an order that
leaves out a dimension in use) are bad input (InputError, exit 2), with Megatron's reason where it has one.

plus the health findings of :mod:`topo.health` (a GPU with NVLinks down, a narrow PCIe link...) on the
GPUs the layout places ranks on, with those ranks and the group they slow down.
"""

from __future__ import annotations

from linkscope.topo.checks.context import LayoutContext
from linkscope.topo.checks.health_rules import health_on_ranks, snapshot_health
from linkscope.topo.checks.layout_rules import layers_not_divisible, rejected_by_megatron, underfills
from linkscope.topo.checks.link_rules import (
    dp_not_rail_aligned,
    ep_crosses_node,
    group_imbalance,
    nic_far_from_gpu,
    tp_crosses_node,
    tp_slow_link,
)
from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.checks.request import CheckRequest, model_for, volume_assumptions
from linkscope.topo.checks.suggest import suggest_layout
from linkscope.topo.common.errors import InputError
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.cost.step import step_costs
from linkscope.topo.layout.groups import build_groups, order_needs
from linkscope.topo.layout.placement import (
    LayoutMismatch,
    cluster_hosts,
    place_from_rank_map,
    place_ranks,
)
from linkscope.topo.layout.spec import resolve_layout
from linkscope.topo.layout.volumes import step_traffic
from linkscope.topo.model.findings import SEVERITIES
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot

FINDING_CODES: tuple[str, ...] = (
    "layout-mismatch",
    "layout-rejected-by-megatron",
    "tp-crosses-node",
    "tp-slow-link",
    "ep-crosses-node",
    "group-imbalance",
    "nic-far-from-gpu",
    "dp-not-rail-aligned",
    "layout-underfills",
    "layers-not-divisible",
)


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
    cost_model = request.cost_model or CostModel()
    if measurements is not None:
        cost_model = calibrate(cost_model, measurements, hosts[0])
    assumptions = (*assumptions, volume_assumptions(spec, layout))
    if measurements is not None:
        assumptions = (*assumptions, f"cost model calibrated from measurements ({measurements.source})")
    if layout.order:
        assumptions = (*assumptions, f"these groups are what {order_needs(layout)} builds")
    traffic = step_traffic(spec, {**dict(layout.sizes), "vpp": layout.vpp}, layout.gradient_groups())
    pricer = GroupPricer(placement, cost_model)
    context = LayoutContext(layout, groups, placement, pricer, traffic, {})
    costs = step_costs(groups, pricer, traffic, context.links)
    context.costs.update({cost.dim: cost for cost in costs})
    findings = [
        *rejected_by_megatron(context),
        *layers_not_divisible(context, spec, given=request.model is not None or request.model_spec is not None),
        *tp_crosses_node(context),
        *tp_slow_link(context),
        *ep_crosses_node(context),
        *group_imbalance(context),
        *nic_far_from_gpu(context, cost_model),
        *dp_not_rail_aligned(context),
        *underfills(context, hosts, capacity, request),
        *health_on_ranks(context, snapshot_health(snapshot)),
    ]
    findings.sort(key=lambda finding: -SEVERITIES.index(finding.severity))
    suggestion = None
    if suggest and request.rank_map is None:
        suggestion = suggest_layout(layout, placement, pricer, traffic, request.distribution, request.visible_devices)
    repeated = len({id(host) for host in placement.hosts}) == 1 and len(placement.hosts) > 1
    hostnames = tuple(f"{host.hostname}#{node}" if repeated else host.hostname for node, host in enumerate(placement.hosts))
    return CheckReport(groups, placement.pairs(), tuple(findings), suggestion, layout, costs, placement.description,
                       hostnames, assumptions, pricer.ring_order)
