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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from topo.rings import Ring, best_ring, ring_hops


@dataclass(frozen=True)
class RingSet:
    """Rings laid over disjoint links and what they carry together."""

    rings: tuple[Ring, ...]
    """Undirected cycles, best first; each carries two directed rings."""
    widths: tuple[int, ...]
    """Links of each cycle's thinnest bond (what it takes from every hop)."""
    total_gbps: float
    """Per-GPU ring bandwidth of all of them together."""

    @property
    def channels(self) -> int:
        """Directed one-link rings (NCCL channels over distinct links) the set runs at once: two per link of width."""
        return 2 * sum(self.widths)


def disjoint_rings(
    gpus: Sequence[int], links_between: Callable[[int, int], int], hop_gbps: Callable[[int, int], float],
    max_rings: int = 8,
) -> RingSet | None:
    """The rings over direct NVLink only through `gpus` (links_between(a, b): bonded links, 0 for none;
    hop_gbps(a, b): the whole bond's bandwidth, of which a ring of width w takes w / links).

    None when no ring over NVLink alone passes through every GPU (then one ring, PCIe hops
    included, is priced instead) or when the group has fewer than three GPUs.
    """
    if len(gpus) < 3:
        return None
    left = {(a, b): links_between(a, b) for a in gpus for b in gpus if a != b}
    rings: list[Ring] = []
    widths: list[int] = []
    total_gbps = 0.0
    while len(rings) < max_rings:
        ring = best_ring(gpus, lambda a, b: float(left[(a, b)]))
        width = int(ring.bottleneck_gbps)
        if width <= 0:
            break
        hops = ring_hops(ring)
        total_gbps += 2 * min(hop_gbps(a, b) * width / links_between(a, b) for a, b in hops)
        for a, b in hops:
            left[(a, b)] -= width
            left[(b, a)] -= width
        rings.append(ring)
        widths.append(width)
    if not rings:
        return None
    return RingSet(tuple(rings), tuple(widths), total_gbps)
