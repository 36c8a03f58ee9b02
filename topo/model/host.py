"""One GPU host as linkscope sees it: GPUs, the links between them, NICs, NUMA nodes, versions; and gaps.

Frozen dataclasses that round-trip through JSON (:mod:`topo.model.codec`); a :class:`~topo.model.snapshot.Snapshot`
holds one or more hosts.
"""

from __future__ import annotations

import enum
import re
from dataclasses import field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_NVLINKS_PER_PAIR
from linkscope.topo.common.numbers import parse_int


class LinkKind(str, enum.Enum):
    """How two devices are connected, in the words of the `nvidia-smi topo -m` legend."""

    SELF = "X"
    NVLINK = "NV"
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"

    @property
    def is_pcie(self) -> bool:
        """True for the PCIe classes (everything but self and NVLink)."""
        return self not in (LinkKind.SELF, LinkKind.NVLINK)


PCIE_KINDS_NEAR_TO_FAR: tuple[LinkKind, ...] = (
    LinkKind.PIX,
    LinkKind.PXB,
    LinkKind.PHB,
    LinkKind.NODE,
    LinkKind.SYS,
)
"""PCIe link classes ordered from the closest to the farthest path."""

_NV_TOKEN = re.compile(r"NV(\d+)\Z")


def parse_link_token(token: str) -> tuple[LinkKind, int]:
    """Split an nvidia-smi legend token into (kind, NVLink count); raise ValueError if unknown."""
    match = _NV_TOKEN.match(token)
    if match:
        try:
            return LinkKind.NVLINK, parse_int(match.group(1), "NVLink count", 0, MAX_NVLINKS_PER_PAIR)
        except InputError as exc:
            raise ValueError(str(exc)) from None
    try:
        kind = LinkKind(token)
    except ValueError:
        raise ValueError(f"unknown link token {token!r}") from None
    if kind is LinkKind.NVLINK:
        raise ValueError("NV token without a link count")
    return kind, 0


@frozen
class P2PStatus:
    """Peer-to-peer capability of a GPU pair, one `nvidia-smi topo -p2p` token per kind (None: not read)."""

    read: str | None = None
    write: str | None = None
    nvlink: str | None = None
    atomics: str | None = None

    @property
    def any_ok(self) -> bool:
        """True when reads or writes between the pair go peer to peer."""
        return "OK" in (self.read, self.write)


@frozen
class Link:
    """The connection between GPUs `a` and `b` (a < b) of one host."""

    a: int
    b: int
    kind: LinkKind
    nvlink_count: int = 0
    """Number of bonded NVLinks (the n of `NV<n>`); 0 when not NVLink."""
    nvlink_gen: int | None = None
    """NVLink generation (2 = V100, 3 = A100, 4 = H100, 5 = B200) when known."""
    p2p: P2PStatus | None = None

    @property
    def token(self) -> str:
        """The nvidia-smi legend token for this link: `NV18`, `PIX`, `SYS`..."""
        if self.kind is LinkKind.NVLINK:
            return f"NV{self.nvlink_count}"
        return self.kind.value


@frozen
class NvLinkPort:
    """One NVLink of a GPU as NVML reports it (`nvidia-smi nvlink -s`)."""

    link: int
    active: bool
    version: int | None = None
    remote_pci_bus_id: str | None = None
    remote_type: str | None = None
    """`gpu`, `switch` or `ibmc`; None when not read."""


@frozen
class MigDevice:
    """One MIG device (a GPU instance and compute instance) of a MIG-enabled GPU (`nvidia-smi -L`)."""

    uuid: str | None = None
    """`MIG-...`: what CUDA_VISIBLE_DEVICES names to select it."""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    memory_total_bytes: int | None = None


@frozen
class Gpu:
    """One GPU as NVML, sysfs and nvidia-smi describe it."""

    index: int
    """NVML index (PCI bus id order)."""
    name: str = ""
    uuid: str | None = None
    pci_bus_id: str | None = None
    """Full form, e.g. `00000000:18:00.0`."""
    numa_node: int | None = None
    cpu_affinity: str | None = None
    """Linux cpulist, e.g. `0-55,112-167`."""
    numa_affinity: str | None = None
    """NUMA node list as nvidia-smi prints it, e.g. `0` or `0-1`."""
    gpu_numa_id: int | None = None
    """NUMA node of the GPU's own memory (Grace Hopper); None elsewhere."""
    memory_total_bytes: int | None = None
    compute_capability: str | None = None
    mig_enabled: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    """The MIG devices of a MIG-enabled GPU, in NVML's MIG index order."""
    nvlinks: tuple[NvLinkPort, ...] = ()
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pci_path: tuple[str, ...] = ()
    """PCI bus ids of the bridges from the root port down to (not including) the GPU."""
    fabric_cluster_uuid: str | None = None
    """NVLink fabric cluster UUID (`nvidia-smi -q` Fabric "ClusterUUID"; GB200 NVL72 and other multi-node
    NVLink systems); None where the GPU reports none."""
    fabric_clique_id: int | None = None
    """NVLink fabric clique id (`nvidia-smi -q` Fabric "CliqueId"): GPUs of one cluster UUID and clique,
    on any host, reach each other over NVLink."""

    @property
    def nvlink_active_count(self) -> int:
        """Number of NVLinks that are up."""
        return sum(1 for port in self.nvlinks if port.active)

    @property
    def nvlink_gen(self) -> int | None:
        """Highest NVLink version among the GPU's links, if any was read."""
        versions = [port.version for port in self.nvlinks if port.version is not None]
        return max(versions) if versions else None


