"""What every layout rule reads: the request and the machine, the layout, its groups, their placement and their
priced links; a rule is a function `LayoutContext -> list[LayoutFinding]` (the registry: :mod:`topo.checks.rules`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.common.limits import MAX_FINDING_RANKS
from linkscope.topo.cost.collectives import GroupLinks, collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.cost.step import DimensionCost, links_per_group
from linkscope.topo.layout.placement import (
    Placement,
)
from linkscope.topo.layout.spec import Layout
from linkscope.topo.layout.volumes import ModelSpec, Traffic
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot


@dataclass
class LayoutContext:
    """One check: what it was asked, on which machine, and what the rules share while they judge it."""

    snapshot: Snapshot
    request: CheckRequest
    spec: ModelSpec
    """The model that sets the volumes (given, or the preset assumed)."""
    hosts: tuple[Host, ...]
    """The cluster's nodes (a multi-host NVLink domain is one)."""
    capacity: int
    """GPUs the layout could use."""
    cost_model: CostModel
    layout: Layout
    groups: dict[str, list[list[int]]]
    placement: Placement
    pricer: GroupPricer
    traffic: list[Traffic]
    costs: dict[str, DimensionCost]
    _links: dict[str, list[GroupLinks]] = field(default_factory=dict)
    _group_times: dict[str, list[float | None]] = field(default_factory=dict)
    _group_of_rank: dict[str, list[int]] = field(default_factory=dict)
    _slowest_groups: dict[str, list[int]] = field(default_factory=dict)
    _leaves_node: dict[tuple[str, int], bool] = field(default_factory=dict)

    def links(self, dim: str) -> list[GroupLinks]:
        if dim not in self._links:
            self._links[dim] = links_per_group(dim, self.groups[dim], self.pricer)
        return self._links[dim]

    def group_times_s(self, dim: str) -> list[float | None]:
        """`dim`'s time per step on each of its groups, priced once per distinct link set."""
        if dim not in self._group_times:
            memo: dict[int, float | None] = {}  # the pricer hands groups of one shape one GroupLinks object
            times = []
            for links in self.links(dim):
                key = id(links)
                if key not in memo:
                    memo[key] = self.dim_time_s(dim, links)
                times.append(memo[key])
            self._group_times[dim] = times
        return self._group_times[dim]

    def slowest_groups(self, dim: str) -> list[int]:
        """Indexes of `dim`'s priced groups, slowest first (groups without traffic left out)."""
        if dim not in self._slowest_groups:
            times = self.group_times_s(dim)
            priced = [index for index, time in enumerate(times) if time is not None]
            self._slowest_groups[dim] = sorted(priced, key=lambda index: -(times[index] or 0.0))
        return self._slowest_groups[dim]

    def ranks_on_node(self) -> tuple[tuple[int, ...], ...]:
        """For every node of the placement, the ranks placed on it."""
        return self.placement.ranks_on_node()

    def group_leaves_node(self, dim: str, index: int) -> bool:
        """Whether `dim`'s group `index` has ranks on more than one node (asked once per group: the health findings
        of a cluster's odd nodes ask it of the same few groups of thousands of ranks)."""
        key = (dim, index)
        if key not in self._leaves_node:
            nodes = self.placement.node_of_rank
            self._leaves_node[key] = len({nodes[member] for member in self.groups[dim][index]}) > 1
        return self._leaves_node[key]

    def group_of_rank(self, dim: str) -> list[int]:
        """For every rank, the index of its group in `groups[dim]`."""
        if dim not in self._group_of_rank:
            index_of = [0] * self.layout.world_size
            for index, group in enumerate(self.groups[dim]):
                for rank in group:
                    index_of[rank] = index
            self._group_of_rank[dim] = index_of
        return self._group_of_rank[dim]

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


def pp_last(order: tuple[str, ...]) -> str:
    """`order` with pp moved to the end (Megatron accepts every such order)."""
    return "-".join((*(dim for dim in order if dim != "pp"), "pp"))


def finding_ranks(group: list[int]) -> tuple[int, ...]:
    return tuple(group[:MAX_FINDING_RANKS])



def spanning_nodes(ctx: LayoutContext, dim: str) -> tuple[list[GroupLinks], list[int]]:
    """The links of every `dim` group, and the indices of the groups that span more than one node."""
    links = ctx.links(dim)
    return links, [index for index, item in enumerate(links) if item.nodes > 1]


def per_node_counts(ctx: LayoutContext, group: list[int]) -> list[tuple[int, int]]:
    """(host class, ranks of the group on it) per node the group touches."""
    counts: dict[int, int] = {}
    for rank in group:
        node = ctx.placement.node_of_rank[rank]
        counts[node] = counts.get(node, 0) + 1
    return [(ctx.placement.host_class[node], count) for node, count in counts.items()]
