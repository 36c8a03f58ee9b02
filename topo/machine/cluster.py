"""A cluster as linkscope sees it: hosts, the NIC (rail) each GPU sends through, and NVLink domains.

A multi-host :class:`~topo.model.snapshot.Snapshot` is a cluster. Inside a host GPUs talk over NVLink or
PCIe; between hosts over the network, through each GPU's nearest NIC (its *rail*). Multi-node NVLink
systems (GB200 NVL72) are the exception: GPUs of different hosts that NVML reports in one fabric
clique (same cluster UUID and clique id) reach each other over NVLink, so the layout code treats
such a domain as one big node (:func:`domain_hosts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.text import comparable
from linkscope.topo.machine.links import nearest_nics
from linkscope.topo.model.host import Gap, Gpu, Host, Link, LinkKind, Nic, NumaNode
from linkscope.topo.model.snapshot import Snapshot

NO_CLUSTER_UUID = "00000000-0000-0000-0000-000000000000"
"""What NVML reports as the fabric cluster UUID of a GPU outside any multi-node NVLink domain."""


@frozen
class GpuRail:
    """The network side of one GPU: its nearest NIC, that NIC's position (rail) among the host's NICs,
    the path to it, and the NIC's rate and link layer."""

    gpu: int
    """NVML index of the GPU."""
    nic: str | None
    rail: int | None
    """Index of the NIC in `Host.nics`; GPUs of the same local rank should share it on every host."""
    path: str | None
    """Legend token of the GPU -> NIC path (`PIX`, `NODE`, `SYS`...)."""
    rate_gbit_per_s: float | None
    link_layer: str | None


def gpu_rails(host: Host) -> tuple[GpuRail, ...]:
    """Per GPU (in position order) the NIC it sends through: among the nearest NICs, the fastest active
    one, dealt out in turn to GPUs that share the same nearest set (as NCCL pairs GPUs with NICs).
    Cached on the host (immutable): the cluster rules ask for every host's rails more than once."""
    cached: tuple[GpuRail, ...] | None = host.__dict__.get("_rails")
    if cached is None:
        cached = _rails_of(host)
        object.__setattr__(host, "_rails", cached)
    return cached


def _rails_of(host: Host) -> tuple[GpuRail, ...]:
    column = {nic.name: index for index, nic in enumerate(host.nics)}
    seen: dict[tuple[str, ...], int] = {}
    rails: list[GpuRail] = []
    for position, gpu in enumerate(host.gpus):
        names, token = nearest_nics(host, position)
        usable = [name for name in names if (host.nics[column[name]].state or "ACTIVE").upper() in ("ACTIVE", "UP")]
        if not usable:
            rails.append(GpuRail(gpu.index, None, None, token, None, None))
            continue
        fastest = max(host.nics[column[name]].rate_gbit_per_s or 0.0 for name in usable)
        usable = [name for name in usable if (host.nics[column[name]].rate_gbit_per_s or 0.0) == fastest]
        turn = seen.get(tuple(usable), 0)
        seen[tuple(usable)] = turn + 1
        nic = host.nics[column[usable[turn % len(usable)]]]
        rails.append(GpuRail(gpu.index, nic.name, column[nic.name], token, nic.rate_gbit_per_s, nic.link_layer))
    return tuple(rails)


def fabric_key(host: Host) -> str | None:
    """`<cluster uuid>/<clique id>` when every GPU of the host is in one multi-node NVLink clique, else None."""
    keys = {(gpu.fabric_cluster_uuid, gpu.fabric_clique_id) for gpu in host.gpus}
    if len(keys) != 1:
        return None
    uuid, clique = next(iter(keys))
    if not uuid or uuid == NO_CLUSTER_UUID or clique is None:
        return None
    return f"{uuid}/{clique}"


@frozen
class NvlinkDomain:
    """Hosts whose GPUs share one NVLink fabric; a host without multi-node NVLink is a domain of its own."""

    key: str | None
    """`<cluster uuid>/<clique id>`, or None for a single host's own NVLink."""
    hosts: tuple[int, ...]
    """Positions of the hosts in `Snapshot.hosts`, in order."""


def nvlink_domains(snapshot: Snapshot) -> tuple[NvlinkDomain, ...]:
    """The snapshot's NVLink domains, in order of their first host."""
    members: dict[str, list[int]] = {}
    order: list[str | int] = []
    for position, host in enumerate(snapshot.hosts):
        key = fabric_key(host)
        if key is None:
            order.append(position)
            continue
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(position)
    return tuple(NvlinkDomain(None, (item,)) if isinstance(item, int) else NvlinkDomain(item, tuple(members[item]))
                 for item in order)


def domain_hosts(snapshot: Snapshot) -> tuple[Host, ...]:
    """One Host per NVLink domain: single hosts as they are, a multi-host domain merged into one host
    whose GPUs (host by host) all see each other over NVLink (see :func:`merge_domain`)."""
    return tuple(snapshot.hosts[domain.hosts[0]] if len(domain.hosts) == 1
                 else merge_domain([snapshot.hosts[position] for position in domain.hosts])
                 for domain in nvlink_domains(snapshot))


def host_position(snapshot: Snapshot, domain: int, position: int) -> tuple[int, int]:
    """Where GPU `position` of node `domain` (as :func:`domain_hosts` numbers them) really is: (index of its host
    in `Snapshot.hosts`, its position on that host). Positions past the domain stay on its last host."""
    members = nvlink_domains(snapshot)[domain].hosts
    for host in members:
        count = len(snapshot.hosts[host].gpus)
        if position < count or host == members[-1]:
            return host, position
        position -= count
    raise IndexError(domain)  # a domain always has a host


