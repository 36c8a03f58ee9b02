"""Several rings at once over direct NVLink: how NCCL's channels use a mesh of GPU-to-GPU links.

On a box whose GPUs are wired to each other (the DGX-1 hybrid cube mesh, NVLink-bridged pairs)
every NVLink is a separate full-duplex lane, so NCCL lays several rings over disjoint links and
runs them as separate channels. An undirected cycle of links carries two rings (one each way,
each direction of a link being its own lane), each as fast as the cycle's thinnest bond. Taking
the best cycle, removing the links it used and repeating gives the rings' sum; on the DGX-1 the
NV2 bonds form one cycle and the NV1 links another: 2 x 40 + 2 x 20 = 120 GB/s, where one ring
alone gives 40. On an NVSwitch box the `NV<n>` of every pair is the GPU's whole port count, so a
second ring would share the first one's links: one ring is all there is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from linkscope.topo.common.frozen import frozen
from linkscope.topo.machine.rings import Ring, best_ring, ring_hops


@frozen
class RingSet:
    """Rings laid over disjoint links and what they carry together."""

    cycles: tuple[tuple[int, ...], ...]
    """Undirected cycles (GPU order), widest first; each carries two directed rings."""
    widths: tuple[int, ...]
    """Links of each cycle's thinnest bond (what it takes from every hop)."""
    total_gbps: float
    """Per-GPU ring bandwidth of all of them together."""

    @property
    def channels(self) -> int:
        """Directed one-link rings (NCCL channels over distinct links) the set runs at once: two per link of width."""
        return 2 * sum(self.widths)

    def hops(self) -> list[tuple[int, int]]:
        """Every (a, b) hop of every cycle."""
        return [(cycle[i], cycle[(i + 1) % len(cycle)]) for cycle in self.cycles for i in range(len(cycle))]


EXACT_GPUS = 8
"""Largest group whose ring set is searched exactly (every Hamiltonian cycle over its NVLinks)."""

_CYCLE_LIMIT = 2000
"""More NVLink-only cycles than this: keep the greedy set."""

_SEARCH_BUDGET = 100_000
"""Search steps of the exact packing before settling for the best found."""


def disjoint_rings(
    gpus: Sequence[int], links_between: Callable[[int, int], int], hop_gbps: Callable[[int, int], float],
    max_rings: int = 9,
) -> RingSet | None:
    """The rings over direct NVLink only through `gpus` (links_between(a, b): bonded links, 0 for none;
    hop_gbps(a, b): the whole bond's bandwidth, of which a ring of width w takes w / links).

    The widest-cycle-first set is exact on the DGX-1; a full mesh of NV2 bonds (4 V100s) needs three
    one-link cycles where the greedy set finds one two-link cycle, so small groups are also packed
    exactly and the set with more one-link rings wins. None when no ring over NVLink alone passes
    through every GPU (then one ring, PCIe hops included, is priced instead) or for fewer than three GPUs.
    """
    gpus = tuple(gpus)
    if len(gpus) < 3:
        return None
    links = {(a, b): links_between(a, b) for a in gpus for b in gpus if a != b}
    chosen = _greedy(gpus, links, max_rings)
    if len(gpus) <= EXACT_GPUS:
        packed = _packed(gpus, links, max_rings)
        if packed is not None and sum(width for _, width in packed) > sum(width for _, width in chosen):
            chosen = packed
    if not chosen:
        return None
    total_gbps = 0.0
    for ring, width in chosen:
        total_gbps += 2 * min(hop_gbps(a, b) * width / links[(a, b)] for a, b in ring_hops(ring))
    return RingSet(tuple(ring.order for ring, _ in chosen), tuple(width for _, width in chosen), total_gbps)


def _greedy(gpus: tuple[int, ...], links: dict[tuple[int, int], int], max_rings: int) -> list[tuple[Ring, int]]:
    """Widest cycle first, its links removed, repeated."""
    left = dict(links)
    chosen: list[tuple[Ring, int]] = []
    while len(chosen) < max_rings:
        ring = best_ring(gpus, lambda a, b: float(left[(a, b)]))
        width = int(ring.bottleneck_gbps)
        if width <= 0:
            break
        for a, b in ring_hops(ring):
            left[(a, b)] -= width
            left[(b, a)] -= width
        chosen.append((ring, width))
    return chosen


def _cycles(gpus: tuple[int, ...], links: dict[tuple[int, int], int]) -> list[tuple[int, ...]] | None:
    """Every Hamiltonian cycle over NVLink pairs, once each (from the first GPU, one direction); None past the limit."""
    first, found = gpus[0], []

    def extend(path: list[int], used: set[int]) -> bool:
        if len(path) == len(gpus):
            if links[(path[-1], first)] > 0 and path[1] < path[-1]:
                found.append(tuple(path))
            return len(found) <= _CYCLE_LIMIT
        for gpu in gpus:
            if gpu not in used and links[(path[-1], gpu)] > 0:
                path.append(gpu)
                used.add(gpu)
                if not extend(path, used):
                    return False
                used.discard(gpu)
                path.pop()
        return True

    return found if extend([first], {first}) else None


def _packed(gpus: tuple[int, ...], links: dict[tuple[int, int], int], max_rings: int) -> list[tuple[Ring, int]] | None:
    """The most one-link cycles the links hold at once (bounded search), merged into widths."""
    cycles = _cycles(gpus, links)
    if not cycles:
        return None
    edges = [[(c[i], c[(i + 1) % len(c)]) for i in range(len(c))] for c in cycles]
    left = dict(links)
    best: list[int] = []
    budget = [_SEARCH_BUDGET]

    def bound() -> int:
        return min(sum(left[(a, b)] for b in gpus if b != a) // 2 for a in gpus)

    def search(start: int, picked: list[int]) -> None:
        if len(picked) > len(best):
            best[:] = picked
        budget[0] -= 1
        if budget[0] <= 0 or len(picked) >= max_rings or len(picked) + bound() <= len(best):
            return
        for index in range(start, len(cycles)):
            hops = edges[index]
            if all(left[hop] > 0 for hop in hops):
                for a, b in hops:
                    left[(a, b)] -= 1
                    left[(b, a)] -= 1
                search(index, [*picked, index])
                for a, b in hops:
                    left[(a, b)] += 1
                    left[(b, a)] += 1

    search(0, [])
    counts: dict[int, int] = {}
    for index in best:
        counts[index] = counts.get(index, 0) + 1
    return [(Ring(cycles[index], math.nan), width) for index, width in counts.items()]
