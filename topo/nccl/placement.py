"""Place an NCCL log's connections on a machine's links: which NVLink or PCIe path each hop rides.

Ranks are matched to hosts by name (or, when the snapshot holds one host, every log host is taken
to be built like it) and to GPUs by PCI bus id, else NVML index, else the device index of the
connection lines, else cudaDev (which assumes no CUDA_VISIBLE_DEVICES reordering; the JSON says
which was used). Findings:

| code | severity | when |
|---|---|---|
| `shm-over-nvlink` | error | two GPUs joined by NVLink talk through SHM or the network |
| `ring-hop-sys` | warning | a ring hop crosses SYS although an NVLink-only ring through the same GPUs exists |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.nccl_log_model import NcclLog, Rank, bus_id_to_pci
from linkscope.topo.machine.rings import best_ring
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.nccl.checks import IMPLIED_HOST, NcclFinding, implied_hosts, same_host


@frozen
class RankGpu:
    """Where one rank runs on the snapshot: host index, GPU position, and how it was matched."""

    comm: str | None
    rank: int
    host_index: int
    gpu: int
    matched_by: str
    """`bus_id`, `nvml_dev`, `device_index` or `cuda_dev`."""


@frozen
class PlacedEdge:
    """A connection between two GPUs of one host and the link it rides."""

    comm: str | None
    src: int
    dst: int
    channel: int
    transport: str
    detail: str
    host_index: int
    gpu_src: int
    gpu_dst: int
    link: str
    """The pair's `nvidia-smi topo -m` token: `NV18`, `PIX`, `SYS`..."""


