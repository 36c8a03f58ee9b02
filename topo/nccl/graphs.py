"""NCCL's searched graphs set beside linkscope's own model of the machine: do NCCL's channels cross the path types the
links allow, and does NCCL plan near the bandwidth the links deliver? Planning far below it means NCCL saw another
machine (a VM's virtual PCIe tree, NVLinks it did not find) or was told to avoid paths (NCCL_P2P_LEVEL...).

A channel's GPUs are NCCL's `dev` numbers (CUDA device numbers); they are taken for the snapshot's GPU indices, which
holds when CUDA numbers the GPUs in PCI order (`CUDA_DEVICE_ORDER=PCI_BUS_ID`, the usual case on servers).
"""

from __future__ import annotations

import itertools
from typing import Any

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps
from linkscope.topo.formats.nccl_graph import PATH_TYPES, NcclGraph, NcclGraphs
from linkscope.topo.machine.links import link_speed
from linkscope.topo.model.findings import Finding
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.snapshot import Snapshot

PATH_OF_TOKEN = {LinkKind.NVLINK: "NVL", LinkKind.PIX: "PIX", LinkKind.PXB: "PXB", LinkKind.PHB: "PHB",
                 LinkKind.NODE: "PHB", LinkKind.SYS: "SYS", LinkKind.SELF: "LOC"}
"""NCCL's path type for each `nvidia-smi topo -m` class (NCCL calls a path between host bridges of one CPU PHB)."""

LOW_PLAN_SHARE = 0.5
"""NCCL planning under this share of what the ring's slowest link typically delivers is a finding."""


@frozen
class GraphFinding(Finding):
    """One way NCCL's graphs differ from what the machine's links allow."""

    message: str
    graph: str
    """The graph's pattern (`ring`, `tree`...)."""
    evidence: tuple[str, ...] = ()


def graph_json(graph: NcclGraph) -> dict[str, Any]:
    """One graph as `nccl-graph --json` prints it."""
    return {
        "pattern": graph.pattern, "pattern_code": graph.pattern_code, "id": graph.graph_id, "crossnic": graph.crossnic,
        "nchannels": graph.nchannels, "speed_intra_gbps": graph.speed_intra_gbps,
        "speed_inter_gbps": graph.speed_inter_gbps, "type_intra": graph.type_intra, "type_inter": graph.type_inter,
        "same_channels": graph.same_channels,
        "channels": [[hop.as_json() for hop in channel] for channel in graph.channels],
    }


def _positions(host: Host) -> dict[int, int]:
    return {gpu.index: position for position, gpu in enumerate(host.gpus)}


def _channel_hops(graph: NcclGraph, channel_gpus: list[int]) -> list[tuple[int, int]]:
    hops = list(itertools.pairwise(channel_gpus))
    if graph.pattern == "ring" and len(channel_gpus) > 2:
        hops.append((channel_gpus[-1], channel_gpus[0]))
    return hops


