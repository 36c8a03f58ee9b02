"""Rules about the links the groups ride: TP or EP across nodes, slow TP rings, imbalance, far NICs, rails.
"""

from __future__ import annotations

import math
from dataclasses import replace

from linkscope.topo.checks.context import LayoutContext, finding_ranks, per_node_counts, pp_last, spanning_nodes
from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.checks.suggest import best_partition, largest_clean_size, ring_is_slow
from linkscope.topo.common.limits import MAX_FINDING_RANKS
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import nic_path_class
from linkscope.topo.cost.step import step_costs
from linkscope.topo.layout.groups import megatron_refusal
from linkscope.topo.layout.spec import GROUP_NAMES
from linkscope.topo.machine.cluster import is_domain

IMBALANCE_RATIO = 1.1
"""Groups of one dimension whose ring bandwidths differ by more than this factor are imbalanced."""


def tp_crosses_node(ctx: LayoutContext) -> list[LayoutFinding]:
    tp = ctx.layout.size("tp")
    if tp < 2:
        return []
    links, crossing = spanning_nodes(ctx, "tp")
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
            better = "-".join(tp_first) if megatron_refusal(candidate) is None else "tp-" + pp_last(tp_first[1:])
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
    return [LayoutFinding("tp-crosses-node", "error", "tp", finding_ranks(ctx.groups["tp"][first]), message,
                          links[first].net_label, ctx.cost_s("tp"), best_cost, fix)]


def tp_slow_link(ctx: LayoutContext) -> list[LayoutFinding]:
    tp = ctx.layout.size("tp")
    if tp < 2:
        return []
    links = ctx.links("tp")
    slow: list[int] = []
    best_by_class = {}
    judged: dict[tuple[int, int], bool] = {}  # (host class, id of the GroupLinks): groups of one shape judge alike
    for index, item in enumerate(links):
        if item.nodes > 1:
            continue
        node = ctx.placement.node_of_rank[ctx.groups["tp"][index][0]]
        host_class = ctx.placement.host_class[node]
        key = (host_class, id(item))
        if key not in judged:
            if host_class not in best_by_class:
                best_by_class[host_class] = best_partition(ctx.pricer, host_class, tp)
            partition = best_by_class[host_class]
            best_gbps = partition.bottleneck_gbps if partition is not None else math.inf
            judged[key] = ring_is_slow(ctx.placement.hosts[node], item.intra_class, item.intra_gbps, best_gbps)
        if judged[key]:
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
               f"{ctx.groups['tp'][worst][:8]} crosses {item.intra_label} ({format_gbps(item.intra_gbps)})")
    best_cost = None
    if partition is not None and not ring_is_slow(host, partition.bottleneck_class, partition.bottleneck_gbps,
                                                  partition.bottleneck_gbps):
        devices = ",".join(str(host.gpus[position].index) for position in partition.device_order)
        best_cost = ctx.partition_time_s("tp", host_class, partition.groups)
        best_ring = f"{partition.bottleneck_label}, {format_gbps(partition.bottleneck_gbps)}"
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
    return [LayoutFinding("tp-slow-link", "warning", "tp", finding_ranks(ctx.groups["tp"][worst]), message, item.intra_label,
                    ctx.cost_s("tp"), best_cost, fix)]


def ep_crosses_node(ctx: LayoutContext) -> list[LayoutFinding]:
    if ctx.layout.size("ep") < 2:
        return []
    links, crossing = spanning_nodes(ctx, "ep")
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
    return [LayoutFinding("ep-crosses-node", "warning", "ep", finding_ranks(ctx.groups["ep"][first]), message,
                          links[first].net_label, ctx.cost_s("ep"), best_cost, fix)]


def group_imbalance(ctx: LayoutContext) -> list[LayoutFinding]:
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
                   f"{slowest.bottleneck_label} ({format_gbps(slowest.ring_gbps)}), the best by {fastest.bottleneck_label} "
                   f"({format_gbps(fastest.ring_gbps)}); every step waits for the slowest group")
        cost = ctx.costs.get(dim)
        findings.append(LayoutFinding("group-imbalance", "warning", dim, finding_ranks(ctx.groups[dim][index]), message,
                                slowest.bottleneck_label, cost.time_s if cost else None,
                                cost.fastest_time_s if cost else None,
                                "give every group the same kind of links (run with --suggest for an order or permutation)"))
    return findings


def nic_far_from_gpu(ctx: LayoutContext) -> list[LayoutFinding]:
    cost_model = ctx.cost_model
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
               f"{' of ' + host.hostname if host.hostname else ''} to {name or 'its NIC'}, {format_gbps(hop.bandwidth_gbps)}")
    fix = "put a NIC under each GPU's PCIe switch, or pin NCCL_IB_HCA / NCCL_NET_GDR_LEVEL and check the NIC affinity"
    return [LayoutFinding("nic-far-from-gpu", "warning", crossing_dims[0], tuple(affected[:MAX_FINDING_RANKS]), message,
                    hop.label, current or None, best or None, fix)]


def dp_not_rail_aligned(ctx: LayoutContext) -> list[LayoutFinding]:
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
    aligned = tuple(sorted((host_class, tuple(range(count))) for host_class, count in per_node_counts(ctx, group)))
    best_cost = ctx.dim_time_s(dim, ctx.pricer.links_of(aligned, len(group)))
    cost = ctx.dim_time_s(dim, current)
    message = (f"{len(misaligned)} of {len(ctx.groups[dim])} gradient ({dim}) groups use different local GPUs on "
               "different nodes, "
               f"so their gradient traffic changes rails (crosses the network spine, which the cost model does not price): "
               f"e.g. ranks {group[:8]}")
    fix = "keep the same local-rank -> GPU mapping on every node (one CUDA_VISIBLE_DEVICES for all, block placement)"
    return [LayoutFinding("dp-not-rail-aligned", "info", dim, finding_ranks(group), message, current.bottleneck_label, cost,
                    best_cost, fix)]
