"""Collective algorithms priced on a group's links: ring, tree, NVLS, NVLS-tree, CollNet, hierarchical, `auto`.

Formulas (DOMAIN.md, nccl-tests conventions, NCCL's tuning model), B = the buffer in bytes, n ranks
over k nodes of g:
- ring all_reduce `2(n-1)` steps, all_gather / reduce_scatter `n-1` steps, each step moving
  B/n over every hop at once, so a step costs the slowest hop's `alpha + (B/n)/beta`; beta is the
  rings' sum where NCCL lays several rings over disjoint direct NVLinks (:mod:`topo.cost.channels`);
- tree all_reduce (NCCL: a chain inside each node, a double binary tree between nodes): latency
  `2((g-1) alpha_intra + ceil(log2 k) alpha_net)`, bandwidth term `2B/beta`;
- NVLS (NVLink SHARP, NVSwitch with NVLink 4+): the switch reduces and multicasts, all_reduce at
  `B / nvls_gbps` after a fixed 25 us, slower with the smaller chunks NCCL takes for smaller buffers and a pipeline
  to fill (:func:`nvls_stream_s`); across nodes NVLS-tree pipelines that with a tree between
  nodes over all the node's rails (B per direction on two nodes, 2B beyond);
- CollNet (SHARP in the network, when the snapshot says so): each node sends its buffer once;
- hierarchical all_reduce: reduce_scatter inside the node, all_reduce of the B/g shard across
  nodes (each GPU on its own rail), all_gather inside the node (a what-if; NCCL has no such algorithm,
  so `auto` does not pick it);
- all_to_all: every pair at once, bounded by the slowest pair, the GPU's egress (NVLink, PCIe) and the
  node's NICs for the bytes that leave the node;
- broadcast: pipelined ring or tree; send/recv: one hop.
`auto` takes the cheapest of what NCCL would consider, as NCCL's tuner takes the lowest predicted time.
"""

from __future__ import annotations

import math

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.params import (
    COLLNET_LATENCY_US,
    COLLNET_NET_FRACTION,
    NVLS_GATHER_FRACTION,
    NVLS_LATENCY_US,
    NVLS_NET_LATENCY_US,
)
from linkscope.topo.cost.protocols import (
    LL_MAX_BUSBW_GBPS,
    NCCL_PROTOCOLS,
    NVLINK_RING_STEP_LATENCY_US,
    NVLINK_TREE_STEP_LATENCY_US,
    NVLS_CHUNK_BYTES,
    NVLS_CHUNK_OVERHEAD_BYTES,
    NVLS_FILL_ROUNDS,
    RING_BASE_LATENCY_US,
    RING_PROTOCOL_BANDWIDTH_SHARE,
    TREE_BASE_LATENCY_US,
    TREE_PROTOCOL_BANDWIDTH_SHARE,
)
from linkscope.topo.model.busbw import PRICED_OPS, bus_factor

ALGORITHMS: tuple[str, ...] = ("ring", "tree", "nvls", "nvls_tree", "collnet", "hierarchical", "auto")
"""What `--algo` accepts (NCCL_ALGO's names, plus linkscope's what-if `hierarchical`)."""
NCCL_ALGORITHMS: tuple[str, ...] = ("ring", "tree", "nvls", "nvls_tree", "collnet")
"""The algorithms NCCL itself runs: the ones `auto` chooses among."""