def compare_graphs(graphs: NcclGraphs, snapshot: Snapshot) -> tuple[GraphFinding, ...]:
    """Findings of NCCL's graphs on the snapshot's first host."""
    host = snapshot.host
    positions = _positions(host)
    findings: list[GraphFinding] = []
    for graph in graphs.graphs:
        if graph.empty or not graph.channels or graph.type_intra not in PATH_TYPES:
            continue
        worst_allowed = "LOC"
        slowest_gbps: float | None = None
        unknown: set[int] = set()
        for channel in graph.channels:
            devs = [hop.dev for hop in channel if hop.kind == "gpu" and hop.dev is not None]
            unknown.update(dev for dev in devs if dev not in positions)
            for a, b in _channel_hops(graph, [dev for dev in devs if dev in positions]):
                if a == b:
                    continue
                link = host.link(positions[a], positions[b])
                path = PATH_OF_TOKEN[link.kind]
                worst_allowed = max(worst_allowed, path, key=PATH_TYPES.index)
                speed = link_speed(host, link).typical_gbps
                slowest_gbps = speed if slowest_gbps is None else min(slowest_gbps, speed)
        if unknown:
            findings.append(GraphFinding(
                "nccl-graph-gpu-unknown", "warning", f"NCCL's {graph.pattern} names GPU dev(s) "
                f"{', '.join(map(str, sorted(unknown)))} that the snapshot does not have: another machine?", graph.pattern))
            continue
        if PATH_TYPES.index(graph.type_intra) > PATH_TYPES.index(worst_allowed) and worst_allowed != "LOC":
            findings.append(GraphFinding(
                "nccl-graph-path-worse", "warning",
                f"NCCL's {graph.pattern} crosses {graph.type_intra} paths where the snapshot's links allow "
                f"{worst_allowed}: NCCL saw the machine differently (or NCCL_P2P_LEVEL / NCCL_P2P_DISABLE forbids the "
                "faster path)", graph.pattern,
                (f"NCCL: type intra {graph.type_intra}, {graph.nchannels} channel(s)",
                 f"snapshot: the channels' hops are at worst {worst_allowed}")))
        planned = (graph.speed_intra_gbps or 0.0) * graph.nchannels
        if slowest_gbps and planned and planned < LOW_PLAN_SHARE * slowest_gbps:
            findings.append(GraphFinding(
                "nccl-graph-plans-low", "warning",
                f"NCCL plans its {graph.pattern} at {format_gbps(planned, 'g')} in all ({graph.nchannels} x "
                f"{graph.speed_intra_gbps:g}), under half of the ~{format_gbps(slowest_gbps, '.0f')} the slowest link "
                "of its channels typically delivers: a sign NCCL saw the wrong topology", graph.pattern,
                (f"NCCL: speedintra {format_gbps(graph.speed_intra_gbps or 0.0, 'g')} x {graph.nchannels} channel(s)",
                 f"snapshot: slowest hop of the channels ~{format_gbps(slowest_gbps, '.0f')} typical")))
    return tuple(findings)


@frozen
class NcclRing:
    """One channel of NCCL's ring graph laid on a host: for the Links grid."""

    label: str
    """`NCCL ring 0/2: 0 1 2 3 (NVL, 20 GB/s)`."""
    hops: tuple[tuple[int, int], ...]
    """(GPU position, GPU position) pairs the channel crosses, in ring order."""
    off_node_hops: int = 0
    """Ends of the channel at a NET (the ring leaves the host there)."""


def nccl_rings(graphs: NcclGraphs, host: Host) -> tuple[NcclRing, ...]:
    """The channels of NCCL's ring graph on `host`, GPUs found by `dev` (taken as the GPU index) or by bus id; a
    channel with a GPU the host does not have (a rank-numbered log) is left out."""
    from linkscope.topo.formats.nccl_topo_snapshot import nvml_bus_id

    positions = _positions(host)
    by_bus = {nvml_bus_id(gpu.pci_bus_id): position for position, gpu in enumerate(host.gpus)}
    rings: list[NcclRing] = []
    for graph in graphs.graphs:
        if graph.pattern != "ring":
            continue
        for number, channel in enumerate(graph.channels):
            order: list[int] = []
            for hop in channel:
                if hop.kind != "gpu":
                    continue
                position = positions.get(hop.dev) if hop.dev is not None else by_bus.get(nvml_bus_id(hop.busid))
                if position is None:
                    break
                order.append(position)
            else:
                closed = not any(hop.kind == "net" for hop in channel)
                hops = list(itertools.pairwise(order))
                if closed and len(order) > 2:
                    hops.append((order[-1], order[0]))
                speed = format_gbps(graph.speed_intra_gbps or 0.0, "g")
                label = (f"NCCL ring {number}/{graph.nchannels}: {' '.join(hop.label for hop in channel)} "
                         f"({graph.type_intra or '?'}, {speed})")
                rings.append(NcclRing(label, tuple(hops), sum(1 for hop in channel if hop.kind == "net")))
    return tuple(rings)
