"""Findings over a job layout on a machine: which group crosses which slow link, and the fix.

`check_layout` expands the layout into process groups (:mod:`topo.layout`), places the ranks
(:mod:`topo.placement`), prices every group's collectives (:mod:`topo.cost`) and reports:

| code | severity | when |
|---|---|---|
| `layout-mismatch` | error | the layout and the machine disagree (a GPU the host lacks, two ranks on one GPU) |
| `layout-rejected-by-megatron` | error | Megatron-Core refuses the layout at start-up (:func:`topo.layout.megatron_refusal`) |
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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.topo.cluster import is_domain
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.collectives import GroupLinks, collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel, nic_path_class
from linkscope.topo.cost.step import DimensionCost, links_per_group, step_costs
from linkscope.topo.errors import InputError
from linkscope.topo.health import HealthContext, HealthFinding, run_health
from linkscope.topo.layout import (
    DEFAULT_ORDER,
    GROUP_NAMES,
    Layout,
    build_groups,
    megatron_refusal,
    order_needs,
    resolve_layout,
)
from linkscope.topo.links import gpu_nvlink_generation
from linkscope.topo.model import Host, LinkKind, Measurements, Snapshot
from linkscope.topo.placement import LayoutMismatch, Placement, RankMapEntry, cluster_hosts, place_from_rank_map, place_ranks
from linkscope.topo.severity import SEVERITIES, reaches, worst_severity
from linkscope.topo.suggest import Suggestion, best_partition, largest_clean_size, ring_is_slow, suggest_layout
from linkscope.topo.units import format_gbps
from linkscope.topo.volumes import DEFAULT_PRESET, ModelSpec, Traffic, microbatches, preset, step_traffic

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

IMBALANCE_RATIO = 1.1
"""Groups of one dimension whose ring bandwidths differ by more than this factor are imbalanced."""

MAX_FINDING_RANKS = 64
"""A finding lists at most this many ranks (its message gives the full count)."""


@dataclass(frozen=True)
class CheckRequest:
    """Everything the command-line flags (or the app's form) say about the job."""

    sizes: tuple[tuple[str, int], ...] = ()
    """E.g. (("tp", 8), ("pp", 4)); missing dimensions are 1; dp, when absent, is inferred."""
    order: str = DEFAULT_ORDER
    mesh: tuple[tuple[str, int], ...] | None = None
    """DeviceMesh shape, outermost first, instead of an order."""
    mesh_roles: tuple[tuple[str, str], ...] = ()
    """Roles of mesh dimensions whose names do not say it (`dp_shard` is fsdp by default)."""
    etp: int | None = None
    """Expert tensor-parallel size (Megatron's --expert-tensor-parallel-size); None = tp."""
    vpp: int = 1
    """Virtual pipeline stages per rank (interleaved schedule)."""
    optimizer_instances: int = 1
    """Megatron's --num-distributed-optimizer-instances."""
    nodes: int = 1
    distribution: str = "block"
    visible_devices: tuple[int, ...] | None = None
    model: str | None = None
    """Preset name (`8b`, `70b`, `8x7b`...); sets the per-step volumes."""
    model_spec: ModelSpec | None = None
    """A full model description; wins over `model`."""
    rank_map: tuple[RankMapEntry, ...] | None = None
    """Explicit placement; replaces nodes / distribution / visible_devices."""
    cost_model: CostModel | None = None
    """Link parameters (defaults when None)."""


@dataclass(frozen=True)
class Finding:
    """One problem of the layout on this machine, with the link, the cost and the fix."""

    code: str
    severity: str
    dim: str
    ranks: tuple[int, ...]
    message: str
    link: str = ""
    """The link it crosses, e.g. `SYS`, `mlx5_0 400 Gb/s`."""
    cost_s: float | None = None
    """Predicted communication time per step of the dimension as laid out."""
    best_cost_s: float | None = None
    """The same with the best alternative (None when there is none)."""
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        """The finding as the JSON contract spells it."""
        return {
            "code": self.code,
            "severity": self.severity,
            "dim": self.dim,
            "ranks": list(self.ranks),
            "message": self.message,
            "link": self.link,
            "cost_s": self.cost_s,
            "best_cost_s": self.best_cost_s,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class CheckReport:
    """The result of a check: groups, placement, findings, predicted costs and a suggestion."""

    groups: dict[str, list[list[int]]]
    placement: tuple[tuple[int, int], ...]
    """rank -> (node index, GPU position on that host)."""
    findings: tuple[Finding, ...]
    suggestion: Suggestion | None
    layout: Layout | None = None
    costs: tuple[DimensionCost, ...] = ()
    placement_description: str = ""
    hostnames: tuple[str, ...] = ()
    """Per node."""
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    ring_order: Callable[[Sequence[int]], tuple[int, ...]] | None = field(default=None, compare=False, repr=False)
    """A group's ranks in the order of the ring the costs were priced on (the pricer's); asked per group drawn,
    since ordering every group of 8,192 ranks would cost more than the check itself."""

    def ring(self, dim: str, number: int) -> tuple[int, ...]:
        """The ranks of group `number` of `dim` in the order of its priced ring (rank order when not priced)."""
        members = self.groups[dim][number]
        return self.ring_order(members) if self.ring_order is not None else tuple(members)

    def worst_severity(self) -> str | None:
        """The most severe finding's severity, or None without findings."""
        return worst_severity(finding.severity for finding in self.findings)

    def fails(self, fail_on: str) -> bool:
        """True when a finding is at or above `fail_on` (error | warning | info)."""
        return reaches((finding.severity for finding in self.findings), fail_on)

    @property
    def step_time_s(self) -> float:
        """Predicted communication time per step (all dimensions, no overlap)."""
        return sum(cost.time_s for cost in self.costs)

    def to_json(self) -> dict[str, Any]:
        """One JSON object: `groups` and `findings` per the contract, plus layout, placement, costs."""
        layout = None
        if self.layout is not None:
            layout = {
                "sizes": {**dict(self.layout.sizes), "edp": self.layout.size("edp")},
                "vpp": self.layout.vpp,
                "optimizer_instances": self.layout.optimizer_instances,
                "world_size": self.layout.world_size,
                "order": "-".join(self.layout.order) if self.layout.order else None,
                "mesh": self.layout.order_string if self.layout.mesh else None,
                "mesh_roles": {dim.name: dim.role for dim in self.layout.mesh} if self.layout.mesh else None,
                "gradient_groups": [group.dim for group in self.layout.gradient_groups()],
                "started_by": order_needs(self.layout),
            }
        suggestion = None
        if self.suggestion is not None:
            suggestion = {
                "order": self.suggestion.order,
                "distribution": self.suggestion.distribution,
                "visible_devices": list(self.suggestion.visible_devices) if self.suggestion.visible_devices else None,
                "flags": list(self.suggestion.flags),
                "env": dict(self.suggestion.env),
                "time_s": self.suggestion.time_s,
                "current_time_s": self.suggestion.current_time_s,
                "speedup": self.suggestion.speedup,
                "needs": self.suggestion.needs,
            }
        return {
            "layout": layout,
            "placement": {
                "description": self.placement_description,
                "hosts": list(self.hostnames),
                "ranks": [list(pair) for pair in self.placement],
            },
            "groups": self.groups,
            "findings": [finding.to_json() for finding in self.findings],
            "costs": [
                {
                    "dim": cost.dim,
                    "time_s": cost.time_s,
                    "link": cost.link_label,
                    "link_class": cost.link_class,
                    "slowest_ranks": list(cost.slowest_ranks),
                    "ops": [
                        {"op": op.op, "size_bytes": op.size_bytes, "calls_per_step": op.calls_per_step, "algo": op.algo,
                         "time_per_call_s": op.time_per_call_s, "time_per_step_s": op.time_per_step_s}
                        for op in cost.ops
                    ],
                }
                for cost in self.costs
            ],
            "step_time_s": self.step_time_s,
            "suggestion": suggestion,
            "assumptions": list(self.assumptions),
        }


MOE_DEFAULT_PRESET = "8x7b"
"""Assumed when a layout has expert parallelism but no model is given."""


def model_for(request: CheckRequest) -> tuple[ModelSpec, tuple[str, ...]]:
    """The model that sets the volumes, and a note when it was assumed rather than given.

    InputError where Megatron's training script refuses the model with the layout: --ep > 1 on a
    dense model, or a number of experts that --ep does not divide.
    """
    ep = dict(request.sizes).get("ep", 1)
    notes: tuple[str, ...] = ()
    if request.model_spec is not None:
        spec = request.model_spec
    elif request.model is not None:
        spec = preset(request.model)
    else:
        name = MOE_DEFAULT_PRESET if ep > 1 else DEFAULT_PRESET
        spec = preset(name)
        notes = (f"no model given: volumes of the {name} preset (--model, --hidden... to change)",)
    if ep > 1 and not spec.experts:
        raise InputError(f"--ep {ep}: num_experts must be given to use expert model parallelism (Megatron's rule): "
                         f"add --experts N or a mixture-of-experts --model such as {MOE_DEFAULT_PRESET}")
    if spec.experts and spec.experts % ep:
        raise InputError(f"--experts {spec.experts}: Number of experts should be a multiple of expert model "
                         f"parallel_size (--ep {ep}, Megatron's rule)")
    return spec, notes


def volume_assumptions(spec: ModelSpec, layout: Layout) -> str:
    """What the per-step times rest on: the model, the batch, the sequence and the optimizer."""
    dp = layout.size("dp")
    count = microbatches(spec, dp)
    styles = {group.style for group in layout.gradient_groups()}
    if "shard" in styles:
        zero = "FSDP over the fsdp group (the mesh roles decide, not --zero)"
    elif styles == {"replicate"}:
        zero = "gradients all_reduced (replicate roles, not --zero)"
    else:
        zero = {0: "plain DP all_reduce (ZeRO-0)", 1: "distributed optimizer (ZeRO-1)", 2: "ZeRO-2",
                3: "FSDP/ZeRO-3"}[min(spec.zero_stage, 3)]
    vpp = f", {layout.vpp} virtual stages per rank" if layout.vpp > 1 else ""
    experts = f", {spec.experts} experts top-{spec.top_k}" if spec.experts else ""
    return (f"per-step volumes: model {spec.name} ({spec.params / 1e9:.3g}B params, hidden {spec.hidden}, "
            f"{spec.layers} layers{experts}), sequence length {spec.seq}, micro-batch {spec.micro_batch}, "
            f"global batch {spec.global_batch} sequences = {count} micro-batches per pipeline over dp {dp}{vpp}, "
            f"{zero}, {spec.dtype_bytes}-byte elements")


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
        finding = Finding("layout-mismatch", "error", "", mismatch.ranks, mismatch.message,
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
    context = _Context(layout, groups, placement, pricer, traffic, {})
    costs = step_costs(groups, pricer, traffic, context.links)
    context.costs.update({cost.dim: cost for cost in costs})
    findings = [
        *_rejected_by_megatron(context),
        *_layers_not_divisible(context, spec, given=request.model is not None or request.model_spec is not None),
        *_tp_crosses_node(context),
        *_tp_slow_link(context),
        *_ep_crosses_node(context),
        *_group_imbalance(context),
        *_nic_far_from_gpu(context, cost_model),
        *_dp_not_rail_aligned(context),
        *_underfills(context, hosts, capacity, request),
        *_health(context, snapshot_health(snapshot)),
    ]
    findings.sort(key=lambda finding: -SEVERITIES.index(finding.severity))
    suggestion = None
    if suggest and request.rank_map is None:
        suggestion = suggest_layout(layout, placement, pricer, traffic, request.distribution, request.visible_devices)
    repeated = len({id(host) for host in placement.hosts}) == 1 and len(placement.hosts) > 1
    hostnames = tuple(f"{host.hostname}#{node}" if repeated else host.hostname for node, host in enumerate(placement.hosts))
    return CheckReport(groups, placement.pairs(), tuple(findings), suggestion, layout, costs, placement.description,
                       hostnames, assumptions, pricer.ring_order)


@dataclass
class _Context:
    layout: Layout
    groups: dict[str, list[list[int]]]
    placement: Placement
    pricer: GroupPricer
    traffic: list[Traffic]
    costs: dict[str, DimensionCost]
    _links: dict[str, list[GroupLinks]] = field(default_factory=dict)

    def links(self, dim: str) -> list[GroupLinks]:
        if dim not in self._links:
            self._links[dim] = links_per_group(dim, self.groups[dim], self.pricer)
        return self._links[dim]

    def dim_time_s(self, dim: str, links: GroupLinks) -> float | None:
        items = [item for item in self.traffic if item.dim == dim]
        if not items:
            return None
        return sum(collective_cost(item.op, links, item.size_bytes).time_s * item.calls_per_step for item in items)

    def partition_time_s(self, dim: str, host_class: int, groups: tuple[tuple[int, ...], ...]) -> float | None:
        """`dim`'s time per step with its groups on these GPU sets of one host: the slowest group sets the pace."""
        times = [self.dim_time_s(dim, self.pricer.links_of(((host_class, tuple(sorted(group))),), len(group)))
                 for group in groups]
        known = [time for time in times if time is not None]
        return max(known) if known else None

    def cost_s(self, dim: str) -> float | None:
        cost = self.costs.get(dim)
        return cost.time_s if cost is not None else None

    def gpus_per_node(self) -> int:
        counts: dict[int, int] = {}
        for node in self.placement.node_of_rank:
            counts[node] = counts.get(node, 0) + 1
        return max(len(host.gpus) for host in self.placement.hosts) if not counts else max(
            max(counts.values()), min(len(host.gpus) for host in self.placement.hosts))


def _pp_last(order: tuple[str, ...]) -> str:
    """`order` with pp moved to the end (Megatron accepts every such order)."""
    return "-".join((*(dim for dim in order if dim != "pp"), "pp"))


def _rejected_by_megatron(ctx: _Context) -> list[Finding]:
    reason = megatron_refusal(ctx.layout)
    if reason is None:
        return []
    message = (f"Megatron-Core refuses this layout at start-up (initialize_model_parallel): \"{reason}\"; "
               f"the groups shown are what it would have built")
    fix = f"put pp last: --order {_pp_last(ctx.layout.order)}"
    return [Finding("layout-rejected-by-megatron", "error", "pp", _ranks(ctx.groups["pp"][0]), message, fix=fix)]


def _layers_not_divisible(ctx: _Context, spec: ModelSpec, given: bool) -> list[Finding]:
    """Megatron-Core builds an even pipeline only when the layers split evenly: num_layers % pp == 0, and with
    an interleaved schedule (layers per pipeline rank) % vpp == 0 (get_num_layers_to_build asserts both, at
    model build). An uneven split needs the first/last stage sizes given. Judged only for a model the user named."""
    pp, vpp, layers = ctx.layout.size("pp"), ctx.layout.vpp, spec.layers
    if not given or pp < 2 or ctx.layout.mesh:
        return []
    if layers % pp:
        room = pp * ctx.layout.size("dp")  # pp can trade ranks with dp at the same world size
        fits = [size for size in range(2, room + 1) if room % size == 0 and layers % size == 0]
        message = (f"{spec.name}'s {layers} layers do not split evenly over pp {pp}: Megatron-Core asserts "
                   f"\"num_layers should be divisible by pipeline_model_parallel_size\" when it builds the model")
        uneven = ("an uneven split: --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (the "
                  "other stages must then split the rest evenly)")
        fix = f"--pp {' or '.join(map(str, fits[:6]))} (dp takes the rest), or {uneven}" if fits else uneven
    elif vpp > 1 and (layers // pp) % vpp:
        per_rank = layers // pp
        fits = [size for size in range(2, per_rank + 1) if per_rank % size == 0]
        message = (f"{spec.name}'s {layers} layers give {per_rank} per pipeline rank, which --vpp {vpp} model chunks "
                   f"do not split evenly: Megatron-Core asserts num_layers_per_pipeline_rank % vpp == 0")
        fix = f"--vpp {' or '.join(map(str, fits[:6]))}" if fits else "no interleaving (--vpp 1)"
    else:
        return []
    return [Finding("layers-not-divisible", "warning", "pp", _ranks(ctx.groups["pp"][0]), message, fix=fix)]


def _underfills(ctx: _Context, hosts: tuple[Host, ...], capacity: int, request: CheckRequest) -> list[Finding]:
    world = ctx.layout.world_size
    if request.rank_map is not None or world >= capacity:
        return []
    used: dict[int, set[int]] = {}
    for node, position in zip(ctx.placement.node_of_rank, ctx.placement.gpu_of_rank, strict=True):
        used.setdefault(node, set()).add(position)
    idle: list[str] = []
    for node, host in enumerate(hosts):
        positions = ([position for position, gpu in enumerate(host.gpus) if gpu.index in request.visible_devices]
                     if request.visible_devices is not None else range(len(host.gpus)))
        free = [host.gpus[position].index for position in positions if position not in used.get(node, set())]
        if free:
            name = host.hostname or f"node {node}"
            gpus = f"GPUs {','.join(map(str, free))}"
            idle.append(f"{name}#{node} {gpus}" if len(hosts) > 1 else gpus)
    shown = "; ".join(idle[:4]) + (f"; ... ({len(idle)} nodes in all)" if len(idle) > 4 else "")
    message = f"the layout uses {world} of the {capacity} GPUs; {capacity - world} sit idle: {shown}"
    fixed = world // max(1, ctx.layout.size("dp"))
    if ctx.layout.mesh:
        fix = f"make the --mesh sizes multiply to {capacity}, or use fewer --nodes"
    elif capacity % fixed == 0:
        fix = f"give --dp {capacity // fixed} (or leave --dp out) to use every GPU, or fewer --nodes"
    else:
        fix = "use fewer --nodes or --visible-devices so the cluster matches the layout"
    return [Finding("layout-underfills", "warning", "", (), message, fix=fix)]


def _ranks(group: list[int]) -> tuple[int, ...]:
    return tuple(group[:MAX_FINDING_RANKS])


def _gbps(value: float) -> str:
    return format_gbps(value)


def _spanning_nodes(ctx: _Context, dim: str) -> tuple[list[GroupLinks], list[int]]:
    """The links of every `dim` group, and the indices of the groups that span more than one node."""
    links = ctx.links(dim)
    return links, [index for index, item in enumerate(links) if item.nodes > 1]


def _tp_crosses_node(ctx: _Context) -> list[Finding]:
    tp = ctx.layout.size("tp")
    if tp < 2:
        return []
    links, crossing = _spanning_nodes(ctx, "tp")
    if not crossing:
        return []
    first = crossing[0]
    per_node = len(ctx.placement.hosts[0].gpus)
    host_class = ctx.placement.host_class[0]
    best_cost = None
    if tp <= per_node and per_node % tp == 0:
        partition = best_partition(ctx.pricer, host_class, tp)
        if partition is not None:
            best_cost = ctx.partition_time_s("tp", host_class, partition.groups)
        order, mesh = ctx.layout.order, [dim.name for dim in ctx.layout.mesh]
        tp_names = [dim.name for dim in ctx.layout.mesh if dim.role == "tp"]
        if order and any(ctx.layout.size(dim) > 1 for dim in order[: order.index("tp")]):
            tp_first = ("tp", *(name for name in order if name != "tp"))
            candidate = replace(ctx.layout, order=tp_first)
            better = "-".join(tp_first) if megatron_refusal(candidate) is None else "tp-" + _pp_last(tp_first[1:])
            fix = f"put tp first in the order (--order {better}) so TP groups are consecutive local ranks"
        elif tp_names and any(ctx.layout.size(dim) > 1 for dim in mesh[mesh.index(tp_names[-1]) + 1 :]):
            fix = "make tp the last (fastest) --mesh dimension so TP groups are consecutive local ranks"
        else:
            fix = "use block placement (--distribution block, torchrun's default) so consecutive ranks share a node"
    else:
        divisors = [size for size in range(min(tp, per_node), 0, -1) if per_node % size == 0]
        fix = f"TP {tp} does not fit the {per_node} GPUs of one node: use --tp {divisors[0]} (and more pp or dp)"
    crossed = links[first]
    node = "NVLink domain" if is_domain(ctx.placement.hosts[0]) else "node"
    message = (f"{len(crossing)} of {len(links)} TP groups span {node}s, so tensor-parallel collectives cross "
               f"{crossed.net_description} instead of the links inside {'an' if node[0] == 'N' else 'a'} {node}")
    return [Finding("tp-crosses-node", "error", "tp", _ranks(ctx.groups["tp"][first]), message, links[first].net_label,
                    ctx.cost_s("tp"), best_cost, fix)]


def _tp_slow_link(ctx: _Context) -> list[Finding]:
    tp = ctx.layout.size("tp")
    if tp < 2:
        return []
    links = ctx.links("tp")
    slow: list[int] = []
    best_by_class = {}
    for index, item in enumerate(links):
        if item.nodes > 1:
            continue
        node = ctx.placement.node_of_rank[ctx.groups["tp"][index][0]]
        host_class = ctx.placement.host_class[node]
        if host_class not in best_by_class:
            best_by_class[host_class] = best_partition(ctx.pricer, host_class, tp)
        partition = best_by_class[host_class]
        best_gbps = partition.bottleneck_gbps if partition is not None else math.inf
        if ring_is_slow(ctx.placement.hosts[node], item.intra_class, item.intra_gbps, best_gbps):
            slow.append(index)
    if not slow:
        return []
    worst = min(slow, key=lambda index: links[index].intra_gbps)
    item = links[worst]
    node = ctx.placement.node_of_rank[ctx.groups["tp"][worst][0]]
    host_class = ctx.placement.host_class[node]
    host = ctx.placement.hosts[node]
    partition = best_by_class[host_class]
    message = (f"{len(slow)} of {len(links)} TP groups ride a slow link: the best ring through ranks "
               f"{ctx.groups['tp'][worst][:8]} crosses {item.intra_label} ({_gbps(item.intra_gbps)})")
    best_cost = None
    if partition is not None and not ring_is_slow(host, partition.bottleneck_class, partition.bottleneck_gbps,
                                                  partition.bottleneck_gbps):
        devices = ",".join(str(host.gpus[position].index) for position in partition.device_order)
        best_cost = ctx.partition_time_s("tp", host_class, partition.groups)
        best_ring = f"{partition.bottleneck_label}, {_gbps(partition.bottleneck_gbps)}"
        message += f"; another permutation avoids it (best TP ring {best_ring})"
        fix = f"CUDA_VISIBLE_DEVICES={devices} with tp first in the order (or run with --suggest)"
    else:
        clean = largest_clean_size(ctx.pricer, host_class, tp)
        message += f"; no order or permutation avoids it on this machine: TP {tp} must shrink"
        if clean > 1:
            fix = f"use --tp {clean} (or less) on this machine; every {tp}-GPU ring here crosses a slow link"
        else:
            fix = "use --tp 1 and data or pipeline parallelism: every GPU pair here crosses a slow link"
        if clean > 1:
            smaller = best_partition(ctx.pricer, host_class, clean)
            if smaller is not None:
                best_cost = ctx.partition_time_s("tp", host_class, smaller.groups)
    return [Finding("tp-slow-link", "warning", "tp", _ranks(ctx.groups["tp"][worst]), message, item.intra_label,
                    ctx.cost_s("tp"), best_cost, fix)]


def _ep_crosses_node(ctx: _Context) -> list[Finding]:
    if ctx.layout.size("ep") < 2:
        return []
    links, crossing = _spanning_nodes(ctx, "ep")
    if not crossing:
        return []
    first = crossing[0]
    per_node = len(ctx.placement.hosts[0].gpus)
    crossed = links[first]
    message = (f"{len(crossing)} of {len(links)} EP groups span nodes: the expert all_to_all crosses {crossed.net_description}")
    fix = f"keep etp*ep <= {per_node} and tp-ep first in the order so each expert group stays inside a node"
    ep = ctx.layout.size("ep")
    best_cost = None
    if ep <= per_node:
        host_class = ctx.placement.host_class[0]
        partition = best_partition(ctx.pricer, host_class, ep)
        groups = partition.groups if partition is not None else (tuple(range(ep)),)
        best_cost = ctx.partition_time_s("ep", host_class, groups)
    return [Finding("ep-crosses-node", "warning", "ep", _ranks(ctx.groups["ep"][first]), message, links[first].net_label,
                    ctx.cost_s("ep"), best_cost, fix)]


def _group_imbalance(ctx: _Context) -> list[Finding]:
    findings = []
    for dim in ("tp", "cp", "ep", "dp"):
        if ctx.layout.size(dim) < 2:
            continue
        links = ctx.links(dim)
        distinct = {id(item): item for item in links}.values()
        slowest = min(distinct, key=lambda item: item.ring_gbps)
        fastest = max(distinct, key=lambda item: item.ring_gbps)
        if fastest.ring_gbps <= slowest.ring_gbps * IMBALANCE_RATIO:
            continue
        slow_count = sum(1 for item in links if item.ring_gbps <= slowest.ring_gbps * IMBALANCE_RATIO)
        index = next(i for i, item in enumerate(links) if item is slowest)
        message = (f"{GROUP_NAMES[dim]} groups ride different links: {slow_count} of {len(links)} are limited by "
                   f"{slowest.bottleneck_label} ({_gbps(slowest.ring_gbps)}), the best by {fastest.bottleneck_label} "
                   f"({_gbps(fastest.ring_gbps)}); every step waits for the slowest group")
        cost = ctx.costs.get(dim)
        findings.append(Finding("group-imbalance", "warning", dim, _ranks(ctx.groups[dim][index]), message,
                                slowest.bottleneck_label, cost.time_s if cost else None,
                                cost.fastest_time_s if cost else None,
                                "give every group the same kind of links (run with --suggest for an order or permutation)"))
    return findings


def _nic_far_from_gpu(ctx: _Context, cost_model: CostModel) -> list[Finding]:
    if len(ctx.placement.hosts) < 2:
        return []
    crossing_dims = [dim for dim in ctx.costs if any(item.nodes > 1 for item in ctx.links(dim))]
    if not crossing_dims:
        return []
    far_by_class: dict[int, dict[int, str]] = {}
    for node, host_class in enumerate(ctx.placement.host_class):
        if host_class not in far_by_class:
            host = ctx.placement.hosts[node]
            paths = {position: nic_path_class(host, position) for position in range(len(host.gpus))}
            far_by_class[host_class] = {position: path for position, path in paths.items() if path in ("NODE", "SYS")}
    classes = ctx.placement.host_class
    affected = [
        rank for rank, (node, position) in enumerate(zip(ctx.placement.node_of_rank, ctx.placement.gpu_of_rank, strict=True))
        if position in far_by_class[classes[node]]
    ]
    if not affected:
        return []
    node, position = ctx.placement.node_of_rank[affected[0]], ctx.placement.gpu_of_rank[affected[0]]
    host = ctx.placement.hosts[node]
    path_class = far_by_class[classes[node]][position]
    hop, name = cost_model.nic_hop(host, position)
    current = sum(ctx.cost_s(dim) or 0.0 for dim in crossing_dims)
    near = GroupPricer(ctx.placement, replace(cost_model, nic_path_penalty=False))
    best = sum(cost.time_s for cost in step_costs(ctx.groups, near, ctx.traffic) if cost.dim in crossing_dims)
    message = (f"{len(affected)} ranks with cross-node {'/'.join(d.upper() for d in crossing_dims)} traffic reach their "
               f"nearest NIC through the CPU ({path_class}): e.g. GPU {host.gpus[position].index}"
               f"{' of ' + host.hostname if host.hostname else ''} to {name or 'its NIC'}, {_gbps(hop.bandwidth_gbps)}")
    fix = "put a NIC under each GPU's PCIe switch, or pin NCCL_IB_HCA / NCCL_NET_GDR_LEVEL and check the NIC affinity"
    return [Finding("nic-far-from-gpu", "warning", crossing_dims[0], tuple(affected[:MAX_FINDING_RANKS]), message,
                    hop.label, current or None, best or None, fix)]


def _dp_not_rail_aligned(ctx: _Context) -> list[Finding]:
    dim = ctx.layout.gradient_groups()[0].dim
    if ctx.layout.size(dim) < 2 or len(ctx.placement.hosts) < 2:
        return []
    node_of, gpu_of = ctx.placement.node_of_rank, ctx.placement.gpu_of_rank
    misaligned: list[int] = []
    for index, group in enumerate(ctx.groups[dim]):
        per_node: dict[int, list[int]] = {}
        for rank in group:
            per_node.setdefault(node_of[rank], []).append(gpu_of[rank])
        if len(per_node) > 1 and len({tuple(sorted(positions)) for positions in per_node.values()}) > 1:
            misaligned.append(index)
    if not misaligned:
        return []
    group = ctx.groups[dim][misaligned[0]]
    current = ctx.links(dim)[misaligned[0]]
    aligned = tuple(sorted((host_class, tuple(range(count))) for host_class, count in _per_node_counts(ctx, group)))
    best_cost = ctx.dim_time_s(dim, ctx.pricer.links_of(aligned, len(group)))
    cost = ctx.dim_time_s(dim, current)
    message = (f"{len(misaligned)} of {len(ctx.groups[dim])} gradient ({dim}) groups use different local GPUs on "
               "different nodes, "
               f"so their gradient traffic changes rails (crosses the network spine, which the cost model does not price): "
               f"e.g. ranks {group[:8]}")
    fix = "keep the same local-rank -> GPU mapping on every node (one CUDA_VISIBLE_DEVICES for all, block placement)"
    return [Finding("dp-not-rail-aligned", "info", dim, _ranks(group), message, current.bottleneck_label, cost, best_cost, fix)]


def _per_node_counts(ctx: _Context, group: list[int]) -> list[tuple[int, int]]:
    """(host class, ranks of the group on it) per node the group touches."""
    counts: dict[int, int] = {}
    for rank in group:
        node = ctx.placement.node_of_rank[rank]
        counts[node] = counts.get(node, 0) + 1
    return [(ctx.placement.host_class[node], count) for node, count in counts.items()]


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


def _health(ctx: _Context, health: tuple[HealthFinding, ...]) -> list[Finding]:
    """Health findings on GPUs this layout uses, as findings on the ranks placed there."""
    found = [finding for finding in health if not finding.code.startswith("env-")]
    if not found:
        return []
    ranks_at: dict[tuple[str, int | None], list[int]] = {}
    for rank, (node, position) in enumerate(zip(ctx.placement.node_of_rank, ctx.placement.gpu_of_rank, strict=True)):
        host = ctx.placement.hosts[node]
        for key in ((host.hostname, host.gpus[position].index), (host.hostname, None)):
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
            group = next(group for group in ctx.groups[dim] if ranks[0] in group)
            message += f", and {GROUP_NAMES[dim]} group {group[:8]} waits for {'them' if len(ranks) > 1 else 'it'}"
        repaired = None
        if dim and health_finding.code == "nvlink-fewer-links":
            repaired = _cost_with_links_repaired(ctx, dim, health_finding.host, set(health_finding.gpus))
            current = ctx.cost_s(dim)
            if repaired is not None and current:
                message += (f"; with its links up, {GROUP_NAMES[dim]} communication would take "
                            f"{(1 - repaired / current) * 100:.0f}% less time per step")
        findings.append(Finding(health_finding.code, health_finding.severity, dim, tuple(ranks[:MAX_FINDING_RANKS]),
                                message, "", ctx.cost_s(dim) if dim else None, repaired, health_finding.fix))
    return findings


NETWORK_FINDING_WORDS = ("nic", "rail", "peermem")
"""Health findings about a GPU's path to the network (a NIC missing, slower or far, off-rail traffic, no GPUDirect):
they slow the dimensions whose groups leave the node, not the ones inside it (as a narrow PCIe link does on a GPU
whose peers are on NVLink)."""


def _dim_slowed(ctx: _Context, dims: list[str], code: str, rank: int) -> str:
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
        group = next(group for group in ctx.groups[dim] if rank in group)
        if len({nodes[member] for member in group}) > 1:
            return dim
    return ""


def _cost_with_links_repaired(ctx: _Context, dim: str, hostname: str, gpus: set[int]) -> float | None:
    """`dim`'s time per step if the NVLink pairs of `gpus` on `hostname` had the count the other pairs have."""
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
    placement = replace(ctx.placement, hosts=tuple(repaired.get(id(host), host) for host in ctx.placement.hosts))
    costs = step_costs({dim: ctx.groups[dim]}, GroupPricer(placement, ctx.pricer.model),
                       [item for item in ctx.traffic if item.dim == dim])
    return costs[0].time_s if costs else None
