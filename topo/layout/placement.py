"""Ranks -> devices: which host and which GPU of it each global rank runs on.

The cluster is the SOURCE's host repeated `--nodes` times (or the hosts of a multi-host
snapshot; hosts of one multi-node NVLink domain, GB200 NVL72, count as one node: see
:func:`topo.machine.cluster.domain_hosts`). torchrun places ranks in blocks (`RANK = node * nproc_per_node + LOCAL_RANK`),
Slurm `--distribution=cyclic` deals them round-robin over nodes, and CUDA_VISIBLE_DEVICES
permutes which physical GPU each local rank opens. An explicit rank map names every rank's
host and GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar, get_args

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST, MAX_LAYOUT_RANKS
from linkscope.topo.common.memo import remember_last
from linkscope.topo.common.numbers import is_integer, parse_int
from linkscope.topo.machine.cluster import domain_hosts, is_domain, nvlink_domains
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot

Distribution = Literal["block", "cyclic"]
"""How ranks are dealt to nodes: torchrun/Slurm block order, or Slurm's `--distribution=cyclic`."""
DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)


class LayoutMismatch(InputError):
    """The layout and the machine disagree (a GPU the host lacks, two ranks on one GPU...).

    `linkscope check` turns it into a `layout-mismatch` finding; everywhere else (pricing a trace or an
    NCCL log on a machine) it is the one-line input error it would be without that.
    """

    def __init__(self, message: str, ranks: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.ranks = ranks


@frozen
class RankMapEntry:
    """One line of an explicit rank map: global rank, host name, GPU index on that host."""

    rank: int
    host: str
    gpu: int


@frozen
class Placement:
    """Where every rank runs: node index and GPU position (index into `Host.gpus`)."""

    hosts: tuple[Host, ...]
    """One entry per node of the cluster."""
    host_class: tuple[int, ...]
    """Per node, an id shared by nodes whose hosts are identical (to memoise group costs)."""
    node_of_rank: tuple[int, ...]
    gpu_of_rank: tuple[int, ...]
    description: str
    """How ranks were placed, for people (`torchrun block order, 8 GPUs per node`)."""

    @property
    def world_size(self) -> int:
        """Number of placed ranks."""
        return len(self.node_of_rank)

    def pairs(self) -> tuple[tuple[int, int], ...]:
        """rank -> (node index, GPU position), as the check report carries it (made once per placement: the same
        placement, kept by :func:`place_ranks`, hands every check the same tuple, whose rank map the app keeps)."""
        return _kept(self, "_pairs", lambda: tuple(zip(self.node_of_rank, self.gpu_of_rank, strict=True)))

    def ranks_on_node(self) -> tuple[tuple[int, ...], ...]:
        """For every node, the ranks placed on it (made once per placement, as :meth:`pairs`)."""

        def grouped() -> tuple[tuple[int, ...], ...]:
            ranks_on: list[list[int]] = [[] for _ in self.hosts]
            for rank, node in enumerate(self.node_of_rank):
                ranks_on[node].append(rank)
            return tuple(map(tuple, ranks_on))

        return _kept(self, "_ranks_on_node", grouped)


Kept = TypeVar("Kept")


def _kept(placement: Placement, name: str, make: Callable[[], Kept]) -> Kept:
    """`placement`'s value `name`, made by `make` on first asking and kept on the (frozen) placement."""
    if name not in placement.__dict__:
        object.__setattr__(placement, name, make())
    kept: Kept = placement.__dict__[name]
    return kept


@remember_last
def cluster_hosts(snapshot: Snapshot, nodes: int) -> tuple[tuple[Host, ...], tuple[int, ...]]:
    """The cluster's hosts and their identity classes: one host repeated `nodes` times, or every host (those of
    the last snapshot kept: the app re-checks one snapshot on every edit, and classifying 1,024 hosts costs more
    than placing their ranks)."""
    if nodes < 1:
        raise InputError(f"--nodes: must be at least 1, got {nodes}")
    if nodes > MAX_LAYOUT_RANKS:
        raise InputError(f"--nodes {nodes:,}: more than the {MAX_LAYOUT_RANKS:,} nodes linkscope checks "
                         "(the largest clusters have a few hundred thousand GPUs)")
    if not snapshot.hosts:
        raise InputError(f"{snapshot.source or 'snapshot'}: no hosts in the snapshot")
    domains = domain_hosts(snapshot)
    if len(domains) == 1:
        if not domains[0].gpus:
            raise InputError(f"{snapshot.source or 'snapshot'}: the host has no GPUs")
        return (domains[0],) * nodes, (0,) * nodes
    if nodes not in (1, len(domains)):
        what = "hosts" if len(domains) == len(snapshot.hosts) else "NVLink domains"
        raise InputError(f"--nodes {nodes}: the snapshot already describes {len(domains)} {what}")
    return domains, host_classes(domains)


def host_classes(hosts: Sequence[Host]) -> tuple[int, ...]:
    """Per host, an id shared by the hosts that price alike."""
    seen: dict[tuple[object, ...], int] = {}
    return tuple(seen.setdefault(_class_key(host), len(seen)) for host in hosts)


def _class_key(host: Host) -> tuple[object, ...]:
    """What makes two hosts price alike: their GPU links, GPU x NIC paths and NIC rates (cached on the host,
    which is immutable, so a 1,024-host cluster is classified once, not on every check)."""
    cached: tuple[object, ...] | None = host.__dict__.get("_class_key")
    if cached is None:
        links = tuple((link.a, link.b, link.kind, link.nvlink_count) for link in host.links)
        cached = (len(host.gpus), links, host.gpu_nic, tuple(nic.rate_gbit_per_s for nic in host.nics))
        object.__setattr__(host, "_class_key", cached)
    return cached


def _positions(host: Host, devices: Sequence[int], node: int) -> list[int]:
    """GPU positions for CUDA device indices `devices` (NVML order, as with CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
    by_index = {gpu.index: position for position, gpu in enumerate(host.gpus)}
    positions = []
    for device in devices:
        if device not in by_index:
            raise LayoutMismatch(f"--visible-devices names GPU {device}, but node {node} ({host.hostname}) has GPUs "
                                 f"{sorted(by_index)}")
        positions.append(by_index[device])
    return positions


def parse_visible_devices(text: str) -> tuple[int, ...]:
    """Parse a CUDA_VISIBLE_DEVICES-style list `0,4,1,5`; InputError on anything but GPU indices."""
    devices: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not is_integer(part) or part[0] in "+-":
            raise InputError(f"--visible-devices: {part[:40]!r} is not a GPU index (example: 0,4,1,5,2,6,3,7)")
        devices.append(parse_int(part, "--visible-devices: GPU index", 0, MAX_GPUS_PER_HOST - 1))
    if len(set(devices)) != len(devices):
        raise InputError(f"--visible-devices: a GPU appears twice in {text!r}")
    return tuple(devices)


@remember_last
def place_ranks(
    hosts: tuple[Host, ...],
    host_class: tuple[int, ...],
    world_size: int,
    distribution: Distribution = "block",
    visible_devices: Sequence[int] | None = None,
) -> Placement:
    """Place `world_size` ranks on the cluster the way torchrun (block) or Slurm cyclic would (the last placement
    kept: the app re-checks one cluster on every keystroke of its Ranks form, mostly with the same world size, and
    placing 8,192 ranks took 3-5 ms of each check)."""
    if distribution not in DISTRIBUTIONS:
        raise InputError(f"--distribution: {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    per_node = [
        _positions(host, visible_devices, node) if visible_devices is not None else list(range(len(host.gpus)))
        for node, host in enumerate(hosts)
    ]
    gpus_per_node = min(len(positions) for positions in per_node)
    nodes = len(hosts)
    if world_size > gpus_per_node * nodes:
        repeated = len({id(host) for host in hosts}) == 1  # one host given, --nodes copies of it
        fix = "raise --nodes" if repeated else f"the snapshot describes these {nodes} only: give one of the whole cluster"
        raise InputError(f"world size {world_size} does not fit {nodes} node(s) of {gpus_per_node} GPUs ({fix})")
    if distribution == "block":
        node_of_rank = tuple(rank // gpus_per_node for rank in range(world_size))
        local = tuple(rank % gpus_per_node for rank in range(world_size))
    else:
        node_of_rank = tuple(rank % nodes for rank in range(world_size))
        local = tuple(rank // nodes for rank in range(world_size))
    gpu_of_rank = tuple(per_node[node][slot] for node, slot in zip(node_of_rank, local, strict=True))
    how = "torchrun block order" if distribution == "block" else "Slurm cyclic distribution"
    unit = "NVLink domain(s)" if is_domain(hosts[0]) else "node(s)"
    description = f"{how}, {nodes} {unit} x {gpus_per_node} GPUs"
    if visible_devices is not None:
        description += f", CUDA_VISIBLE_DEVICES={','.join(map(str, visible_devices))}"
    return Placement(hosts, host_class, node_of_rank, gpu_of_rank, description)


def place_from_rank_map(snapshot: Snapshot, entries: Sequence[RankMapEntry], world_size: int) -> Placement:
    """Place ranks as an explicit rank map says; hosts are matched by name in a multi-host snapshot (the hosts
    of one multi-node NVLink domain sharing one node), otherwise the single host is repeated once per distinct
    host name (in order of first appearance)."""
    if len(entries) != world_size:
        raise LayoutMismatch(f"the rank map has {len(entries)} ranks but the layout's world size is {world_size}")
    by_rank = {entry.rank: entry for entry in entries}
    missing = [rank for rank in range(world_size) if rank not in by_rank]
    if missing:
        raise LayoutMismatch(f"the rank map has no entry for rank {missing[0]}", tuple(missing[:16]))
    names: list[str] = []
    for rank in range(world_size):
        if by_rank[rank].host not in names:
            names.append(by_rank[rank].host)
    offset_of: dict[str, int] = {}
    if len(snapshot.hosts) > 1:
        real = {host.hostname: host for host in snapshot.hosts}
        unknown = [name for name in names if name not in real]
        if unknown:
            raise LayoutMismatch(f"the rank map names host {unknown[0]!r}, which is not in the snapshot")
        domain_of: dict[str, int] = {}
        for number, domain in enumerate(nvlink_domains(snapshot)):
            offset = 0
            for position in domain.hosts:
                host = snapshot.hosts[position]
                domain_of[host.hostname], offset_of[host.hostname] = number, offset
                offset += len(host.gpus)
        merged = domain_hosts(snapshot)  # hosts of one multi-node NVLink domain are one node
        order = list(dict.fromkeys(domain_of[name] for name in names))
        node_of_name = {name: order.index(domain_of[name]) for name in names}
        hosts = tuple(merged[number] for number in order)
        classes = host_classes(hosts)
    else:
        real = {name: snapshot.host for name in names}
        node_of_name = {name: node for node, name in enumerate(names)}
        hosts = (snapshot.host,) * len(names)
        classes = (0,) * len(names)
    node_of_rank: list[int] = []
    gpu_of_rank: list[int] = []
    used: dict[tuple[int, int], int] = {}
    for rank in range(world_size):
        entry = by_rank[rank]
        node = node_of_name[entry.host]
        host = real[entry.host]
        found = next((pos for pos, gpu in enumerate(host.gpus) if gpu.index == entry.gpu), None)
        if found is None:
            raise LayoutMismatch(f"rank {rank} is mapped to GPU {entry.gpu} of {entry.host}, which has only "
                                 f"{len(host.gpus)} GPUs", (rank,))
        position = offset_of.get(entry.host, 0) + found
        if (node, position) in used:
            other = used[(node, position)]
            raise LayoutMismatch(f"ranks {other} and {rank} are both mapped to GPU {entry.gpu} of {entry.host}",
                                 (other, rank))
        used[(node, position)] = rank
        node_of_rank.append(node)
        gpu_of_rank.append(position)
    description = f"rank map, {len(names)} host(s)"
    return Placement(hosts, classes, tuple(node_of_rank), tuple(gpu_of_rank), description)
