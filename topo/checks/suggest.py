"""Search for a better layout: order strings, rank distribution and per-host device permutations.

Each candidate is priced with the same per-step model as the check (the slowest group of each
dimension, summed), and the cheapest wins. Per-host permutations come from the best partition
of a host's GPUs into tensor-parallel groups (the one whose worst group ring is fastest), which
CUDA_VISIBLE_DEVICES then hands to consecutive local ranks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.step import step_costs
from linkscope.topo.layout.groups import build_groups, effective_order, megatron_refusal, order_needs
from linkscope.topo.layout.placement import DISTRIBUTIONS, Distribution, LayoutMismatch, Placement, place_ranks
from linkscope.topo.layout.spec import Layout
from linkscope.topo.layout.volumes import Traffic
from linkscope.topo.model.host import Host, LinkKind

SLOW_FRACTION = 0.75
"""A ring slower than this share of the best ring the box offers for the same group size is slow."""

TIE_FRACTION = 0.01
"""Candidates within 1% of the fastest count as equal; the one that changes least wins."""

EXACT_PARTITION_LIMIT = 10
"""Hosts with more GPUs than this get consecutive groups instead of an exhaustive partition search."""


@frozen
class Partition:
    """A split of one host's GPU positions into equal groups, and its worst group's ring."""

    groups: tuple[tuple[int, ...], ...]
    bottleneck_gbps: float
    bottleneck_class: str
    bottleneck_label: str

    @property
    def device_order(self) -> tuple[int, ...]:
        """The positions in group order: what CUDA_VISIBLE_DEVICES should list."""
        return tuple(position for group in self.groups for position in group)


@frozen
class Suggestion:
    """A better layout: the flags and environment to use, and how much faster it is predicted to be."""

    order: str
    distribution: Distribution
    visible_devices: tuple[int, ...] | None
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    time_s: float
    """Predicted communication time per step with the suggestion."""
    current_time_s: float
    needs: str = ""
    """What can start the suggested order: Megatron's training script (with which flag), megatron-core, DeviceMesh."""
    one_flag: Suggestion | None = None
    """Where the suggestion changes more than the placement: block placement alone (`--distribution block`, one
    flag any launcher takes) when it too beats the current layout; shown first, beside the fuller change."""

    @property
    def speedup(self) -> float:
        """current / suggested communication time per step."""
        return self.current_time_s / self.time_s if self.time_s > 0 else math.inf


def host_has_nvlink(host: Host) -> bool:
    """True when any GPU pair of the host is connected by NVLink."""
    return any(link.kind is LinkKind.NVLINK for link in host.links)


def ring_is_slow(host: Host, link_class: str, gbps: float, best_gbps: float) -> bool:
    """True when a group ring on one host rides a slow link: PCIe on an NVLink box, SYS on a PCIe box,
    or far below the best ring the box offers for the same group size."""
    if host_has_nvlink(host) and link_class != "NV":
        return True
    if link_class == "SYS":
        return True
    return math.isfinite(best_gbps) and gbps < SLOW_FRACTION * best_gbps


def best_partition(pricer: GroupPricer, host_class: int, size: int) -> Partition | None:
    """The partition of a host's GPUs into groups of `size` whose worst group ring is fastest."""
    host = pricer.host(host_class)
    count = len(host.gpus)
    if size < 1 or count % size:
        return None

    def ring_of(group: tuple[int, ...]) -> tuple[float, str, str]:
        if len(group) == 1:
            return math.inf, "NV", ""
        ring = pricer.ring(host_class, group)
        worst = min(
            (pricer.hop(host_class, a, b) for a, b in zip(ring.order, ring.order[1:] + ring.order[:1], strict=True)),
            key=lambda hop: hop.bandwidth_gbps,
        )
        return ring.bottleneck_gbps, worst.link_class, worst.label

    if count > EXACT_PARTITION_LIMIT:
        groups = tuple(tuple(range(start, start + size)) for start in range(0, count, size))
        worst_group = min((ring_of(group) for group in groups), key=lambda item: item[0])
        return Partition(groups, *worst_group)
    best: list[Partition] = []

    def search(remaining: tuple[int, ...], chosen: list[tuple[int, ...]], floor: float, info: tuple[str, str]) -> None:
        if best and floor <= best[0].bottleneck_gbps:
            return
        if not remaining:
            best[:] = [Partition(tuple(chosen), floor, *info)]
            return
        first, rest = remaining[0], remaining[1:]
        for others in itertools.combinations(rest, size - 1):
            group = (first, *others)
            gbps, link_class, label = ring_of(group)
            new_floor, new_info = (gbps, (link_class, label)) if gbps < floor else (floor, info)
            left = tuple(position for position in rest if position not in others)
            search(left, [*chosen, group], new_floor, new_info)

    search(tuple(range(count)), [], math.inf, ("NV", ""))
    return best[0] if best else None


def largest_clean_size(pricer: GroupPricer, host_class: int, below: int) -> int:
    """The largest group size under `below` whose best partition of the host rides no slow link."""
    host = pricer.host(host_class)
    for size in range(min(below - 1, len(host.gpus)), 1, -1):
        partition = best_partition(pricer, host_class, size)
        if partition is not None and not ring_is_slow(host, partition.bottleneck_class, partition.bottleneck_gbps, math.inf):
            return size
    return 1


