"""The parallelism design worksheet behind `linkscope plan`: degrees, placement, reasons, traffic.

Degrees follow the usual Megatron practice on a machine like the SOURCE: tensor parallelism
stays inside a node and only as large as a clean ring (no PCIe/SYS hop) allows, pipeline
parallelism is added until the model fits, data parallelism takes the rest. Memory per GPU:
bf16 weights and gradients (4 bytes/param over tp*pp), Adam state (12 bytes/param) sharded
by the distributed optimizer (ZeRO-1) over dp x cp, expert weights' over expert-dp (see
:func:`state_bytes_per_param` for the other stages), and activations with sequence parallelism and selective
recomputation, about 34*s*b*h bytes per layer (Korthikanti et al. 2022) over tp, for the
p micro-batches in flight on the first stage (L/p layers each), all kept under MEMORY_BUDGET.
A model no split fits is refused (InputError) rather than planned.
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.report import CheckReport
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.checks.suggest import best_partition, ring_is_slow
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_LAYOUT_RANKS
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.cost.step import DimensionCost
from linkscope.topo.layout.placement import Placement
from linkscope.topo.layout.volumes import (
    DEFAULT_PRESET,
    ModelSpec,
    Traffic,
    microbatches,
    pipeline_bubble,
    preset,
    split_params,
    step_traffic,
)
from linkscope.topo.machine.cluster import domain_hosts
from linkscope.topo.model.snapshot import Snapshot

MEMORY_BUDGET = 0.6
"""Share of GPU memory the plan fills with weights, gradients, optimizer state and activations."""

DEFAULT_GPU_MEMORY_BYTES = 80 * 1024**3
"""Assumed when the snapshot does not say (an 80 GB H100/A100)."""

PREFERRED_LINK = {"tp": "NVLink inside a node", "cp": "NVLink inside a node", "ep": "NVLink inside a node",
                  "etp": "NVLink inside a node", "dp": "network, rail-aligned", "dp_cp": "network, rail-aligned",
                  "edp": "network, rail-aligned", "pp": "any (light traffic)"}
"""What each dimension's traffic wants."""


@frozen
class Degree:
    """One row of the worksheet: a dimension's degree, where its groups sit, and why."""

    dim: str
    size: int
    placement: str
    reason: str


@frozen
class TrafficRow:
    """One row of the communication table."""

    dim: str
    op: str
    calls_per_step: int
    bytes_per_step: int
    preferred: str
    actual: str
    time_per_step_s: float | None
    """None when the dimension's traffic was not priced."""
    risk: str
    """`ok`, `medium` or `high`."""


@frozen
class Plan:
    """The worksheet: degrees, traffic, pipeline bubble, memory per GPU, and the check of the layout."""

    gpus: int
    nodes: int
    model: ModelSpec
    degrees: tuple[Degree, ...]
    traffic: tuple[TrafficRow, ...]
    microbatches: int
    bubble: float
    memory_per_gpu_bytes: float
    memory_total_bytes: float
    report: CheckReport
    assumptions: tuple[str, ...]
    vpp: int = 1
    """Virtual pipeline stages per rank."""


def state_bytes_per_param(zero_stage: int, dp: int) -> float:
    """Bytes of model state per parameter on one GPU: bf16 weights (2) and gradients (2), fp32 Adam
    master weights, momentum and variance (12); ZeRO-1 shards the Adam part over dp, ZeRO-2 the
    gradients too, ZeRO-3/FSDP everything; plain data parallelism (stage 0) keeps all 16."""
    if zero_stage <= 0:
        return 16.0
    if zero_stage == 1:
        return 4 + 12 / dp
    if zero_stage == 2:
        return 2 + 14 / dp
    return 16 / dp