@frozen
class GroupLinks:
    """What a collective over one group rides: the best ring's hops, the network, the slowest pair."""

    ranks: int
    nodes: int
    gpus_per_node: int
    """Most ranks of the group on one node."""
    intra_alpha_us: float
    intra_gbps: float
    """Slowest hop of the best ring (one node) or chain (several) inside a node; inf when one GPU per node."""
    intra_label: str
    intra_class: str
    net_alpha_us: float = 0.0
    node_net_gbps: float = math.inf
    """Network bandwidth one node gives the whole group (its distinct nearest NICs together)."""
    rank_net_gbps: float = math.inf
    """Network bandwidth of one GPU's rail (its nearest NIC, shared with group members on it)."""
    net_label: str = ""
    pair_min_gbps: float = math.inf
    """Slowest GPU pair inside a node (all_to_all talks to every peer)."""
    egress_gbps: float = math.inf
    """What one GPU can send to all its in-node peers at once: its NVLink egress on a switch, else its direct
    NVLinks plus its one PCIe link (shared by every PCIe peer); the smallest over the group's GPUs."""
    net_rails: int = 1
    """Distinct NICs (rails) node_net_gbps adds up, on the node where that sum is smallest."""
    intra_rings: int = 1
    """Directed rings (NCCL channels over distinct links) intra_gbps adds up: 1 on NVSwitch and PCIe,
    6 on a DGX-1 hybrid cube mesh."""
    nvls_gbps: float = 0.0
    """NVLS all_reduce algbw inside a node at NCCL's full NVLS chunk; 0 where NVLink SHARP is not available (no NVSwitch,
    pre-Hopper)."""
    nvls_channels: int = 0
    """NVLS channels NCCL runs for this group (:data:`topo.cost.protocols.NVLS_CHANNELS`); with the GPUs per node they set
    the chunk NCCL picks for a buffer (:func:`nvls_chunk_bytes`)."""
    nvlink_generation: int = 0
    """The NVLink generation of a ring over NVLink inside one node or NVLink domain, whose collectives are priced per
    NCCL protocol (:func:`nvlink_ring_time_s`); 0 otherwise (PCIe, several nodes, what-if links)."""
    collnet: bool = False
    """True when the network reduces in the switches (SHARP), so NCCL's CollNet applies across nodes."""
    links_used: tuple[str, ...] = ()
    """The links the group's collectives ride, for people: ring hops and NICs (`NV18`, `mlx5_0 400 Gb/s`)."""
    net_limit: str = ""
    """The part of the slowest GPU<->NIC path that sets its rate (:data:`topo.cost.params.NIC_PATH_PARTS`: `network`,
    `gpu-pcie`, `nic-pcie`, `inter-socket`); empty on one node."""
    net_assumed: str = ""
    """What the network figures assume that the snapshot does not say (the NICs' PCIe links, the CPUs), for people."""

    @property
    def net_description(self) -> str:
        """The network as a ring over the group sees it: one NIC, or N rails and their aggregate, for people."""
        if self.net_rails > 1:
            return (f"{self.net_rails} NIC rails per node (e.g. {self.net_label}; "
                    f"~{format_gbps(self.node_net_gbps / self.net_rails)} each, {format_gbps(self.node_net_gbps)} together)")
        return f"{self.net_label} ({format_gbps(self.node_net_gbps)})"

    @property
    def spans_network(self) -> bool:
        """True when the group's limit is its network path: it spans nodes, and either the network is its slower
        part or its in-node links are NVLink."""
        return self.nodes > 1 and (self.node_net_gbps <= self.intra_gbps or self.intra_class == "NV")

    @property
    def bottleneck_class(self) -> str:
        """The link class that limits a ring over this group: an intra class or `NET`. Across nodes the network
        path limits whenever it is the slower part or the nodes' GPUs talk over NVLink (NCCL's trees and
        NVLS-tree keep NVLink far from its limit there; the shortfall of such a group points at the network)."""
        if self.spans_network:
            return "NET"
        return self.intra_class

    @property
    def bottleneck_label(self) -> str:
        """The limiting link, for people."""
        if self.spans_network:
            return f"{self.net_rails} NIC rails (e.g. {self.net_label})" if self.net_rails > 1 else self.net_label
        return self.intra_label

    @property
    def ring_gbps(self) -> float:
        """Bandwidth of the best ring: its slowest hop, network included."""
        return min(self.intra_gbps, self.node_net_gbps) if self.nodes > 1 else self.intra_gbps


@frozen
class Cost:
    """The predicted time of one collective call."""

    op: str
    size_bytes: int
    ranks: int
    algo: str
    time_s: float
    channels: int = 1
    """Rings (or trees) the algorithm runs at once over distinct links."""
    links_used: tuple[str, ...] = ()
    """The links it rides, for people."""

    @property
    def algbw_gbps(self) -> float:
        """nccl-tests algbw: bytes / time."""
        return self.size_bytes / self.time_s / 1e9 if self.time_s > 0 else math.inf

    @property
    def busbw_gbps(self) -> float:
        """nccl-tests busbw: algbw x the op's bus factor."""
        return self.algbw_gbps * bus_factor(self.op, self.ranks) if self.ranks > 1 else 0.0