def step_time_s(layout: Layout, placement: Placement, pricer: GroupPricer, traffic: Sequence[Traffic]) -> float:
    """Predicted communication time per step of `layout` placed as `placement`."""
    return sum(cost.time_s for cost in step_costs(build_groups(layout), pricer.rebind(placement), traffic))


def candidate_layouts(layout: Layout) -> list[Layout]:
    """Candidate layouts: every permutation of the order's (or mesh's) dimensions that shape a group, the
    others keeping their places; never one Megatron refuses."""
    if layout.mesh:
        dims = layout.mesh
        slots = [index for index, dim in enumerate(dims) if dim.size > 1]
        meshes = []
        for permutation in itertools.permutations([dims[index] for index in slots]):
            mesh = list(dims)
            for index, dim in zip(slots, permutation, strict=True):
                mesh[index] = dim
            meshes.append(replace(layout, mesh=tuple(mesh)))
        return meshes
    names = layout.order
    grids = {name for grid in effective_order(layout) for name in grid}
    places = [index for index, name in enumerate(names) if name in grids]
    orders = []
    for names_permuted in itertools.permutations([names[index] for index in places]):
        order = list(names)
        for index, name in zip(places, names_permuted, strict=True):
            order[index] = name
        candidate = replace(layout, order=tuple(order))
        if megatron_refusal(candidate) is None:
            orders.append(candidate)
    return orders


def suggest_layout(
    layout: Layout,
    placement: Placement,
    pricer: GroupPricer,
    traffic: Sequence[Traffic],
    distribution: Distribution,
    visible_devices: tuple[int, ...] | None,
) -> Suggestion | None:
    """The cheapest candidate layout when it beats the current one by more than 1% (or the current one is
    refused by Megatron), else None."""
    current = step_time_s(layout, placement, pricer, traffic)
    hosts, classes = placement.hosts, placement.host_class
    host = hosts[0]
    device_options: list[tuple[int, ...] | None] = [visible_devices]
    tp = layout.size("tp")
    if tp > 1 and len(set(classes)) == 1:
        partition = best_partition(pricer, classes[0], tp)
        if partition is not None:
            permuted = tuple(host.gpus[position].index for position in partition.device_order)
            if permuted not in device_options:
                device_options.append(permuted)
        if visible_devices is not None:
            device_options.append(None)
    refused = megatron_refusal(layout) is not None
    tp_may_cross = tp_crosses_node(layout, placement, pricer)
    scored: list[tuple[float, float, Layout, Distribution, tuple[int, ...] | None]] = []
    for candidate in candidate_layouts(layout):
        for distribution_option in DISTRIBUTIONS if len(hosts) > 1 else (distribution,):
            for devices in device_options:
                try:
                    moved = place_ranks(hosts, classes, layout.world_size, distribution_option, devices)
                except (InputError, LayoutMismatch):
                    continue
                if not tp_may_cross and tp_crosses_node(candidate, moved, pricer):
                    continue
                changes = 1.1 * (candidate != layout) + (devices != visible_devices)
                changes += (distribution_option != distribution) + 0.5 * (distribution_option != "block")
                scored.append((step_time_s(candidate, moved, pricer, traffic), changes, candidate, distribution_option,
                               devices))
    if not scored:
        return None
    fastest = min(item[0] for item in scored)
    near_best = [item for item in scored if item[0] <= fastest * (1 + TIE_FRACTION)]
    time_s, _, candidate, chosen_distribution, devices = min(near_best, key=lambda item: (item[1], item[0]))
    if time_s >= current * (1 - TIE_FRACTION) and not refused:
        return None
    flags = []
    if candidate != layout:
        flags.append(f"--mesh {candidate.order_string}" if layout.mesh else f"--order {candidate.order_string}")
    if chosen_distribution != distribution:
        flags.append(f"--distribution {chosen_distribution}")
    env: tuple[tuple[str, str], ...] = ()
    if devices is not None:
        env = (("CUDA_VISIBLE_DEVICES", ",".join(map(str, devices))),)
    one_flag = None
    if distribution != "block" and flags != ["--distribution block"] and not refused:
        block = [item[0] for item in scored if item[2] == layout and item[3] == "block" and item[4] == visible_devices]
        if block and block[0] < current * (1 - TIE_FRACTION):
            one_flag = Suggestion(layout.order_string, "block", visible_devices, ("--distribution block",), (), block[0],
                                  current, order_needs(layout))
    return Suggestion(candidate.order_string, chosen_distribution, devices, tuple(flags), env, time_s, current,
                      order_needs(candidate), one_flag)


def tp_crosses_node(layout: Layout, placement: Placement, pricer: GroupPricer) -> bool:
    """True when some tensor-parallel group of the layout spans nodes."""
    if layout.size("tp") < 2:
        return False
    node_of = placement.node_of_rank
    return any(len({node_of[rank] for rank in group}) > 1 for group in build_groups(layout)["tp"])

