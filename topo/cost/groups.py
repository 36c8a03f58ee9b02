"""Price the links of process groups placed on a cluster, memoised by the group's shape.

Identical hosts make most groups alike: a group's links depend only on which GPU positions
it uses on each node (and what kind of host each node is), not on which nodes. Groups are
keyed by that signature, so 16,384 ranks cost a handful of ring searches.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from linkscope.topo.common.limits import MAX_KEPT_GROUPS
from linkscope.topo.cost.channels import RingSet, disjoint_rings
from linkscope.topo.cost.collectives import GroupLinks
from linkscope.topo.cost.params import (
    HOST_MEMORY_GBPS,
    CostModel,
    Hop,
    nvls_algbw_fraction,
)
from linkscope.topo.cost.protocols import (
    NVLS_CHANNELS,
    NVLS_TREE_CHANNELS,
)
from linkscope.topo.layout.placement import Placement, cluster_hosts, place_ranks
from linkscope.topo.machine.links import nvlink_generation
from linkscope.topo.machine.rings import Ring, best_chain, best_ring, ring_hops
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.snapshot import Snapshot

Signature = tuple[tuple[int, tuple[int, ...]], ...]
"""Per node of a group, sorted: (host class, sorted GPU positions)."""


class GroupLinksOfRanks:
    """The links of groups already priced on one placement, by their ranks: shared by a pricer and every pricer
    `rebind` makes from it, so the next check of the same placement (the app's Ranks form re-checks one snapshot on
    every keystroke, and a tp edit keeps the placement) looks a group up instead of working out its shape again.
    Working the shapes out was a third of a check of a 1,024-host cluster with odd nodes (10 ms), most of it in
    the few data-parallel groups of a thousand ranks, one per node."""

    def __init__(self) -> None:
        self._placement: Placement | None = None
        self._links: dict[tuple[int, ...], GroupLinks] = {}

    def on(self, placement: Placement) -> dict[tuple[int, ...], GroupLinks]:
        """The links kept for groups of `placement` (none when another placement was priced last, or too many)."""
        if self._placement is not placement or len(self._links) > MAX_KEPT_GROUPS:
            self._placement, self._links = placement, {}
        return self._links


class GroupPricer:
    """Computes GroupLinks for groups of global ranks on one placement, with memoisation."""

    def __init__(self, placement: Placement, model: CostModel) -> None:
        self.placement = placement
        self.model = model
        self._host_of_class: dict[int, Host] = {}
        for node, cls in enumerate(placement.host_class):
            self._host_of_class.setdefault(cls, placement.hosts[node])
        self._links: dict[Signature, GroupLinks] = {}
        self._hops: dict[tuple[int, int, int], Hop] = {}
        self._nics: dict[int, list[tuple[Hop, str]]] = {}
        self._sharers: dict[tuple[int, str], int] = {}
        self._rings: dict[tuple[int, tuple[int, ...], bool], Ring] = {}
        self._pair_hops: dict[tuple[int, int, int, int, bool], Hop] = {}
        self._chains: dict[Hop, GroupLinks] = {}
        self._switched: dict[int, bool] = {}
        self._ring_sets: dict[tuple[int, tuple[int, ...]], RingSet | None] = {}
        self._of_ranks = GroupLinksOfRanks()

    def rebind(self, placement: Placement) -> GroupPricer:
        """A pricer for another placement on the same hosts, sharing every memo (hosts must match)."""
        other = GroupPricer.__new__(GroupPricer)
        other.__dict__.update(self.__dict__)
        other.placement = placement
        return other

    def links_of(self, signature: Signature, count: int) -> GroupLinks:
        """GroupLinks for a group shape given directly (e.g. an alternative set of GPUs on one host)."""
        found = self._links.get(signature)
        if found is None:
            found = self._compute(signature, count)
            self._links[signature] = found
        return found

    def host(self, host_class: int) -> Host:
        """A host of the given identity class."""
        return self._host_of_class[host_class]

    def hop(self, host_class: int, a: int, b: int) -> Hop:
        """The hop between GPU positions `a` and `b` on a host of `host_class` (memoised)."""
        key = (host_class, a, b) if a < b else (host_class, b, a)
        hop = self._hops.get(key)
        if hop is None:
            hop = self.model.gpu_hop(self._host_of_class[host_class], key[1], key[2])
            self._hops[key] = hop
        return hop

    def nic(self, host_class: int, gpu: int) -> tuple[Hop, str]:
        """The network hop of a GPU position and its NIC's name (memoised: every GPU of the host class at once)."""
        hops = self._nics.get(host_class)
        if hops is None:
            hops = self._nics[host_class] = self.model.nic_hops(self._host_of_class[host_class])
        return hops[gpu]

    def nic_sharers(self, host_class: int, name: str) -> int:
        """How many GPUs of the host have the NIC `name` as their nearest: they all send through it at once,
        since every group of a dimension runs at the same time (memoised)."""
        key = (host_class, name)
        found = self._sharers.get(key)
        if found is None:
            host = self._host_of_class[host_class]
            found = max(1, sum(1 for gpu in range(len(host.gpus)) if self.nic(host_class, gpu)[1] == name))
            self._sharers[key] = found
        return found

    def ring(self, host_class: int, positions: tuple[int, ...], closed: bool = True) -> Ring:
        """The best ring (closed) or chain through `positions` of one host (memoised)."""
        key = (host_class, positions, closed)
        ring = self._rings.get(key)
        if ring is None:
            def bandwidth(a: int, b: int) -> float:
                return self.hop(host_class, a, b).bandwidth_gbps

            ring = best_ring(positions, bandwidth) if closed else best_chain(positions, bandwidth)
            self._rings[key] = ring
        return ring

    def signature(self, ranks: Sequence[int]) -> Signature:
        """The group's shape: per node, the host class and the sorted GPU positions it uses."""
        node_of, gpu_of = self.placement.node_of_rank, self.placement.gpu_of_rank
        per_node: dict[int, list[int]] = {}
        for rank in ranks:
            per_node.setdefault(node_of[rank], []).append(gpu_of[rank])
        classes = self.placement.host_class
        return tuple(sorted((classes[node], tuple(sorted(gpus))) for node, gpus in per_node.items()))

    def links(self, ranks: Sequence[int]) -> GroupLinks:
        """What a collective over `ranks` rides (memoised by the ranks on this placement, and by signature)."""
        kept = self._of_ranks.on(self.placement)
        key = tuple(ranks)
        found = kept.get(key)
        if found is None:
            found = kept[key] = self.links_of(self.signature(ranks), len(ranks))
        return found

    def ring_order(self, ranks: Sequence[int]) -> tuple[int, ...]:
        """`ranks` in the order of the ring priced for them: inside one node the best ring (`ring`),
        across nodes each node's best chain, nodes in the order of their first rank. This is the ring
        the costs assume, so it is the one to draw."""
        node_of, gpu_of, classes = self.placement.node_of_rank, self.placement.gpu_of_rank, self.placement.host_class
        per_node: dict[int, list[int]] = {}
        for rank in ranks:
            per_node.setdefault(node_of[rank], []).append(rank)
        order: list[int] = []
        for node, members in per_node.items():
            by_gpu = {gpu_of[rank]: rank for rank in members}
            if len(members) < 2 or len(by_gpu) != len(members):  # one rank, or ranks sharing a GPU: as given
                order.extend(members)
                continue
            ring = self.ring(classes[node], tuple(sorted(by_gpu)), closed=len(per_node) == 1)
            order.extend(by_gpu[gpu] for gpu in ring.order)
        return tuple(order)

    def ring_set(self, host_class: int, positions: tuple[int, ...]) -> RingSet | None:
        """The rings NCCL lays over disjoint direct NVLinks through `positions` (None on NVSwitch and
        PCIe boxes, or when no NVLink-only ring exists), memoised."""
        key = (host_class, positions)
        if key not in self._ring_sets:
            found = None
            if not self.switched(host_class):
                host = self.host(host_class)

                def links_between(a: int, b: int) -> int:
                    link = host.link(a, b)
                    return link.nvlink_count if link.kind is LinkKind.NVLINK else 0

                found = disjoint_rings(positions, links_between, lambda a, b: self.hop(host_class, a, b).bandwidth_gbps)
            self._ring_sets[key] = found
        return self._ring_sets[key]

    def nvls_gbps(self, host_class: int, ring_gbps: float, gpus: int) -> float:
        """NVLS all_reduce algbw inside a host of this class for a group of `gpus` GPUs there whose ring runs at
        `ring_gbps` (0 where NCCL has no NVLS: no NVSwitch, or NVLink before generation 4)."""
        if not self.switched(host_class):
            return 0.0
        return nvls_algbw_fraction(self.nvlink_generation(host_class), gpus) * ring_gbps

    def nvlink_generation(self, host_class: int, positions: tuple[int, ...] = (0, 1)) -> int:
        """The NVLink generation of the first two of `positions` on a host of this class, as their link says, else
        the slower GPU's (by default the host's first pair: on an NVSwitch box every pair is alike)."""
        host = self.host(host_class)
        first = host.link(positions[0], positions[1])
        return first.nvlink_gen or min(nvlink_generation(host.gpus[gpu], first.nvlink_count) for gpu in positions[:2])

    def _intra(self, host_class: int, positions: tuple[int, ...], closed: bool) -> tuple[float, float, str, str, int, list[str]]:
        """(bandwidth, alpha, label, class, rings, hop labels) of the rings a group runs through `positions` of one host."""
        ring = self.ring(host_class, positions, closed=closed)
        hops = [self.hop(host_class, a, b) for a, b in ring_hops(ring)]
        slowest = min(hops, key=lambda hop: hop.bandwidth_gbps)
        alpha = max(hop.alpha_us for hop in hops)
        labels = list(dict.fromkeys(hop.label for hop in hops))
        gbps, rings, label = slowest.bandwidth_gbps, 1, slowest.label
        found = self.ring_set(host_class, positions)
        if found is not None and found.total_gbps > gbps:
            gbps, rings = found.total_gbps, found.channels
            labels = list(dict.fromkeys(self.hop(host_class, a, b).label for a, b in found.hops()))
            label = f"{rings} rings over {' + '.join(sorted(labels, reverse=True))}"
        if any(hop.via_host for hop in hops):
            gbps = min(gbps, HOST_MEMORY_GBPS / (2 * len(positions)))
        return gbps, alpha, label, slowest.link_class, rings, labels

    def _compute(self, signature: Signature, count: int) -> GroupLinks:
        nodes = len(signature)
        gpus_per_node = max(len(positions) for _, positions in signature)
        intra_gbps, intra_alpha, intra_label, intra_class = math.inf, 0.0, "", "NV"
        pair_min, egress, rings, nvls = math.inf, math.inf, 1, math.inf
        used: list[str] = []
        distinct = tuple(dict.fromkeys(signature))  # nodes alike in class and GPUs price alike
        for host_class, positions in distinct:
            if len(positions) < 2:
                continue
            gbps, alpha, label, link_class, ring_count, labels = self._intra(host_class, positions, closed=nodes == 1)
            intra_alpha = max(intra_alpha, alpha)
            used.extend(labels)
            if gbps < intra_gbps:
                intra_gbps, intra_label, intra_class, rings = gbps, label, link_class, ring_count
            nvls = min(nvls, self.nvls_gbps(host_class, gbps, len(positions)))
            for i, a in enumerate(positions):
                for b in positions[i + 1 :]:
                    pair_min = min(pair_min, self.hop(host_class, a, b).bandwidth_gbps)
            if self.switched(host_class):
                egress = min(egress, self.hop(host_class, positions[0], positions[1]).bandwidth_gbps)
            else:
                egress = min(egress, *(self._direct_egress(host_class, gpu, positions) for gpu in positions))
        nvls = 0.0 if math.isinf(nvls) else nvls
        nvls_channels = 0
        if nvls > 0:
            generation = min(self.nvlink_generation(host_class) for host_class, _ in distinct)
            by_generation = NVLS_TREE_CHANNELS if nodes > 1 else NVLS_CHANNELS
            nvls_channels = by_generation.get(generation, by_generation[max(by_generation)])
        collnet = nodes > 1 and all(bool(self.host(host_class).capabilities.sharp) for host_class, _ in distinct)
        if nodes == 1:
            generation = 0
            if intra_class == "NV" and gpus_per_node > 1:
                generation = self.nvlink_generation(distinct[0][0], distinct[0][1])
            return GroupLinks(count, nodes, gpus_per_node, intra_alpha, intra_gbps, intra_label, intra_class,
                              pair_min_gbps=pair_min, egress_gbps=egress, intra_rings=rings, nvls_gbps=nvls,
                              nvls_channels=nvls_channels, nvlink_generation=generation,
                              links_used=tuple(dict.fromkeys(used)))
        node_net, rank_net, net_alpha, net_label, rails = math.inf, math.inf, 0.0, "", 1
        net_limit, assumed = "", list[str]()
        for host_class, positions in distinct:
            by_nic: dict[str, list[Hop]] = {}
            for gpu in positions:
                hop, name = self.nic(host_class, gpu)
                by_nic.setdefault(name, []).append(hop)
            aggregate = 0.0
            for name, hops in by_nic.items():
                slowest = min(hops, key=lambda hop: hop.bandwidth_gbps)
                sharers = max(len(hops), self.nic_sharers(host_class, name))
                aggregate += slowest.bandwidth_gbps * len(hops) / sharers
                share = slowest.bandwidth_gbps / sharers
                net_alpha = max(net_alpha, slowest.alpha_us)
                used.append(slowest.label)
                assumed.extend(hop.assumed for hop in hops if hop.assumed)
                if share < rank_net:
                    rank_net, net_limit = share, slowest.limit
                    net_label = slowest.label + (f", shared by {sharers} GPUs" if sharers > 1 else "")
            if aggregate < node_net:
                node_net, rails = aggregate, len(by_nic)
        return GroupLinks(count, nodes, gpus_per_node, intra_alpha, intra_gbps, intra_label, intra_class,
                          net_alpha, node_net, rank_net, net_label, pair_min, egress, rails, rings, nvls,
                          nvls_channels=nvls_channels, collnet=collnet, links_used=tuple(dict.fromkeys(used)),
                          net_limit=net_limit, net_assumed="; ".join(dict.fromkeys(assumed)))

    def _direct_egress(self, host_class: int, gpu: int, positions: tuple[int, ...]) -> float:
        """What `gpu` can send to the other `positions` at once on a box without NVSwitch: every direct
        NVLink to a peer is its own, but all PCIe peers share the GPU's one PCIe link (the fastest such path)."""
        nvlink, pcie = 0.0, 0.0
        for peer in positions:
            if peer == gpu:
                continue
            hop = self.hop(host_class, gpu, peer)
            if hop.link_class == "NV":
                nvlink += hop.bandwidth_gbps
            else:
                pcie = max(pcie, hop.bandwidth_gbps)
        return nvlink + pcie

    def chain_links(self, ranks: Sequence[int]) -> GroupLinks:
        """Links of point-to-point traffic between consecutive ranks (pipeline stage boundaries), memoised per hop."""
        node_of, gpu_of, classes = self.placement.node_of_rank, self.placement.gpu_of_rank, self.placement.host_class
        memo = self._pair_hops
        worst: Hop | None = None
        for a, b in itertools.pairwise(ranks):
            node_a, node_b = node_of[a], node_of[b]
            key = (classes[node_a], gpu_of[a], classes[node_b], gpu_of[b], node_a == node_b)
            hop = memo.get(key)
            if hop is None:
                hop = self._pair_hop(*key)
                memo[key] = hop
            if worst is None or hop.bandwidth_gbps < worst.bandwidth_gbps:
                worst = hop
        if worst is None:
            return GroupLinks(len(ranks), 1, 1, 0.0, math.inf, "", "NV")
        found = self._chains.get(worst)
        if found is None:
            found = GroupLinks(2, 1, 2, worst.alpha_us, worst.bandwidth_gbps, worst.label, worst.link_class)
            self._chains[worst] = found
        return found

    def _pair_hop(self, class_a: int, gpu_a: int, class_b: int, gpu_b: int, same_node: bool) -> Hop:
        if same_node:
            return self.hop(class_a, gpu_a, gpu_b)
        return min(self._rail(class_a, gpu_a), self._rail(class_b, gpu_b), key=lambda item: item.bandwidth_gbps)

    def switched(self, host_class: int) -> bool:
        """Whether hosts of this class are NVSwitch boxes (memoised: groups ask once per node)."""
        known = self._switched.get(host_class)
        if known is None:
            known = self._switched[host_class] = _is_switched(self.host(host_class))
        return known

    def _rail(self, host_class: int, gpu: int) -> Hop:
        """A GPU's network hop with its share of the NIC, when other GPUs of the host send through it too."""
        hop, name = self.nic(host_class, gpu)
        sharers = self.nic_sharers(host_class, name)
        if sharers == 1:
            return hop
        return Hop(hop.alpha_us, hop.bandwidth_gbps / sharers, hop.link_class, f"{hop.label}, shared by {sharers} GPUs")


