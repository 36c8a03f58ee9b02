"""What the rank map and the ring overlay show, computed from a check report's groups and placement.

Pure functions over plain sequences; linear in the number of ranks, so a 1,024-node layout
(8,192 ranks) takes a few milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.memo import remember_last


@remember_last
def rank_grid(placement: Sequence[tuple[int, int]], nodes: int, gpus_per_node: int) -> list[int]:
    """Flat node-major grid: `grid[node * gpus_per_node + gpu]` is the rank placed there, or -1 (read only: the
    last grid is kept, and a check that places the ranks as the one before hands over the same placement, so
    a keystroke in the Ranks form of a 1,024-host cluster does not lay out its 8,192 ranks again)."""
    grid = [-1] * (nodes * gpus_per_node)
    for rank, (node, gpu) in enumerate(placement):
        if 0 <= node < nodes and 0 <= gpu < gpus_per_node:
            grid[node * gpus_per_node + gpu] = rank
    return grid


def group_index(groups: Sequence[Sequence[int]], world_size: int) -> list[int]:
    """Per rank, the index of its group in `groups` (-1 when in none)."""
    index = [-1] * world_size
    for number, members in enumerate(groups):
        for rank in members:
            if 0 <= rank < world_size:
                index[rank] = number
    return index


@frozen
class RingOverlay:
    """The hops of a group's ring (in the order given, closed) as they fall on the nodes."""

    node: int
    """The node of the group's first rank: the one whose links are drawn."""
    hops: tuple[tuple[int, int], ...]
    """(GPU position, GPU position) hops inside that node."""
    off_node_hops: int
    """Hops between two different nodes."""
    nodes_touched: int


def ring_overlay(members: Sequence[int], placement: Sequence[tuple[int, int]]) -> RingOverlay:
    """The ring through `members` in the order given (pass the ring the checker priced,
    `CheckReport.ring`): its hops inside the first rank's node, and how many leave a node."""
    if not members:
        return RingOverlay(0, (), 0, 0)
    spots = [placement[rank] for rank in members if 0 <= rank < len(placement)]
    first_node = spots[0][0] if spots else 0
    hops: list[tuple[int, int]] = []
    off_node = 0
    count = len(spots)
    if count > 1:
        for position in range(count if count > 2 else 1):
            (node_a, gpu_a), (node_b, gpu_b) = spots[position], spots[(position + 1) % count]
            if node_a != node_b:
                off_node += 1
            elif node_a == first_node and gpu_a != gpu_b:
                hops.append((gpu_a, gpu_b))
    return RingOverlay(first_node, tuple(hops), off_node, len({node for node, _ in spots}))


def rank_ranges(members: Sequence[int]) -> str:
    """Ranks as compact ranges: `0-7`, `0,8,16,24`, `0-3,8-11`."""
    parts: list[str] = []
    ordered = list(members)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        parts.append(str(ordered[start]) if end == start else f"{ordered[start]}-{ordered[end]}")
        start = end + 1
    text = ",".join(parts)
    return text if len(text) <= 60 else text[:57] + "..."