def _step_s(links: GroupLinks, chunk_bytes: float, net_gbps: float | None = None) -> float:
    """One ring step: every hop moves `chunk_bytes` at once; the slowest hop sets the pace.

    Between nodes a ring step uses the node's NICs together; pass `net_gbps` to price another
    network share (a point-to-point pair rides one GPU's rail).
    """
    step = 0.0
    if links.gpus_per_node > 1:
        step = links.intra_alpha_us * 1e-6 + chunk_bytes / (links.intra_gbps * 1e9)
    if links.nodes > 1:
        net = links.node_net_gbps if net_gbps is None else net_gbps
        step = max(step, links.net_alpha_us * 1e-6 + chunk_bytes / (net * 1e9))
    return step


def _send_recv_s(links: GroupLinks, size_bytes: float) -> float:
    """One point-to-point transfer: a pair crossing nodes rides one GPU's rail, not the node's NICs together."""
    return _step_s(links, size_bytes, links.rank_net_gbps)


def ring_time_s(op: str, links: GroupLinks, size_bytes: int) -> float:
    """A ring algorithm's time for `op` (send_recv: one hop of the slowest kind)."""
    n = links.ranks
    if n <= 1:
        return 0.0
    if links.nvlink_generation and op in ("all_reduce", "all_gather", "reduce_scatter"):
        return nvlink_ring_time_s(op, links, size_bytes)
    if op == "all_reduce":
        return 2 * (n - 1) * _step_s(links, size_bytes / n)
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) * _step_s(links, size_bytes / n)
    if op == "broadcast":
        alpha = max(links.intra_alpha_us if links.gpus_per_node > 1 else 0.0, links.net_alpha_us if links.nodes > 1 else 0.0)
        return (n - 1) * alpha * 1e-6 + size_bytes / (links.ring_gbps * 1e9)
    if op == "send_recv":
        return _send_recv_s(links, size_bytes)
    if op == "all_to_all":
        return all_to_all_time_s(links, size_bytes)
    raise ValueError(op)


def nvlink_ring_time_s(op: str, links: GroupLinks, size_bytes: int) -> float:
    """A ring collective over NVLink inside one node (or NVLink domain) as NCCL's tuner prices it: the cheapest of its
    protocols, each a fixed cost, a cost per ring step and a share of the ring's bandwidth (src/graph/tuning.cc). LL
    is quick to start but carries half the bandwidth, capped; LL128 and Simple take 41-56 us to start on 8 GPUs and
    carry most or all of it. Without this a ring over NVLink priced at 1 us a step is twice as fast as real rings from
    1 to 64 MiB (8x H100 on AWS p5, 8 GB200 GPUs over MNNVL: real files in tests/fixtures/real/nccl_tests/)."""
    n = links.ranks
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    return _nvlink_protocols_s(links, steps, size_bytes * steps / n)


def _nvlink_protocols_s(links: GroupLinks, steps: int, bus_bytes: float, tree: bool = False) -> float:
    """The cheapest NCCL protocol's time for `steps` steps over NVLink moving `bus_bytes` per GPU at the ring's busbw
    (ring or, with `tree`, the chain of a one-node tree and its shares)."""
    base = TREE_BASE_LATENCY_US if tree else RING_BASE_LATENCY_US
    per_step = NVLINK_TREE_STEP_LATENCY_US if tree else NVLINK_RING_STEP_LATENCY_US
    shares = TREE_PROTOCOL_BANDWIDTH_SHARE if tree else RING_PROTOCOL_BANDWIDTH_SHARE
    ll_cap = LL_MAX_BUSBW_GBPS.get(links.nvlink_generation, LL_MAX_BUSBW_GBPS[max(LL_MAX_BUSBW_GBPS)])
    best = math.inf
    for protocol in NCCL_PROTOCOLS:
        busbw = links.intra_gbps * shares[protocol]
        if protocol == "LL":
            busbw = min(busbw, ll_cap)
        latency_us = base[protocol] + steps * per_step[protocol]
        best = min(best, latency_us * 1e-6 + bus_bytes / (busbw * 1e9))
    return best