@frozen
class NcclPlacement:
    """The log laid on a snapshot."""

    ranks: tuple[RankGpu, ...]
    edges: tuple[PlacedEdge, ...]
    findings: tuple[NcclFinding, ...]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The `placement` object of `nccl-log --snapshot --json`."""
        return {
            "ranks": [{"comm": item.comm, "rank": item.rank, "host_index": item.host_index, "gpu": item.gpu,
                       "matched_by": item.matched_by} for item in self.ranks],
            "edges": [{"comm": edge.comm, "src": edge.src, "dst": edge.dst, "channel": edge.channel,
                       "transport": edge.transport, "gpu_src": edge.gpu_src, "gpu_dst": edge.gpu_dst,
                       "host_index": edge.host_index, "link": edge.link} for edge in self.edges],
            "notes": list(self.notes),
        }

    def pair_transports(self, host_index: int = 0) -> dict[tuple[int, int], set[str]]:
        """(GPU a, GPU b) with a < b -> the transports NCCL used between them on that host."""
        pairs: dict[tuple[int, int], set[str]] = {}
        for edge in self.edges:
            if edge.host_index == host_index:
                key = (min(edge.gpu_src, edge.gpu_dst), max(edge.gpu_src, edge.gpu_dst))
                pairs.setdefault(key, set()).add(edge.transport)
        return pairs


def place_edges(log: NcclLog, snapshot: Snapshot) -> NcclPlacement:
    """Lay `log` on `snapshot` (see the module docstring)."""
    notes: list[str] = []
    by_name = {host.hostname: index for index, host in enumerate(snapshot.hosts)}
    hosts = implied_hosts(log)
    log_hosts = set(hosts.values())
    one_and_one = len(snapshot.hosts) == 1 and len(log_hosts) <= 1
    placed_ranks: dict[tuple[str | None, int], RankGpu] = {}
    for rank in log.ranks:
        host = hosts.get((rank.comm, rank.rank))
        host_index = by_name.get(host or "", 0 if len(snapshot.hosts) == 1 and (host is not None or one_and_one) else -1)
        if host_index < 0:
            continue
        located = _gpu_of(rank, snapshot.hosts[host_index])
        if located is not None:
            placed_ranks[(rank.comm, rank.rank)] = RankGpu(rank.comm, rank.rank, host_index, *located)
    if IMPLIED_HOST in log_hosts or (one_and_one and not log_hosts):
        notes.append(f"the log names no host: its ranks share one host (SHM/P2P between them), placed on "
                     f"{snapshot.hosts[0].hostname or 'the snapshot'} by bus id, else device number")
    elif len(snapshot.hosts) == 1 and any(name not in by_name for name in log_hosts):
        notes.append(f"every host of the log is taken to be built like {snapshot.hosts[0].hostname}")
    foreign = sorted({rank.bus_id for rank in log.ranks if rank.bus_id is not None
                      and (rank.comm, rank.rank) in placed_ranks
                      and placed_ranks[(rank.comm, rank.rank)].matched_by != "bus_id"
                      and any(gpu.pci_bus_id for gpu in snapshot.hosts[placed_ranks[(rank.comm, rank.rank)].host_index].gpus)})
    if foreign:
        notes.append(f"the log's GPUs (bus ids {', '.join(foreign[:4])}{' ...' if len(foreign) > 4 else ''}) are not "
                     "among the snapshot's: ranks were placed by device number - is the snapshot the machine the "
                     "log came from?")
    if any(item.matched_by == "cuda_dev" for item in placed_ranks.values()):
        notes.append("some ranks were matched by cudaDev (the log shows no bus id): assumes no CUDA_VISIBLE_DEVICES reordering")
    edges: list[PlacedEdge] = []
    for edge in log.edges:
        if edge.dst is None or not same_host(edge, hosts):
            continue
        src, dst = placed_ranks.get((edge.comm, edge.src)), placed_ranks.get((edge.comm, edge.dst))
        if src is None or dst is None or src.host_index != dst.host_index or src.gpu == dst.gpu:
            continue
        link = snapshot.hosts[src.host_index].link(src.gpu, dst.gpu)
        edges.append(PlacedEdge(edge.comm, edge.src, edge.dst, edge.channel, edge.transport, edge.detail,
                                src.host_index, src.gpu, dst.gpu, link.token))
    findings = _slow_transport_findings(edges, snapshot) + _ring_findings(log, snapshot, placed_ranks)
    return NcclPlacement(tuple(placed_ranks.values()), tuple(edges), findings, tuple(notes))


def _gpu_of(rank: Rank, host: Host) -> tuple[int, str] | None:
    if rank.bus_id is not None:
        wanted = _short_bus(bus_id_to_pci(rank.bus_id))
        for position, gpu in enumerate(host.gpus):
            if gpu.pci_bus_id is not None and _short_bus(gpu.pci_bus_id) == wanted:
                return position, "bus_id"
    for field in ("nvml_dev", "device_index", "cuda_dev"):
        index = getattr(rank, field)
        if index is not None:
            for position, gpu in enumerate(host.gpus):
                if gpu.index == index:
                    return position, field
    return None


def _short_bus(pci_bus_id: str) -> str:
    """`BB:DD.F` of a bus id, upper case (domains are printed with 4 or 8 digits)."""
    return pci_bus_id.upper().rsplit(":", 2)[-2] + ":" + pci_bus_id.upper().rsplit(":", 1)[-1]


def _slow_transport_findings(edges: list[PlacedEdge], snapshot: Snapshot) -> tuple[NcclFinding, ...]:
    slow: dict[tuple[str | None, int], set[int]] = {}
    pairs: dict[tuple[str | None, int], set[str]] = {}
    for edge in edges:
        if edge.transport in ("SHM", "NET") and edge.link.startswith("NV"):
            slow.setdefault((edge.comm, edge.host_index), set()).update((edge.src, edge.dst))
            pairs.setdefault((edge.comm, edge.host_index), set()).add(
                f"GPU{edge.gpu_src}-GPU{edge.gpu_dst} {edge.link} via {edge.transport}")
    return tuple(
        NcclFinding("shm-over-nvlink", "error",
                    f"on {snapshot.hosts[host_index].hostname}, GPUs joined by NVLink talk through host memory or the "
                    f"network instead of P2P ({', '.join(sorted(pairs[(comm, host_index)])[:8])}): P2P is disabled or "
                    "failing; expect a 5-10x slower collective", tuple(sorted(ranks)), comm)
        for (comm, host_index), ranks in sorted(slow.items(), key=lambda item: (item[0][0] or "", item[0][1])))


def _ring_findings(log: NcclLog, snapshot: Snapshot, placed: dict[tuple[str | None, int], RankGpu]) -> tuple[NcclFinding, ...]:
    findings: list[NcclFinding] = []
    for comm in log.communicators:
        key = None if comm.key == "?" else comm.key
        for channel, order in comm.rings:
            hops = [(order[i], order[(i + 1) % len(order)]) for i in range(len(order))] if len(order) > 1 else []
            for src_rank, dst_rank in hops:
                src, dst = placed.get((key, src_rank)), placed.get((key, dst_rank))
                if src is None or dst is None or src.host_index != dst.host_index or src.gpu == dst.gpu:
                    continue
                host = snapshot.hosts[src.host_index]
                if host.link(src.gpu, dst.gpu).kind is not LinkKind.SYS:
                    continue
                gpus = sorted({item.gpu for item in placed.values()
                               if item.comm == key and item.host_index == src.host_index and item.rank in order})
                nvlink_only = best_ring(gpus, _nvlink_only(host))
                if nvlink_only.bottleneck_gbps > 0:
                    findings.append(NcclFinding(
                        "ring-hop-sys", "warning",
                        f"ring channel {channel}: hop {src_rank} -> {dst_rank} (GPU{src.gpu} -> GPU{dst.gpu} on "
                        f"{host.hostname}) crosses SYS although an NVLink-only ring through these GPUs exists "
                        f"({' '.join(f'GPU{gpu}' for gpu in nvlink_only.order)})", (src_rank, dst_rank), key))
    return tuple(findings[:64])


def _nvlink_only(host: Host) -> Callable[[int, int], float]:
    """A bandwidth function under which only NVLink hops count (1), so a ring with a positive bottleneck is NVLink-only."""
    return lambda a, b: 1.0 if host.link(a, b).kind is LinkKind.NVLINK else 0.0


def judged_on_snapshot(findings: tuple[NcclFinding, ...], placement: NcclPlacement,
                       snapshot: Snapshot) -> tuple[NcclFinding, ...]:
    """`findings` with what the snapshot explains: SHM between GPUs the snapshot says cannot do P2P (consumer
    cards, P2P `NS` in `nvidia-smi topo -p2p`) is what this machine does at best, so that finding is info."""
    judged = []
    for finding in findings:
        if finding.code == "intra-host-shm":
            members = set(finding.ranks)
            pairs = [(edge.host_index, edge.gpu_src, edge.gpu_dst) for edge in placement.edges
                     if edge.transport == "SHM" and edge.comm == finding.comm and {edge.src, edge.dst} <= members]
            statuses = [snapshot.hosts[host].link(a, b).p2p for host, a, b in pairs]
            if pairs and all(status is not None and not status.any_ok for status in statuses):
                finding = replace(finding, severity="info", message=finding.message + "; expected on this machine: "
                                  "the snapshot says P2P is not supported between these GPUs")
        judged.append(finding)
    return tuple(judged)