NVLINK_PORTS_PER_GPU = 18
"""Most NVLink ports a GPU has (H100, B200): more bonded links to its peers than this must go through switches."""


def _is_switched(host: Host) -> bool:
    """True for an NVSwitch box, where every peer shares the GPU's links: the ports say so when the probe read
    them (remote is a switch); otherwise every pair is NVLink and a GPU shows more links to its peers than it has."""
    ports = [port for gpu in host.gpus for port in gpu.nvlinks if port.active and port.remote_type is not None]
    if ports:
        return any(port.remote_type == "switch" for port in ports)
    if len(host.gpus) < 3 or any(link.kind is not LinkKind.NVLINK for link in host.links):
        return False
    per_gpu = [0] * len(host.gpus)
    for link in host.links:
        per_gpu[link.a] += link.nvlink_count
        per_gpu[link.b] += link.nvlink_count
    return max(per_gpu) > NVLINK_PORTS_PER_GPU


def block_order_ring(snapshot: Snapshot, ranks: Sequence[int]) -> tuple[int, ...]:
    """`ranks` in the order of the ring priced for them when torchrun places the ranks in block order on
    copies of the snapshot's first host (what a profiler trace of a job says nothing more about)."""
    if not ranks or not snapshot.hosts or not snapshot.host.gpus:
        return tuple(ranks)
    world_size = max(ranks) + 1
    nodes = -(-world_size // len(snapshot.host.gpus))
    hosts, classes = cluster_hosts(snapshot, nodes)
    return GroupPricer(place_ranks(hosts, classes, world_size), CostModel()).ring_order(ranks)