@frozen
class Nic:
    """A network adapter port that collectives can use (`ibstat`, `/sys/class/net`)."""

    name: str
    """RDMA device name (`mlx5_0`) or, for plain Ethernet, the netdev."""
    netdev: str | None = None
    pci_bus_id: str | None = None
    numa_node: int | None = None
    link_layer: str | None = None
    """`InfiniBand` or `Ethernet`."""
    rate_gbit_per_s: float | None = None
    state: str | None = None
    """Port state, e.g. `ACTIVE`, `DOWN`."""
    pci_path: tuple[str, ...] = ()
    pcie_gen_max: int | None = None
    """PCIe generation of the NIC's link, when read (sysfs `max_link_speed`, NCCL's `link_speed`)."""
    pcie_width_max: int | None = None
    """PCIe lanes of the NIC's link, when read (sysfs `max_link_width`, NCCL's `link_width`)."""


@frozen
class NumaNode:
    """One NUMA node: its CPUs, memory and distance row (`numactl -H`)."""

    id: int
    cpus: str = ""
    """Linux cpulist."""
    memory_bytes: int | None = None
    distances: tuple[int, ...] = ()


@frozen
class Versions:
    """Software versions seen on the host."""

    driver: str | None = None
    cuda_driver: str | None = None
    nvml: str | None = None
    nccl: str | None = None
    torch: str | None = None


@frozen
class Capabilities:
    """Host facts that decide which transports collectives can use."""

    iommu_enabled: bool | None = None
    iommu_mode: str | None = None
    """Translation of the IOMMU's default domain (`/sys/kernel/iommu_groups/*/type`): `identity`
    (passthrough, `iommu=pt`: peer traffic untouched) or `DMA` / `DMA-FQ` (translated: peer-to-peer
    goes up to the root complex); None when not read or no IOMMU."""
    gpudirect_rdma: bool | None = None
    """True when `nvidia_peermem` (or the legacy `nv_peer_mem`) is loaded."""
    nvlink_fabric: str | None = None
    """NVSwitch fabric / NVLink domain state when NVML reports it."""
    torch_symmetric_memory: bool | None = None
    sharp: bool | None = None
    """True when the network switches reduce in flight (NVIDIA SHARP), which NCCL's CollNet uses."""


@frozen
class Host:
    """One machine: GPUs, the links between them, NICs and NUMA layout."""

    hostname: str
    gpus: tuple[Gpu, ...] = ()
    links: tuple[Link, ...] = ()
    """One entry per GPU pair (a < b)."""
    nics: tuple[Nic, ...] = ()
    gpu_nic: tuple[tuple[str, ...], ...] = ()
    """GPU x NIC legend tokens (`PIX`, `NODE`, `SYS`...), rows in GPU order."""
    numa_nodes: tuple[NumaNode, ...] = ()
    versions: Versions = field(default_factory=Versions)
    capabilities: Capabilities = field(default_factory=Capabilities)

    def link(self, a: int, b: int) -> Link:
        """The link between GPU positions `a` and `b` (positions in `gpus`, not NVML indices)."""
        if a == b:
            return Link(a, a, LinkKind.SELF)
        lo, hi = (a, b) if a < b else (b, a)
        return self._links_by_pair()[(lo, hi)]

    def _links_by_pair(self) -> dict[tuple[int, int], Link]:
        cached: dict[tuple[int, int], Link] | None = self.__dict__.get("_pair_index")
        if cached is None:
            cached = {(link.a, link.b): link for link in self.links}
            object.__setattr__(self, "_pair_index", cached)
        return cached

    def matrix_tokens(self) -> list[list[str]]:
        """The GPU x GPU matrix as `nvidia-smi topo -m` tokens."""
        count = len(self.gpus)
        return [[self.link(i, j).token for j in range(count)] for i in range(count)]


@frozen
class Gap:
    """Something a probe could not read, and why: a partial failure recorded as data."""

    subject: str
    """What was not read, e.g. `nvmlDeviceGetNvLinkState(gpu 3, link 5)`."""
    reason: str
    """Why, e.g. `NotSupported`, `GpuIsLost`, `timed out after 2.0 s`."""
    host: str | None = None
    """In a cluster snapshot, the host the gap belongs to (a node that failed to collect has a gap and no Host)."""
