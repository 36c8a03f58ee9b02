"""Per-step communication time of a placed layout: each dimension's collectives on its slowest group.

Every group of a dimension runs the same collectives at the same time, so the step waits for
the slowest group; the dimensions are summed (no overlap assumed, an upper bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.collectives import GroupLinks, collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.layout.volumes import Traffic


@frozen
class OpCost:
    """One kind of collective of a dimension, priced on the dimension's slowest group."""

    op: str
    size_bytes: int
    calls_per_step: int
    algo: str
    time_per_call_s: float
    what: str

    @property
    def time_per_step_s(self) -> float:
        """All calls of one step."""
        return self.time_per_call_s * self.calls_per_step


@frozen
class DimensionCost:
    """What one dimension's communication costs per step, and the link that limits it."""

    dim: str
    time_s: float
    """Per step, on the slowest group."""
    link_label: str
    """The limiting link of the slowest group, for people (`NV18`, `SYS`, `mlx5_0 400 Gb/s`)."""
    link_class: str
    slowest_ranks: tuple[int, ...]
    ops: tuple[OpCost, ...]
    fastest_time_s: float
    """Per step, on the fastest group (equal to time_s when the groups are alike)."""


def links_per_group(dim: str, groups: Sequence[Sequence[int]], pricer: GroupPricer) -> list[GroupLinks]:
    """GroupLinks of every group (point-to-point chains for pipeline parallel)."""
    if dim == "pp":
        return [pricer.chain_links(group) for group in groups]
    return [pricer.links(group) for group in groups]


def dimension_cost(
    dim: str,
    groups: Sequence[Sequence[int]],
    pricer: GroupPricer,
    traffic: Sequence[Traffic],
    all_links: Sequence[GroupLinks] | None = None,
) -> DimensionCost:
    """Price `traffic` (this dimension's items) on every distinct group shape; keep the slowest.

    `all_links` (one per group) may be passed when already computed.
    """
    if all_links is None:
        all_links = links_per_group(dim, groups, pricer)
    distinct: dict[int, tuple[GroupLinks, int]] = {}
    for index, links in enumerate(all_links):
        distinct.setdefault(id(links), (links, index))
    priced: list[tuple[float, GroupLinks, int, tuple[OpCost, ...]]] = []
    memo: dict[GroupLinks, tuple[float, tuple[OpCost, ...]]] = {}
    for links, index in distinct.values():
        found = memo.get(links)
        if found is None:
            ops = tuple(
                OpCost(item.op, item.size_bytes, item.calls_per_step,
                       (cost := collective_cost(item.op, links, item.size_bytes)).algo, cost.time_s, item.what)
                for item in traffic
            )
            found = (sum(op.time_per_step_s for op in ops), ops)
            memo[links] = found
        priced.append((found[0], links, index, found[1]))
    slow = max(priced, key=lambda item: item[0])
    fast = min(priced, key=lambda item: item[0])
    time_s, links, index, ops = slow
    return DimensionCost(dim, time_s, links.bottleneck_label, links.bottleneck_class, tuple(groups[index]), ops, fast[0])


def step_costs(
    groups: Mapping[str, Sequence[Sequence[int]]],
    pricer: GroupPricer,
    traffic: Sequence[Traffic],
    links_of: Callable[[str], Sequence[GroupLinks]] | None = None,
) -> tuple[DimensionCost, ...]:
    """The cost of every dimension that has traffic, in the order the traffic lists them.

    `links_of(dim)` may supply already computed per-group links.
    """
    dims: list[str] = []
    for item in traffic:
        if item.dim not in dims:
            dims.append(item.dim)
    return tuple(
        dimension_cost(dim, groups[dim], pricer, [t for t in traffic if t.dim == dim], links_of(dim) if links_of else None)
        for dim in dims
    )