def tree_time_s(op: str, links: GroupLinks, size_bytes: int) -> float | None:
    """The tree algorithm's time (all_reduce and broadcast only; None where NCCL has no tree). Inside one NVLink node
    an all_reduce's tree is a chain up and down, priced per NCCL protocol as the ring is (:func:`nvlink_ring_time_s`)."""
    n = links.ranks
    if n <= 1 or op not in ("all_reduce", "broadcast"):
        return None
    if links.nvlink_generation and op == "all_reduce":
        return _nvlink_protocols_s(links, 2 * (n - 1), 2 * size_bytes, tree=True)
    depth_alpha_us = (links.gpus_per_node - 1) * links.intra_alpha_us
    if links.nodes > 1:
        depth_alpha_us += math.ceil(math.log2(links.nodes)) * links.net_alpha_us
    beta = links.ring_gbps * 1e9
    if op == "all_reduce":
        return 2 * depth_alpha_us * 1e-6 + 2 * size_bytes / beta
    return depth_alpha_us * 1e-6 + size_bytes / beta


def nvls_chunk_bytes(size_bytes: int, concurrent_ops: int, tree: bool = False, nodes: int = 1) -> int:
    """The NVLS chunk NCCL uses for a buffer of `size_bytes` when `concurrent_ops` (channels x GPUs of the NVLink
    domain) chunks are in flight: 128 KiB, halved while the buffer holds too few rounds of them (src/enqueue.cc,
    NCCL_ALGO_NVLS and NCCL_ALGO_NVLS_TREE branches; NVLS-tree chunks are at most 64 KiB from 4 nodes up, nvls.cc)."""
    chunk = NVLS_CHUNK_BYTES
    if tree:
        chunk = min(chunk, 64 * 1024 if nodes >= 4 else chunk)
        for rounds, floor in ((16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024)):
            if size_bytes < rounds * concurrent_ops * chunk and chunk > floor:
                chunk = floor
        return chunk
    for rounds, floor in ((64, 64 * 1024), (8, 32 * 1024), (2, 16 * 1024)):
        if size_bytes < rounds * concurrent_ops * chunk and chunk > floor:
            chunk = floor
    return chunk


def nvls_stream_s(links: GroupLinks, size_bytes: int, tree: bool = False) -> float:
    """The time the NVLS channels take to stream `size_bytes` through the switch: the chunk NCCL picks for the size
    runs at its share of the full-chunk rate (:data:`NVLS_CHUNK_OVERHEAD_BYTES`), and the pipeline fills and drains
    :data:`NVLS_FILL_ROUNDS` rounds of chunks. This is how NVLS reaches its peak with size: ~70% of it at 512 MiB over
    72 GPUs, whose rounds are nine times those of 8."""
    ops = max(1, links.nvls_channels) * links.gpus_per_node
    chunk = nvls_chunk_bytes(size_bytes, ops, tree, links.nodes)
    share = chunk / (chunk + NVLS_CHUNK_OVERHEAD_BYTES) * (NVLS_CHUNK_BYTES + NVLS_CHUNK_OVERHEAD_BYTES) / NVLS_CHUNK_BYTES
    streamed = size_bytes + NVLS_FILL_ROUNDS * ops * chunk if links.nvls_channels else size_bytes
    return streamed / (links.nvls_gbps * share * 1e9)


def nvls_time_s(op: str, links: GroupLinks, size_bytes: int) -> float | None:
    """NVLink SHARP inside one node (all_reduce, all_gather, reduce_scatter); across nodes only with CollNet.

    None where NCCL has no NVLS: no NVLS-capable switch, one GPU per node, another op, or several
    nodes without SHARP in the network.
    """
    g, k = links.gpus_per_node, links.nodes
    if links.nvls_gbps <= 0 or g < 2 or op not in ("all_reduce", "all_gather", "reduce_scatter"):
        return None
    if k > 1 and not (links.collnet and op == "all_reduce"):
        return None
    if op == "all_reduce":
        time = nvls_stream_s(links, size_bytes)
    else:
        time = size_bytes * (g - 1) / g / (NVLS_GATHER_FRACTION * links.intra_gbps * 1e9)
    latency_us = NVLS_LATENCY_US
    if k > 1:
        time = max(time, size_bytes / (COLLNET_NET_FRACTION * links.node_net_gbps * 1e9))
        latency_us += COLLNET_LATENCY_US
    return latency_us * 1e-6 + time


