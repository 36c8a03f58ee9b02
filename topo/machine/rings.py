"""The best ring (or chain) through a set of GPUs: the Hamiltonian cycle whose slowest hop is fastest.

A ring collective runs at the speed of its slowest hop, and NCCL picks the ring, so what
matters is the best cycle through the group, not the worst pair in it: on a DGX-1 hybrid
cube mesh an 8-GPU ring over NVLink only exists although some pairs are SYS, while on a box
with NVLink bridges in pairs any 4-GPU ring has to cross PCIe twice. The search is exact (a
bitmask dynamic programme per bandwidth threshold) up to EXACT_LIMIT GPUs and a bounded
depth-first search beyond.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from linkscope.topo.common.frozen import frozen

EXACT_LIMIT = 12
"""Largest GPU count searched exactly (2^n states per threshold)."""

_SEARCH_BUDGET = 20000
"""Depth-first steps per threshold for larger sets before giving up on that threshold."""


@frozen
class Ring:
    """A cycle (or an open chain) through GPUs and the bandwidth of its slowest hop."""

    order: tuple[int, ...]
    bottleneck_gbps: float
    """math.inf for a single GPU (no hop at all)."""
    closed: bool = True


def best_ring(gpus: Sequence[int], bandwidth_gbps: Callable[[int, int], float]) -> Ring:
    """The Hamiltonian cycle through `gpus` that maximises its slowest hop."""
    return _search(tuple(gpus), bandwidth_gbps, closed=True)


def best_chain(gpus: Sequence[int], bandwidth_gbps: Callable[[int, int], float]) -> Ring:
    """The Hamiltonian path (any endpoints) through `gpus` that maximises its slowest hop.

    A ring that spans hosts enters and leaves each host once, through the network, so inside
    one host it is a chain.
    """
    return _search(tuple(gpus), bandwidth_gbps, closed=False)


def ring_hops(ring: Ring) -> list[tuple[int, int]]:
    """The (a, b) hops of a ring or chain, in order."""
    hops = list(zip(ring.order, ring.order[1:], strict=False))
    if ring.closed and len(ring.order) > 2:
        hops.append((ring.order[-1], ring.order[0]))
    return hops


def _search(gpus: tuple[int, ...], bandwidth_gbps: Callable[[int, int], float], closed: bool) -> Ring:
    count = len(gpus)
    if count <= 1:
        return Ring(gpus, math.inf, closed)
    matrix = [[bandwidth_gbps(a, b) if a != b else 0.0 for b in gpus] for a in gpus]
    if count == 2:
        return Ring(gpus, matrix[0][1], closed)
    thresholds = sorted({value for row in matrix for value in row if value > 0}, reverse=True)
    for threshold in thresholds:
        adjacency = [sum(1 << j for j in range(count) if matrix[i][j] >= threshold) for i in range(count)]
        path = _exact(adjacency, count, closed) if count <= EXACT_LIMIT else _greedy(adjacency, count, closed)
        if path is not None:
            order = tuple(gpus[i] for i in path)
            hops = list(itertools.pairwise(path))
            if closed:
                hops.append((path[-1], path[0]))
            return Ring(order, min(matrix[a][b] for a, b in hops), closed)
    return Ring(gpus, 0.0, closed)


def _exact(adjacency: list[int], count: int, closed: bool) -> list[int] | None:
    """Bitmask DP: reach[mask] = set of end vertices of paths covering `mask` (from vertex 0 when closed)."""
    full = (1 << count) - 1
    reach = [0] * (1 << count)
    if closed:
        reach[1] = 1
    else:
        for vertex in range(count):
            reach[1 << vertex] = 1 << vertex
    for mask in range(1, full + 1):
        ends = reach[mask]
        if not ends:
            continue
        for vertex in range(count):
            bit = 1 << vertex
            if mask & bit or not adjacency[vertex] & ends:
                continue
            reach[mask | bit] |= bit
    ends = reach[full]
    if closed:
        ends &= adjacency[0]
    if not ends:
        return None
    last = (ends & -ends).bit_length() - 1
    path = [last]
    mask = full
    while len(path) < count:
        previous_mask = mask ^ (1 << last)
        candidates = reach[previous_mask] & adjacency[last]
        last = (candidates & -candidates).bit_length() - 1
        path.append(last)
        mask = previous_mask
    path.reverse()
    return path


def _greedy(adjacency: list[int], count: int, closed: bool) -> list[int] | None:
    """Bounded depth-first search, fewest-exits-first (Warnsdorff), for sets beyond EXACT_LIMIT."""
    full = (1 << count) - 1
    if all(adjacency[i] | (1 << i) == full for i in range(count)):
        return list(range(count))
    budget = [_SEARCH_BUDGET]
    starts = [0] if closed else list(range(count))
    for start in starts:
        path = [start]
        if _extend(adjacency, path, 1 << start, full, closed, budget):
            return path
        if budget[0] <= 0:
            break
    return None


def _extend(adjacency: list[int], path: list[int], used: int, full: int, closed: bool, budget: list[int]) -> bool:
    if used == full:
        return not closed or bool(adjacency[path[-1]] & (1 << path[0]))
    budget[0] -= 1
    if budget[0] <= 0:
        return False
    free = adjacency[path[-1]] & ~used
    options = [v for v in range(len(adjacency)) if free >> v & 1]
    options.sort(key=lambda v: bin(adjacency[v] & ~used).count("1"))
    for vertex in options:
        path.append(vertex)
        if _extend(adjacency, path, used | (1 << vertex), full, closed, budget):
            return True
        path.pop()
    return False
