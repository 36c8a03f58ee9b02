"""Alpha-beta parameters per link: what one hop of a collective costs on each link class.

Moving b bytes over a hop costs `alpha + b / beta`. Defaults, and where they come from:

- NVLink beta = bonded link count x a per-link ring bandwidth per generation, NCCL's own
  constants (src/graph/topo.h, used by tuning.cc): 20 GB/s per link on V100 and A100, 20.6 on
  H100, 40 on B200. They match measured ring all_reduce busbw (A100 ~230, H100 ~370 GB/s).
- PCIe beta = the typical copy rate of the slower GPU's PCIe link, reduced for paths through
  the CPU and across sockets (:func:`topo.machine.links.link_speed`).
- Network beta = the line rate of the GPU's nearest NIC port times the share NCCL reaches on its fabric
  (:data:`NIC_EFFICIENCY`: InfiniBand 93%, RoCE and Google's gIB 80%, AWS EFA 60%, each from published runs;
  the fabric is what the snapshot says of the port, InfiniBand assumed when it says nothing), reduced like a
  PCIe path when the NIC is not under the GPU's own PCIe switch, unless an NVLink peer sits under the NIC's
  switch: NCCL's PXN then relays the traffic over NVLink instead of the CPU.
- PCIe pairs without peer-to-peer (nvidia-smi topo -p2p `NS`, GeForce cards, most VMs): NCCL's SHM
  transport stages every chunk through host memory and reaches about two thirds of the GPU's PCIe
  copy rate (HOST_PATH_FRACTION); all GPUs of the ring share the host's memory (HOST_MEMORY_GBPS).
- Alpha: NVLink 1 us and network 5 us as in the DOMAIN worked example; PCIe hops 2-5 us, between
  NCCL's LL and Simple hop latencies (tuning.cc `hwLat`) and the measured 14-19 us of PCIe copies
  without P2P.
- NVLink SHARP (NVLS) and CollNet: their bandwidth shares and fixed latencies below, from NCCL's
  tuning model and published nccl-tests figures (see :mod:`topo.cost.published`).
Everything can be overridden from a JSON file and calibrated from measurements.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps
from linkscope.topo.machine.links import (
    PCIE_PATH_FACTOR,
    gpu_pcie_speed,
    link_speed,
    nic_pcie_speed,
    nvlink_generation,
)
from linkscope.topo.model.host import Host, Link, LinkKind, Nic, parse_link_token

NCCL_NVLINK_RING_GBPS_PER_LINK: dict[int, float] = {2: 20.0, 3: 20.0, 4: 20.6, 5: 40.0}
"""Per-link NVLink bandwidth NCCL assumes for rings, by NVLink generation (topo.h SM70/80/90/100)."""

NCCL_NVLINK_RING_CAP_GBPS: dict[int, float] = {3: 235.0}
"""Ring bandwidth cap NCCL's tuning model puts on a GPU's NVLinks, by generation (tuning.cc: A100,
sm80, at most 235 GB/s; measured 8x A100 ring busbw ~230)."""

NVLS_ALLREDUCE_FRACTION: dict[int, float] = {4: 0.74, 5: 0.67}
"""NVLS all_reduce algbw at 8 GPUs as a share of the GPU's NCCL NVLink ring bandwidth, by NVLink generation:
8x H100 reach algbw ~275 (busbw ~480) of 18 x 20.6 = 370.8 GB/s (NCCL maintainer, nccl-tests #212);
8x B300 reach algbw 483 of 18 x 40 = 720 (NVIDIA/nccl #2140). NVLS needs NVSwitch and NVLink 4+."""

NVLS_BUSBW_GAIN_H100: dict[int, float] = {2: 1.0, 3: 1.0, 4: 1.0, 5: 420 / 370, 6: 440 / 370, 7: 460 / 370, 8: 480 / 370}
"""NVLS all_reduce busbw over the ring's, by GPUs in the node (8x H100 SXM, NCCL_ALGO=NVLS against RING, 2-4 GiB:
NVIDIA/nccl #1455): no gain from 2 to 4 GPUs (365-370 GB/s alike), then 420, 440, 460 and 480 GB/s from 5 to 8."""


def nvls_algbw_fraction(generation: int, gpus: int) -> float:
    """NVLS all_reduce algbw as a share of the GPU's NCCL NVLink ring bandwidth, for `gpus` GPUs of one NVLink domain
    (0 where NCCL has no NVLS). At 8 GPUs :data:`NVLS_ALLREDUCE_FRACTION`; below, the gain over the ring shrinks as
    :data:`NVLS_BUSBW_GAIN_H100` measured it, to none at 4 GPUs and fewer (the same shape is assumed for NVLink 5,
    whose gain at 8 is published, not below). A fraction f means busbw = f x ring x 2(g-1)/g.

    Beyond 8 GPUs (a multi-node NVLink domain such as GB200 NVL72) the algbw stays at the 8-GPU figure: the switch
    reduces and multicasts, so each GPU sends and receives its buffer once whatever the group's size, and busbw grows
    with 2(g-1)/g (8 GB200 GPUs over MNNVL and 72 in one rack both reach ~438 GB/s algbw with 64 KiB NVLS chunks, the
    size-to-time slopes of the real files tests/fixtures/real/nccl_tests/gb200-nvl72-{2node-8gpu,full-rack-72rank}*)."""
    fraction = NVLS_ALLREDUCE_FRACTION.get(generation)
    if fraction is None:
        fraction = NVLS_ALLREDUCE_FRACTION[max(NVLS_ALLREDUCE_FRACTION)] if generation > 5 else 0.0
    if fraction == 0.0 or gpus < 2:
        return 0.0
    gpus = min(gpus, 8)
    full_gain = fraction * 2 * 7 / 8  # busbw over the ring's at 8 GPUs: 1.295 on NVLink 4, 1.17 on NVLink 5
    h100 = NVLS_BUSBW_GAIN_H100[gpus]
    gain = 1 + (h100 - 1) * (full_gain - 1) / (NVLS_BUSBW_GAIN_H100[8] - 1)
    return gain / (2 * (gpus - 1) / gpus)


NVLS_GATHER_FRACTION = 0.85
"""NVLS all_gather / reduce_scatter algbw as a share of the ring bandwidth (NCCL's Hopper NVLS
efficiency in tuning.cc): below the ring's, so NCCL (and `auto`) keeps rings for them on one node."""

NVLS_LATENCY_US = 25.0
"""Fixed cost of an NVLS collective inside a node (NCCL tuning.cc NVLink NVLS Simple latency)."""

NVLS_NET_LATENCY_US = 20.9
"""Per tree level across nodes of NVLS-tree (NCCL tuning.cc network NVLSTree Simple latency)."""

COLLNET_LATENCY_US = 31.0
"""Fixed cost of a CollNet (SHARP) all_reduce across nodes (NCCL tuning.cc network CollNetDirect latency)."""

COLLNET_NET_FRACTION = 0.9
"""CollNet reaches 90% of the node's network bandwidth, each node sending its buffer once (tuning.cc)."""

HOST_PATH_FRACTION = 0.68
"""Share of a GPU's PCIe copy rate that NCCL's SHM transport (through host memory, no P2P) reaches:
4x RTX 5090 (PCIe Gen5, 51.7 GB/s typical copies) all_reduce at 35 GB/s busbw (NVIDIA/nccl #1639)."""

HOST_MEMORY_GBPS = 450.0
"""Host memory traffic a 2-socket server sustains for GPU rings through host memory: every GPU writes
and reads each chunk, so n GPUs at busbw b move 2 n b; 8x RTX 5090 plateau at 28 GB/s busbw
(NVIDIA/nccl #1639: 8 x 2 x 28 = 448 GB/s), where 4 reach 35."""

DEFAULT_ALPHA_US: dict[str, float] = {
    "NV": 1.0,
    "PIX": 2.0,
    "PXB": 2.0,
    "PHB": 3.0,
    "NODE": 3.0,
    "SYS": 5.0,
    "NET": 5.0,
}
"""Per-hop latency by link class (see the module docstring for the sources)."""

DEFAULT_NIC_GBIT = 100.0
"""NIC line rate assumed when the snapshot has no NIC (or no rate for it)."""

NIC_EFFICIENCY: dict[str, float] = {"InfiniBand": 0.93, "RoCE": 0.80, "gIB": 0.76, "EFA": 0.80}
"""Share of a NIC's line rate NCCL's busbw reaches through it, by fabric (see :data:`NIC_EFFICIENCY_SOURCES`)."""

NIC_EFFICIENCY_SOURCES: dict[str, str] = {
    "InfiniBand": "NDR 400 Gb/s reaches 46.5 of 50 GB/s (2x 8 B200 on InfiniBand: all_reduce busbw 702.9 where the "
                  "node's 8 NICs bound it, dstack Lambda cluster example)",
    "RoCE": "2x 8 H200 on 8x 400G RoCE (NVIDIA/nccl-tests #256, NVLS-tree bound) and 4x 8 H100 on 8x 400G RoCE "
            "(NVIDIA/nccl #1221: ~320 from 3 nodes up)",
    "gIB": "Google Cloud gIB (RoCE on ConnectX-7): one 400G NIC per H200 reaches 31.9 GB/s (google/dranet MPI "
           "Operator example), one per B200 45.1 GB/s, 2x 8 B200 all_reduce 683.5 (dstack GCP A4 example)",
    "EFA": "AWS EFA: 2x p5.48xlarge (8 H100, 3200 Gb/s EFA each) all_reduce busbw 438.9 on 16 ranks, NVLS-tree bound "
           "by the network (aws-samples/aws-do-eks nccl-test README)",
}
"""Where each fabric's efficiency comes from (published nccl-tests runs, in :mod:`topo.cost.published` too)."""

_GIB_NETDEV = re.compile(r"gpu\d+rdma\d+")
"""Google Cloud's names of the RDMA NICs of a GPU VM (gIB): `gpu0rdma0`."""


def nic_fabric(nic: Nic) -> str | None:
    """The fabric a NIC is on, as the snapshot says it: AWS EFA (`efa*`, `rdmap*` devices), Google gIB (`gpuNrdmaM`
    interfaces), InfiniBand or RoCE (the port's link layer); None when it does not say."""
    names = (nic.name.lower(), (nic.netdev or "").lower())
    if any(name.startswith(("efa", "rdmap")) for name in names):
        return "EFA"
    if any(_GIB_NETDEV.fullmatch(name) for name in names):
        return "gIB"
    if nic.link_layer is not None and nic.link_layer.lower() == "infiniband":
        return "InfiniBand"
    if nic.link_layer is not None and nic.link_layer.lower() == "ethernet":
        return "RoCE"
    return None


def nic_efficiency(nic: Nic | None) -> tuple[float, str]:
    """Share of line rate NCCL reaches through `nic`, and its fabric as said (`InfiniBand assumed` when unknown)."""
    fabric = nic_fabric(nic) if nic is not None else None
    if fabric is None:
        return NIC_EFFICIENCY["InfiniBand"], "InfiniBand assumed"
    return NIC_EFFICIENCY[fabric], fabric

INTER_SOCKET_GBPS: dict[str, float] = {
    "Intel Broadwell": 6.0, "Intel Skylake": 10.0, "Intel Sapphire Rapids": 22.0, "Intel Emerald Rapids": 40.0,
    "AMD": 16.0, "POWER9": 32.0, "Arm": 6.0,
}
"""What a path across the CPUs' socket link carries, by CPU: the figures NCCL itself plans with for a path between
sockets (src/graph/topo.h BDW_QPI_BW, SKL_QPI_BW, SRP_QPI_BW, ERP_QPI_BW, AMD_BW, P9_BW, ARM_BW; topo.cc
ncclTopoGetInterCpuBw). A GPU and a NIC on different sockets (`SYS`) reach each other at most at this rate."""

INTER_SOCKET_ASSUMED = "Intel Skylake"
"""The CPU assumed for a socket crossing when the snapshot names none (its figure is NCCL's for Intel Xeon Scalable
from Skylake on, below Sapphire Rapids' and AMD's: a cross-socket NIC is not expected to do better)."""

NIC_PATH_PARTS: tuple[str, ...] = ("network", "gpu-pcie", "nic-pcie", "inter-socket")
"""The parts of a GPU<->NIC path that can set its rate: the NIC's rate on its fabric, the GPU's PCIe link, the NIC's
PCIe link, the socket link a SYS path crosses."""


LINK_CLASSES: tuple[str, ...] = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
"""Link classes of the cost model, fastest first: NVLink, the PCIe path classes, the network."""


@frozen
class Hop:
    """One hop of a collective: latency, bandwidth, and what link it is."""

    alpha_us: float
    bandwidth_gbps: float
    link_class: str
    """One of LINK_CLASSES."""
    label: str
    """For people: `NV18`, `SYS`, `mlx5_0 400 Gb/s`."""
    via_host: bool = False
    """True for a PCIe pair without peer-to-peer: every chunk is staged through host memory."""
    limit: str = ""
    """For a network hop, the part of the GPU<->NIC path that sets its rate (one of :data:`NIC_PATH_PARTS`);
    empty for a hop between GPUs."""
    assumed: str = ""
    """What the hop's figure assumes that the snapshot does not say (the NIC's PCIe link, the CPU), for people."""


@frozen
class CostModel:
    """Alpha-beta parameters: defaults plus overrides from a file and calibration from measurements."""

    nvlink_gbps_per_link: Mapping[int, float] = field(default_factory=lambda: dict(NCCL_NVLINK_RING_GBPS_PER_LINK))
    alpha_us: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_ALPHA_US))
    class_gbps: Mapping[str, float] = field(default_factory=dict)
    """Fixed bandwidth per link class (overrides the derived figure)."""
    class_scale: Mapping[str, float] = field(default_factory=dict)
    """Calibration factor per link class (measured / predicted)."""
    pair_gbps: Mapping[tuple[int, int], float] = field(default_factory=dict)
    """Measured bandwidth per GPU pair (positions, a < b), from peer copies."""
    pair_alpha_us: Mapping[tuple[int, int], float] = field(default_factory=dict)
    default_nic_gbit: float = DEFAULT_NIC_GBIT
    nic_path_penalty: bool = True
    """Charge a GPU whose nearest NIC is not under its PCIe switch (PHB/NODE/SYS) for the longer path."""
    sources: tuple[str, ...] = ("defaults: NCCL ring constants, topo.machine.links",)
    """Where the parameters came from, for people reading the output."""

    def _scaled(self, link_class: str, gbps: float) -> float:
        if link_class in self.class_gbps:
            return self.class_gbps[link_class]
        return gbps * self.class_scale.get(link_class, 1.0)

    def gpu_hop(self, host: Host, a: int, b: int) -> Hop:
        """The hop between GPU positions `a` and `b` of `host` (a pair the snapshot lacks counts as SYS)."""
        key = (min(a, b), max(a, b))
        try:
            link = host.link(a, b)
        except KeyError:
            link = Link(key[0], key[1], LinkKind.SYS)
        if link.kind is LinkKind.NVLINK:
            generation = link.nvlink_gen or nvlink_generation(host.gpus[link.a], link.nvlink_count)
            per_link = self.nvlink_gbps_per_link.get(generation, NCCL_NVLINK_RING_GBPS_PER_LINK[4])
            link_class, gbps = "NV", per_link * link.nvlink_count
            gbps = min(gbps, NCCL_NVLINK_RING_CAP_GBPS.get(generation, math.inf))
        else:
            link_class, gbps = link.kind.value, link_speed(host, link).typical_gbps
        via_host = link.kind.is_pcie and link.p2p is not None and not link.p2p.any_ok
        if key in self.pair_gbps:
            gbps = self.pair_gbps[key] * (HOST_PATH_FRACTION if via_host else 1.0)
        elif via_host:
            gbps = min(gbps, gbps / PCIE_PATH_FACTOR[link.kind] * HOST_PATH_FRACTION)
        gbps = self._scaled(link_class, gbps)
        alpha = self.pair_alpha_us.get(key, self.alpha_us.get(link_class, DEFAULT_ALPHA_US[link_class]))
        return Hop(alpha, gbps, link_class, link.token, via_host)

    def nic_hop(self, host: Host, gpu: int) -> tuple[Hop, str]:
        """The network hop of GPU position `gpu`: its nearest active NIC (and that NIC's name), as fast as the
        narrowest part of the path from the GPU to the wire (:data:`NIC_PATH_PARTS`): the NIC's rate at its fabric's
        efficiency, the GPU's PCIe link (generation x current width: a GPU trained to x8 halves its rail), the NIC's
        PCIe link (when the snapshot read it; assumed no narrower otherwise, and said), and across sockets (`SYS`) the
        socket link (:data:`INTER_SOCKET_GBPS`). A path through the CPU (PHB, NODE, SYS) loses a share of the rest on
        the way (:data:`topo.machine.links.PCIE_PATH_FACTOR`) unless PXN relays it through an NVLink peer under the
        NIC's switch.

        NICs equally near (same path class and rate) are dealt out in turn to the GPUs that share
        them, as NCCL pairs GPUs with NICs: on a DGX A100 two GPUs and two NICs under one PCIe
        switch get one NIC each, not both the first.
        """
        return self._nic_hop(host, gpu, [self._nearest_nics(host, position) for position in range(gpu + 1)])

    def nic_hops(self, host: Host) -> list[tuple[Hop, str]]:
        """:meth:`nic_hop` of every GPU of `host`, in position order (each GPU's nearest NICs found once)."""
        nearest = [self._nearest_nics(host, position) for position in range(len(host.gpus))]
        return [self._nic_hop(host, position, nearest) for position in range(len(host.gpus))]

    def _nic_hop(self, host: Host, gpu: int, nearest_of: list[list[tuple[str, float, str, int]]]) -> tuple[Hop, str]:
        """:meth:`nic_hop`, given the nearest NICs of GPU positions 0..gpu at least."""
        nearest = nearest_of[gpu]
        if not nearest:
            share, fabric = nic_efficiency(None)
            gbps = self._scaled("NET", self.default_nic_gbit / 8 * share)
            return Hop(self.alpha_us.get("NET", 5.0), gbps, "NET",
                       f"network (no NIC known, {self.default_nic_gbit:g} Gb/s, {fabric})", limit="network",
                       assumed=f"no NIC in the snapshot: {self.default_nic_gbit:g} Gb/s assumed"), ""
        turn = sum(1 for other in range(gpu) if nearest_of[other] == nearest)
        name, rate, path, column = nearest[turn % len(nearest)]
        nic = host.nics[column]
        share, fabric = nic_efficiency(nic)
        relay = self._pxn_relay(host, gpu, column) if path not in ("PIX", "PXB") else None
        parts, assumed = self._nic_path_parts(host, relay if relay is not None else gpu, nic, rate / 8 * share,
                                              path if relay is None else "PIX")
        if self.nic_path_penalty and relay is None:  # through the CPU: every part loses a share, not the socket link
            loss = PCIE_PATH_FACTOR[LinkKind(path)]
            parts = [(part_gbps * (1.0 if part == "inter-socket" else loss), part, words) for part_gbps, part, words in parts]
        gbps, limit, narrow = min(parts)
        gbps = self._scaled("NET", gbps)
        narrow = f", {narrow}" if narrow else ""
        if relay is not None:
            label = f"{name} {rate:g} Gb/s {fabric} via PXN (GPU {host.gpus[relay].index}){narrow}"
        else:
            label = f"{name} {rate:g} Gb/s {fabric}" + ("" if path in ("PIX", "PXB") else f" via {path}") + narrow
        return Hop(self.alpha_us.get("NET", 5.0), gbps, "NET", label, limit=limit, assumed="; ".join(assumed)), name

    def _nic_path_parts(self, host: Host, gpu: int, nic: Nic, network_gbps: float,
                        path: str) -> tuple[list[tuple[float, str, str]], list[str]]:
        """(GB/s, part, words for people) of each part of the path from GPU position `gpu` to `nic` that can bound
        it, the network first, and what was assumed where the snapshot says nothing."""
        parts: list[tuple[float, str, str]] = [(network_gbps, "network", "")]
        assumed: list[str] = []
        if not self.nic_path_penalty:  # the what-if of a NIC under every GPU's switch: the NIC's rate alone
            return parts, assumed
        gpu_side = gpu_pcie_speed(host, gpu)
        parts.append((gpu_side.typical_gbps, "gpu-pcie", f"GPU on {gpu_side.basis}"))
        nic_side = nic_pcie_speed(nic)
        if nic_side is None:
            assumed.append("NIC PCIe links no narrower than the NICs' rates (not read)")
        else:
            parts.append((nic_side.typical_gbps, "nic-pcie", f"NIC on {nic_side.basis}"))
        if path == "SYS":
            cpu = INTER_SOCKET_ASSUMED
            socket = format_gbps(INTER_SOCKET_GBPS[cpu])
            parts.append((INTER_SOCKET_GBPS[cpu], "inter-socket", f"across sockets (~{socket}, {cpu} assumed)"))
            assumed.append(f"a socket link of {cpu} ({socket}, NCCL's figure; the CPUs are not named)")
        return parts, assumed

    def _pxn_relay(self, host: Host, gpu: int, column: int) -> int | None:
        """The NVLink peer under the same PCIe switch as NIC `column` (PIX/PXB), through which NCCL's PXN
        sends `gpu`'s network traffic instead of crossing the CPU; None when there is none."""
        for peer in range(len(host.gpus)):
            if peer == gpu or peer >= len(host.gpu_nic) or column >= len(host.gpu_nic[peer]):
                continue
            if host.gpu_nic[peer][column] in ("PIX", "PXB") and host.link(gpu, peer).kind is LinkKind.NVLINK:
                return peer
        return None

    def _nearest_nics(self, host: Host, gpu: int) -> list[tuple[str, float, str, int]]:
        """(name, rate Gb/s, path class, column) of every active NIC at the best (path, rate) from `gpu`, in column order."""
        best_key: tuple[int, float] | None = None
        found: list[tuple[str, float, str, int]] = []
        for column, nic in enumerate(host.nics):
            if nic.state is not None and nic.state.upper() not in ("ACTIVE", "UP", "4: ACTIVE"):
                continue
            token = "SYS"
            if gpu < len(host.gpu_nic) and column < len(host.gpu_nic[gpu]):
                token = host.gpu_nic[gpu][column]
            try:
                kind, _ = parse_link_token(token)
            except ValueError:
                kind = LinkKind.SYS
            rank = 0 if kind is LinkKind.NVLINK else 1 + list(PCIE_PATH_FACTOR).index(kind) if kind.is_pcie else 9
            rate = nic.rate_gbit_per_s or self.default_nic_gbit
            name = nic.name if nic.rate_gbit_per_s else f"{nic.name} (rate unknown, assumed)"
            key = (rank, -rate)
            if best_key is None or key < best_key:
                best_key, found = key, []
            if key == best_key:
                found.append((name, rate, kind.value if kind.is_pcie else "PIX", column))
        return found