def nvls_tree_time_s(op: str, links: GroupLinks, size_bytes: int) -> float | None:
    """NVLS inside each node pipelined with a tree between nodes over all the node's rails (all_reduce).

    Between two nodes each node sends its whole buffer once each way; beyond two, up and down the tree.
    """
    g, k = links.gpus_per_node, links.nodes
    if links.nvls_gbps <= 0 or g < 2 or k < 2 or op != "all_reduce":
        return None
    net_bytes = size_bytes * (1 if k == 2 else 2)
    time = max(nvls_stream_s(links, size_bytes, tree=True), net_bytes / (links.node_net_gbps * 1e9))
    latency_us = NVLS_LATENCY_US + 2 * math.ceil(math.log2(k)) * NVLS_NET_LATENCY_US
    return latency_us * 1e-6 + time


def collnet_time_s(op: str, links: GroupLinks, size_bytes: int) -> float | None:
    """SHARP reduction in the network switches (CollNet direct, all_reduce across nodes): each node
    sends its buffer once and gets the result once, pipelined with the reduction inside the node."""
    if not links.collnet or links.nodes < 2 or op != "all_reduce":
        return None
    time = size_bytes / (COLLNET_NET_FRACTION * links.node_net_gbps * 1e9)
    latency_us = COLLNET_LATENCY_US
    if links.gpus_per_node > 1:
        time = max(time, size_bytes / (links.intra_gbps * 1e9))
        latency_us += 2 * (links.gpus_per_node - 1) * links.intra_alpha_us
    return latency_us * 1e-6 + time


def hierarchical_time_s(op: str, links: GroupLinks, size_bytes: int) -> float | None:
    """Inside-node then across-node phases (None when the group is on one node or one GPU per node)."""
    g, k = links.gpus_per_node, links.nodes
    if k <= 1 or g <= 1 or op not in ("all_reduce", "all_gather", "reduce_scatter"):
        return None
    intra = GroupLinks(g, 1, g, links.intra_alpha_us, links.intra_gbps, links.intra_label, links.intra_class)
    inter = GroupLinks(k, k, 1, 0.0, math.inf, "", "", links.net_alpha_us, links.rank_net_gbps, links.rank_net_gbps,
                       links.net_label)
    shard = size_bytes / g
    if op == "all_reduce":
        return 2 * ring_time_s("reduce_scatter", intra, size_bytes) + ring_time_s("all_reduce", inter, int(shard))
    return ring_time_s(op, intra, size_bytes) + ring_time_s(op, inter, int(shard))


def all_to_all_time_s(links: GroupLinks, size_bytes: int) -> float:
    """Every rank sends B/n to each peer at once: slowest pair, the GPU's egress and the node's NICs bound it."""
    n, g = links.ranks, links.gpus_per_node
    if n <= 1:
        return 0.0
    piece = size_bytes / n
    time = 0.0
    alpha_us = 0.0
    if g > 1:
        time = max(piece / (links.pair_min_gbps * 1e9), (g - 1) * piece / (links.egress_gbps * 1e9))
        alpha_us = links.intra_alpha_us
    if links.nodes > 1:
        leaving = g * (n - g) * piece
        time = max(time, leaving / (links.node_net_gbps * 1e9))
        alpha_us = max(alpha_us, links.net_alpha_us)
    return alpha_us * 1e-6 + time


def algorithm_times(op: str, links: GroupLinks, size_bytes: int) -> dict[str, float]:
    """The time of every algorithm that applies to `op` on these links, by name (ring always)."""
    candidates: dict[str, float | None] = {
        "ring": ring_time_s(op, links, size_bytes),
        "tree": tree_time_s(op, links, size_bytes),
        "nvls": nvls_time_s(op, links, size_bytes),
        "nvls_tree": nvls_tree_time_s(op, links, size_bytes),
        "collnet": collnet_time_s(op, links, size_bytes),
        "hierarchical": hierarchical_time_s(op, links, size_bytes),
    }
    return {name: time for name, time in candidates.items() if time is not None}