def memory_per_gpu_bytes(model: ModelSpec, tp: int, pp: int, dp: int, cp: int = 1, ep: int = 1) -> float:
    """Predicted bytes per GPU: model state plus activations (see the module docstring).

    The distributed optimizer shards the dense weights' state over dp x cp and the expert weights'
    over expert-dp, the groups their gradients are reduced over.
    """
    dense, expert = split_params(model)
    expert_dp = max(1, dp * cp // max(1, ep))
    states = (dense / (tp * pp) * state_bytes_per_param(model.zero_stage, dp * cp)
              + expert / (tp * max(1, ep) * pp) * state_bytes_per_param(model.zero_stage, expert_dp))
    activations = 34 * model.seq / cp * model.micro_batch * model.hidden * model.layers / tp
    return states + activations


def plan_layout(
    snapshot: Snapshot,
    gpus: int,
    model: ModelSpec | None = None,
    pinned: dict[str, int] | None = None,
    cost_model: CostModel | None = None,
    vpp: int = 1,
) -> Plan:
    """Choose degrees for `gpus` GPUs of machines like `snapshot`'s first host (its first NVLink domain
    when that spans hosts, as on GB200 NVL72) and price the result.

    `vpp` virtual stages per rank (interleaved schedule) shrink the bubble; they need a pipeline.
    """
    host = domain_hosts(snapshot)[0] if snapshot.hosts else None
    if host is not None and (len(snapshot.hosts) > 1 or host is not snapshot.host):
        snapshot = replace(snapshot, hosts=(host,))  # nodes like the cluster's first host (or NVLink domain)
    host = snapshot.host
    per_node = len(host.gpus)
    if gpus < 1:
        raise InputError(f"--gpus: must be at least 1, got {gpus}")
    if per_node == 0:
        raise InputError(f"{snapshot.source or 'snapshot'}: the host has no GPUs")
    if gpus > MAX_LAYOUT_RANKS:
        raise InputError(f"--gpus {gpus:,}: more than the {MAX_LAYOUT_RANKS:,} GPUs linkscope plans for "
                         "(the largest clusters have a few hundred thousand)")
    if gpus > per_node and gpus % per_node:
        raise InputError(f"--gpus {gpus} is not a whole number of {per_node}-GPU nodes")
    nodes = max(1, gpus // per_node)
    assumptions: list[str] = []
    if model is None:
        model = preset(DEFAULT_PRESET)
        assumptions.append(f"no model given: the {DEFAULT_PRESET} preset")
    memory = host.gpus[0].memory_total_bytes
    if memory is None:
        memory = DEFAULT_GPU_MEMORY_BYTES
        assumptions.append("GPU memory unknown: 80 GiB assumed")
    pinned = dict(pinned or {})
    pricer = GroupPricer(Placement((host,), (0,), (), (), "plan"), cost_model or CostModel())
    degrees, memory_needed = _choose(model, gpus, min(per_node, gpus), pinned, pricer, memory * MEMORY_BUDGET)
    sizes = {degree.dim: degree.size for degree in degrees}
    if vpp > 1 and sizes.get("pp", 1) < 2:
        raise InputError(f"--vpp {vpp}: the plan has no pipeline (pp 1); pin --pp 2 or more for an interleaved schedule")
    request = CheckRequest(sizes=tuple(sizes.items()), nodes=nodes, model_spec=model, cost_model=cost_model, vpp=vpp)
    if gpus < per_node:
        request = replace(request, visible_devices=tuple(gpu.index for gpu in host.gpus[:gpus]))
    report = check_layout(snapshot, request)
    costs = {cost.dim: cost for cost in report.costs}
    placed = tuple(replace(degree, placement=_placement_text(degree.dim, degree.size, report, per_node)) for degree in degrees)
    gradients = report.layout.gradient_groups() if report.layout is not None else None
    rows = tuple(_traffic_row(item, costs) for item in step_traffic(model, {**sizes, "vpp": vpp}, gradients))
    count = microbatches(model, sizes.get("dp", 1))
    return Plan(gpus, nodes, model, placed, rows, count, pipeline_bubble(sizes.get("pp", 1), count, vpp), memory_needed,
                float(memory), report, tuple(assumptions), vpp)


def _choose(model: ModelSpec, gpus: int, per_node: int, pinned: dict[str, int], pricer: GroupPricer,
            budget: float) -> tuple[list[Degree], float]:
    cp = pinned.get("cp", 1)
    ep = pinned.get("ep", 1)
    if model.experts and "ep" not in pinned:
        ep = 1
        for size in range(min(model.experts, per_node), 0, -1):
            if model.experts % size == 0 and gpus % size == 0:
                ep = size
                break
    clean_tp = [size for size in range(1, per_node + 1) if per_node % size == 0 and _clean(pricer, size)]
    tp_options = [pinned["tp"]] if "tp" in pinned else clean_tp
    pp_options = [pinned["pp"]] if "pp" in pinned else [p for p in range(1, model.layers + 1) if model.layers % p == 0]
    valid: list[tuple[int, int, int, float]] = []
    for pp in pp_options:
        for tp in tp_options:
            if gpus % (tp * pp * cp):
                continue
            dp = pinned.get("dp", gpus // (tp * pp * cp))
            if tp * pp * cp * dp != gpus or (cp * dp) % ep:
                continue
            valid.append((tp, pp, dp, memory_per_gpu_bytes(model, tp, pp, dp, cp, ep)))
    if not valid:
        pins = ", ".join(f"{dim} {size}" for dim, size in sorted(pinned.items())) or "none"
        raise InputError(f"--gpus {gpus}: no tp*pp*cp*dp split of the GPUs works with ep {ep} (pinned: {pins})")
    fitting = [item for item in valid if item[3] <= budget]
    if not fitting:
        tp, pp, dp, needed = min(valid, key=lambda item: item[3])
        raise InputError(f"--model {model.name}: does not fit on {gpus} GPUs: the leanest split (tp {tp}, pp {pp}, "
                         f"dp {dp}) needs ~{format_size_bytes(needed)} per GPU, more than the "
                         f"{format_size_bytes(budget)} budget ({MEMORY_BUDGET:.0%} of each GPU's memory); "
                         "use more GPUs or a smaller model")
    tp, pp, dp, needed = fitting[0]
    largest_clean = clean_tp[-1] if clean_tp else 1
    degrees = [
        Degree("tp", tp, "", "pinned by --tp" if "tp" in pinned else
               f"smallest TP that fits with pp {pp}; rings of up to {largest_clean} GPUs ride no slow link here"),
        Degree("pp", pp, "", "pinned by --pp" if "pp" in pinned else
               ("no pipeline needed: the model fits" if pp == 1 else f"split {model.layers} layers so a stage fits in memory")),
        Degree("dp", dp, "", "pinned by --dp" if "dp" in pinned else
               (f"the remaining GPUs; the distributed optimizer (ZeRO-{model.zero_stage}) shards "
                f"{_SHARDED[min(model.zero_stage, 3)]} over dp" if model.zero_stage > 0 else
                "the remaining GPUs; plain data parallelism (ZeRO-0): every rank keeps the full model state")),
    ]
    if cp > 1:
        degrees.insert(1, Degree("cp", cp, "", "pinned by --cp"))
    if ep > 1:
        degrees.insert(1, Degree("ep", ep, "", "pinned by --ep" if "ep" in pinned else
                                 f"{model.experts} experts spread inside a node"))
    return degrees, needed


_SHARDED = {1: "Adam state", 2: "Adam state and gradients", 3: "parameters, gradients and Adam state"}


def _clean(pricer: GroupPricer, size: int) -> bool:
    if size == 1:
        return True
    partition = best_partition(pricer, 0, size)
    return partition is not None and not ring_is_slow(
        pricer.host(0), partition.bottleneck_class, partition.bottleneck_gbps, partition.bottleneck_gbps)


def _placement_text(dim: str, size: int, report: CheckReport, per_node: int) -> str:
    if size < 2:
        return "-"
    cost = next((cost for cost in report.costs if cost.dim == dim), None)
    groups = report.groups.get(dim, [])
    nodes_of = {node for node, _ in (report.placement[rank] for rank in groups[0])} if groups and report.placement else set()
    where = "inside one node" if len(nodes_of) <= 1 else f"across {len(nodes_of)} nodes"
    link = f" over {cost.link_label}" if cost is not None and cost.link_label else ""
    return f"{len(groups)} groups of {size}, {where}{link}"


def _traffic_row(item: Traffic, costs: dict[str, DimensionCost]) -> TrafficRow:
    cost = costs.get(item.dim)
    op_cost = next((op for op in cost.ops if op.op == item.op), None) if cost is not None else None
    actual = cost.link_label if cost is not None else "-"
    link_class = cost.link_class if cost is not None else ""
    if item.dim in ("tp", "cp", "ep", "etp"):
        risk = "ok" if link_class == "NV" else "high"
    elif item.dim in ("dp", "dp_cp", "edp"):
        risk = "medium" if link_class in ("SYS", "NODE", "PHB") else "ok"
    else:
        risk = "ok"
    time_s = op_cost.time_per_step_s if op_cost is not None else None
    return TrafficRow(item.dim, item.op, item.calls_per_step, item.bytes_per_step, PREFERRED_LINK[item.dim], actual, time_s, risk)