def ring_on_host(snapshot: Snapshot, node: int, hops: tuple[tuple[int, int], ...],
                 off_node_hops: int) -> tuple[int, tuple[tuple[int, int], ...], int]:
    """A ring over node `node` of a layout (a multi-host NVLink domain counts as one node; `hops` are GPU positions
    on it) as one host's grid shows it: (the host of its first hop, the hops between GPUs of that host, the hops
    that leave it, counted with `off_node_hops`). A node that is one host is returned as it is."""
    if node >= len(nvlink_domains(snapshot)):
        return node, hops, off_node_hops
    if not hops:
        return host_position(snapshot, node, 0)[0], hops, off_node_hops
    host = host_position(snapshot, node, hops[0][0])[0]
    kept, leaving = [], off_node_hops
    for a, b in hops:
        (host_a, local_a), (host_b, local_b) = host_position(snapshot, node, a), host_position(snapshot, node, b)
        if host_a == host_b == host:
            kept.append((local_a, local_b))
        elif host_a != host_b:
            leaving += 1
    return host, tuple(kept), leaving


def domain_name(hosts: Sequence[Host]) -> str:
    """How a multi-host NVLink domain is named where a host name goes: `nvl:<first>..<last>`."""
    return hosts[0].hostname if len(hosts) == 1 else f"nvl:{hosts[0].hostname}..{hosts[-1].hostname}"


def is_domain(host: Host) -> bool:
    """True for a host that :func:`merge_domain` made of several hosts' GPUs."""
    return host.hostname.startswith("nvl:")


def merge_domain(hosts: Sequence[Host]) -> Host:
    """The hosts of one multi-node NVLink domain as one host: GPUs renumbered 0..n-1 host by host, each
    host's own links kept, GPUs of different hosts joined by NVLink (the smaller active link count of the
    pair, as `nvidia-smi topo -m` shows NV18 for every pair of a switched fabric), NICs named
    `host:nic` and reachable only from their own host's GPUs, NUMA nodes renumbered."""
    gpus: list[Gpu] = []
    links: list[Link] = []
    nics: list[Nic] = []
    numa: list[NumaNode] = []
    gpu_offsets: list[int] = []
    nic_offsets: list[int] = []
    for host in hosts:
        gpu_offsets.append(len(gpus))
        nic_offsets.append(len(nics))
        numa_base = len(numa)
        renumber = {node.id: numa_base + i for i, node in enumerate(host.numa_nodes)}
        for gpu in host.gpus:
            node = renumber.get(gpu.numa_node) if gpu.numa_node is not None else None
            gpus.append(replace(gpu, index=len(gpus), numa_node=node))
        for nic in host.nics:
            node = renumber.get(nic.numa_node) if nic.numa_node is not None else None
            nics.append(replace(nic, name=f"{host.hostname}:{nic.name}", numa_node=node))
        numa.extend(NumaNode(renumber[node.id], node.cpus, node.memory_bytes) for node in host.numa_nodes)
    host_of = [h for h, host in enumerate(hosts) for _ in host.gpus]
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            ha, hb = host_of[a], host_of[b]
            if ha == hb:
                base = gpu_offsets[ha]
                inner = hosts[ha].link(a - base, b - base)
                links.append(replace(inner, a=a, b=b))
            else:
                count = min(gpus[a].nvlink_active_count, gpus[b].nvlink_active_count)
                kind = LinkKind.NVLINK if count else LinkKind.SYS
                links.append(Link(a, b, kind, count, gpus[a].nvlink_gen if count else None))
    gpu_nic = []
    for position in range(len(gpus)):
        h = host_of[position]
        own = hosts[h].gpu_nic[position - gpu_offsets[h]] if position - gpu_offsets[h] < len(hosts[h].gpu_nic) else ()
        row = ["SYS"] * len(nics)
        row[nic_offsets[h] : nic_offsets[h] + len(own)] = own
        gpu_nic.append(tuple(row))
    first = hosts[0]
    return Host(domain_name(hosts), tuple(gpus), tuple(links), tuple(nics), tuple(gpu_nic), tuple(numa),
                first.versions, first.capabilities)


@frozen
class Combined:
    """Host snapshots joined into one cluster snapshot, and the host names that came more than once."""

    snapshot: Snapshot
    duplicates: tuple[str, ...]


def combine_hosts(parts: Sequence[Snapshot], source: str, failed: Sequence[Gap] = (), created: str | None = None,
                  meta: tuple[tuple[str, str], ...] = ()) -> Combined:
    """One cluster snapshot of every host in `parts` (in order), each part's gaps tagged with their host,
    plus `failed` (gaps of nodes that gave no snapshot). A host name seen before (compared as
    :func:`~topo.common.text.comparable`: invisible characters and case do not make two hosts) is kept, renamed
    `name#2`, `name#3`..., and listed in `duplicates`, so nothing collected is lost."""
    hosts: list[Host] = []
    gaps: list[Gap] = []
    seen: dict[str, int] = {}
    duplicates: list[str] = []
    for part in parts:
        for host in part.hosts:
            name, key = host.hostname, comparable(host.hostname)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                duplicates.append(name)
                host = replace(host, hostname=f"{name}#{seen[key]}")
            hosts.append(host)
        default_host = part.hosts[0].hostname if len(part.hosts) == 1 else None
        gaps.extend(gap if gap.host is not None else replace(gap, host=default_host) for gap in part.gaps)
    gaps.extend(failed)
    snapshot = Snapshot(hosts=tuple(hosts), source=source, created=created, meta=meta, gaps=tuple(gaps))
    return Combined(snapshot, tuple(dict.fromkeys(duplicates)))