def collective_cost(op: str, links: GroupLinks, size_bytes: int, algo: str = "auto") -> Cost:
    """The time of `op` over a group with `links`: the one pricing function of check, plan, estimate and
    every expected figure. `auto` picks NCCL's cheapest algorithm for the size, as NCCL's tuner does;
    another name forces it, as NCCL_ALGO does."""
    if op not in PRICED_OPS:
        raise InputError(f"unknown operation {op!r} (known: {', '.join(PRICED_OPS)})")
    if algo not in ALGORITHMS:
        raise InputError(f"--algo: {algo!r} is not one of {', '.join(ALGORITHMS)}")
    times = algorithm_times(op, links, size_bytes)
    if algo == "auto":
        name, time = min(((name, time) for name, time in times.items() if name in NCCL_ALGORITHMS), key=lambda item: item[1])
    elif algo in times:
        name, time = algo, times[algo]
    else:
        raise InputError(f"--algo {algo}: not available for {op} over {links.ranks} ranks on {links.nodes} node(s)")
    channels = links.intra_rings if name == "ring" and links.gpus_per_node > 1 else 1
    used = links.links_used
    if name in ("nvls", "nvls_tree"):
        used = ("NVSwitch (NVLink SHARP)", *(label for label in used if not label.startswith("NV")))
    if op == "all_to_all" and name == "ring":
        name = "pairwise"
    if op == "send_recv":
        name = "p2p"
    return Cost(op, size_bytes, links.ranks, name, time, channels, used)


def uniform_links(ranks: int, nodes: int, intra: tuple[float, float], inter: tuple[float, float]) -> GroupLinks:
    """Links of a what-if cluster: `ranks` spread evenly over `nodes`, intra and inter (alpha_us, GB/s).

    The intra bandwidth is what one GPU sends inside its node (a switch port: every collective and
    all_to_all share it); the inter bandwidth is per GPU (one rail each), so a node's g ranks
    together get g times it.
    """
    if ranks < 1 or nodes < 1:
        raise InputError("--ranks and --nodes must be at least 1")
    if ranks % nodes:
        raise InputError(f"--ranks {ranks} does not spread evenly over --nodes {nodes}")
    per_node = ranks // nodes
    intra_alpha, intra_gbps = intra
    inter_alpha, inter_gbps = inter
    return GroupLinks(
        ranks, nodes, per_node,
        intra_alpha, intra_gbps if per_node > 1 else math.inf, "intra", "NV",
        inter_alpha, inter_gbps * per_node, inter_gbps, "inter",
        pair_min_gbps=intra_gbps, egress_gbps=intra_gbps, net_rails=per_node,
    )


WHAT_IF_INTRA = "1:300"
"""The what-if link inside a node: NVLink 3 (A100) as in the DOMAIN worked example, 1 us per hop, 300 GB/s."""
WHAT_IF_INTER = "5:12.5"
"""The what-if network: a 100 Gb/s port per GPU, 5 us per hop, 12.5 GB/s."""

_OP_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "alltoall": "all_to_all", "sendrecv": "send_recv", "bcast": "broadcast", "p2p": "send_recv"}


def parse_op(text: str, where: str) -> str:
    """A collective's name as people type it (`allreduce`, `all-gather`, `bcast`) in nccl-tests' spelling;
    InputError naming `where` for one the cost model does not price."""
    name = text.lower().replace("-", "_")
    name = _OP_ALIASES.get(name, name)
    if name not in PRICED_OPS:
        raise InputError(f"{where}: unknown operation {text!r} (known: {', '.join(PRICED_OPS)})")
    return name


def parse_alpha_beta(text: str, field: str) -> tuple[float, float]:
    """Parse `ALPHA_US:GBPS` (e.g. `1:300`); InputError naming `field` otherwise."""
    alpha_text, sep, gbps_text = text.partition(":")
    try:
        alpha, gbps = float(alpha_text), float(gbps_text)
    except ValueError:
        raise InputError(f"{field}: {text!r} is not ALPHA_US:GBPS (example: 1:300)") from None
    if not sep or alpha < 0 or gbps <= 0 or not math.isfinite(alpha) or not math.isfinite(gbps):
        raise InputError(f"{field}: {text!r} is not ALPHA_US:GBPS with alpha >= 0 and GB/s > 0 (example: 1:300)")
    return alpha, gbps