def nic_path_class(host: Host, gpu: int) -> str | None:
    """The legend class (`PIX`...`SYS`) from GPU position `gpu` to its nearest NIC; None without NICs."""
    if not host.nics or gpu >= len(host.gpu_nic):
        return None
    order = list(PCIE_PATH_FACTOR)
    classes = []
    for token in host.gpu_nic[gpu]:
        try:
            kind, _ = parse_link_token(token)
        except ValueError:
            continue
        if kind.is_pcie:
            classes.append(kind)
    if not classes:
        return None
    return min(classes, key=order.index).value


def load_cost_overrides(text: str, name: str, base: CostModel | None = None) -> CostModel:
    """Apply a JSON override file to `base` (defaults when None).

    Format: `{"alpha_us": {"NV": 1.0, "NET": 5.0}, "bandwidth_gbps": {"NET": 48, "SYS": 8},
    "nvlink_gbps_per_link": {"4": 20.6}, "default_nic_gbit": 400}`; every key optional.
    """
    model = base or CostModel()
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object")
    known = {"alpha_us", "bandwidth_gbps", "nvlink_gbps_per_link", "default_nic_gbit"}
    for key in data:
        if key not in known:
            raise InputError(f"{name}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    alpha = dict(model.alpha_us)
    alpha.update(_class_numbers(data.get("alpha_us", {}), f"{name}: alpha_us"))
    gbps = dict(model.class_gbps)
    gbps.update(_class_numbers(data.get("bandwidth_gbps", {}), f"{name}: bandwidth_gbps"))
    per_link = dict(model.nvlink_gbps_per_link)
    raw_links = data.get("nvlink_gbps_per_link", {})
    if not isinstance(raw_links, dict):
        raise InputError(f"{name}: nvlink_gbps_per_link must be an object of generation -> GB/s")
    for generation, value in raw_links.items():
        if not str(generation).isdigit():
            raise InputError(f"{name}: nvlink_gbps_per_link: {generation!r} is not an NVLink generation number")
        per_link[int(generation)] = _positive_number(value, f"{name}: nvlink_gbps_per_link.{generation}")
    nic = model.default_nic_gbit
    if "default_nic_gbit" in data:
        nic = _positive_number(data["default_nic_gbit"], f"{name}: default_nic_gbit")
    return replace(model, alpha_us=alpha, class_gbps=gbps, nvlink_gbps_per_link=per_link, default_nic_gbit=nic,
                   sources=(*model.sources, f"overrides from {name}"))


def _class_numbers(raw: Any, field_name: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise InputError(f"{field_name} must be an object of link class -> number")
    result = {}
    for key, value in raw.items():
        link_class = str(key).upper()
        if link_class not in LINK_CLASSES:
            raise InputError(f"{field_name}: unknown link class {key!r} (known: {', '.join(LINK_CLASSES)})")
        result[link_class] = _positive_number(value, f"{field_name}.{key}")
    return result


def _positive_number(value: Any, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"{field_name}: expected a positive number, got {value!r}")
    return float(value)
