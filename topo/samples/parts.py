"""Building blocks of the sample machines: PCI tree slots, GPUs, NVLink ports, NICs, NUMA nodes, hosts.

Conventions shared with the probe, so that a fake NVML driven by a sample gives the sample back:
- GPU bus ids and NVLink remote bus ids are in NVML form (`00000000:1B:00.0`); NIC bus ids and
  `pci_path` elements are in sysfs form (`0000:1a:00.0`, host bridge `pci0000:15`).
- Non-NVLink GPU pairs and the GPU x NIC tokens are :func:`topo.machine.pcipath.classify_pci_pair` of the
  paths and NUMA nodes; NVLink pair counts come from the GPUs' active NVLink ports
  (:func:`topo.machine.links.nvlink_pair_count`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from linkscope.topo.common.frozen import frozen
from linkscope.topo.machine.links import nvlink_pair_count
from linkscope.topo.machine.pcipath import classify_pci_pair
from linkscope.topo.model.host import Capabilities, Gpu, Host, Link, LinkKind, Nic, NumaNode, NvLinkPort, P2PStatus, Versions
from linkscope.topo.model.snapshot import Snapshot

GIB = 1024**3
MIB = 1024**2

# ---------------------------------------------------------------------------------------------
# PCI tree


@frozen
class Slot:
    """A place in the PCI tree: the bridges above it (sysfs form) and the bus a device there sits on."""

    path: tuple[str, ...]
    bus: int
    domain: int = 0

    def sysfs_id(self, function: int = 0) -> str:
        """The device's sysfs address, e.g. `0000:1a:00.0`."""
        return f"{self.domain:04x}:{self.bus:02x}:00.{function}"

    def nvml_bus_id(self) -> str:
        """The device's bus id as NVML and nvidia-smi print it, e.g. `00000000:1A:00.0`."""
        return f"{self.domain:08X}:{self.bus:02X}:00.0"


def root_port(host_bridge_bus: int, device: int, secondary_bus: int, domain: int = 0, function: int = 0) -> Slot:
    """The slot below root port `device.function` of host bridge `pci<domain>:<bus>`."""
    host_bridge = f"pci{domain:04x}:{host_bridge_bus:02x}"
    port = f"{domain:04x}:{host_bridge_bus:02x}:{device:02x}.{function}"
    return Slot((host_bridge, port), secondary_bus, domain)


def host_bridge_slot(domain: int) -> Slot:
    """A device directly below a host bridge of its own (how a Hyper-V VM exposes a passed-through GPU)."""
    return Slot((f"pci{domain:04x}:00",), 0, domain)


def switch(upstream: Slot, device_buses: Sequence[int]) -> list[Slot]:
    """The slots below the downstream ports of a PCIe switch whose upstream port sits at `upstream`."""
    upstream_port = upstream.sysfs_id()
    internal_bus = upstream.bus + 1
    return [
        Slot(
            (*upstream.path, upstream_port, f"{upstream.domain:04x}:{internal_bus:02x}:{port:02x}.0"),
            bus,
            upstream.domain,
        )
        for port, bus in enumerate(device_buses)
    ]


# ---------------------------------------------------------------------------------------------
# GPUs, NVLink, NICs, NUMA


@frozen
class GpuModel:
    """What every GPU of one model has in common (NVML name, memory, compute capability, PCIe)."""

    name: str
    memory_total_bytes: int
    compute_capability: str
    pcie_gen: int
    nvlink_gen: int | None = None


H100_SXM = GpuModel("NVIDIA H100 80GB HBM3", 81559 * MIB, "9.0", 5, 4)
B200_SXM = GpuModel("NVIDIA B200", 179 * GIB, "10.0", 5, 5)
"""B200 of an HGX board as NVML names it (179 GB of its 180 GB HBM3e visible, as nvidia-smi reports on HGX B200)."""
A100_SXM = GpuModel("NVIDIA A100-SXM4-80GB", 81920 * MIB, "8.0", 4, 3)
A100_PCIE = GpuModel("NVIDIA A100 80GB PCIe", 81920 * MIB, "8.0", 4, 3)
V100_SXM2 = GpuModel("Tesla V100-SXM2-16GB", 16160 * MIB, "7.0", 3, 2)
L40S = GpuModel("NVIDIA L40S", 46068 * MIB, "8.9", 4)
RTX_4090 = GpuModel("NVIDIA GeForce RTX 4090", 24564 * MIB, "8.9", 4)


def fake_uuid(sample: str, index: int) -> str:
    """A deterministic GPU UUID in NVML's `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` form."""
    digest = hashlib.sha256(f"linkscope-sample:{sample}:gpu{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def make_gpu(
    sample: str,
    index: int,
    model: GpuModel,
    slot: Slot,
    numa: NumaNode,
    nvlinks: tuple[NvLinkPort, ...] = (),
    pcie_width_current: int = 16,
) -> Gpu:
    """One GPU of `model` at `slot`, local to NUMA node `numa`."""
    return Gpu(
        index=index,
        name=model.name,
        uuid=fake_uuid(sample, index),
        pci_bus_id=slot.nvml_bus_id(),
        numa_node=numa.id,
        cpu_affinity=numa.cpus,
        numa_affinity=str(numa.id),
        memory_total_bytes=model.memory_total_bytes,
        compute_capability=model.compute_capability,
        mig_enabled=False,
        nvlinks=nvlinks,
        pcie_gen_current=model.pcie_gen,
        pcie_gen_max=model.pcie_gen,
        pcie_width_current=pcie_width_current,
        pcie_width_max=16,
        pci_path=slot.path,
    )


def nvswitch_ports(
    gen: int, links_per_switch: Sequence[int], switch_bus_ids: Sequence[str], active: int | None = None
) -> tuple[NvLinkPort, ...]:
    """The NVLink ports of a GPU on an NVSwitch baseboard: `links_per_switch[k]` links to switch k.

    The first `active` links are up (all when None); the others are down and report no remote.
    """
    switch_of_link = [switch for switch, count in enumerate(links_per_switch) for _ in range(count)]
    up_count = len(switch_of_link) if active is None else active
    return tuple(
        NvLinkPort(link, True, gen, switch_bus_ids[switch], "switch") if link < up_count else NvLinkPort(link, False, gen)
        for link, switch in enumerate(switch_of_link)
    )


def direct_nvlink_ports(gen: int, peers: Sequence[tuple[str, int]]) -> tuple[NvLinkPort, ...]:
    """The NVLink ports of a GPU wired straight to other GPUs: `count` links to each `(bus_id, count)`."""
    remotes = [bus_id for bus_id, count in peers for _ in range(count)]
    return tuple(NvLinkPort(link, True, gen, bus_id, "gpu") for link, bus_id in enumerate(remotes))


def ib_netdev(slot: Slot) -> str:
    """systemd's name for an InfiniBand port at `slot`, e.g. `ibp24s0` (bus in decimal)."""
    return f"ibp{slot.bus}s0"


def eth_netdev(slot: Slot, function: int, multi_function: bool) -> str:
    """systemd's name for an Ethernet port at `slot`, e.g. `enp41s0f0np0` on a dual-port card."""
    if multi_function:
        return f"enp{slot.bus}s0f{function}np{function}"
    return f"enp{slot.bus}s0"


def make_nic(
    name: str, slot: Slot, numa: int, link_layer: str, rate_gbit_per_s: float, function: int = 0, multi_function: bool = False
) -> Nic:
    """A NIC port at `slot` (function `function` of the card there)."""
    netdev = ib_netdev(slot) if link_layer == "InfiniBand" else eth_netdev(slot, function, multi_function)
    return Nic(
        name=name,
        netdev=netdev,
        pci_bus_id=slot.sysfs_id(function),
        numa_node=numa,
        link_layer=link_layer,
        rate_gbit_per_s=rate_gbit_per_s,
        state="ACTIVE",
        pci_path=slot.path,
    )


def cpulist(*ranges: tuple[int, int]) -> str:
    """A Linux cpulist from inclusive (first, last) ranges, e.g. `0-55,112-167`."""
    return ",".join(f"{first}-{last}" for first, last in ranges)


def numa_nodes(
    cpus: Sequence[str], memory_bytes: int, socket_of_node: Sequence[int], same_socket: int, other_socket: int
) -> tuple[NumaNode, ...]:
    """NUMA nodes with the given cpulists and memory, distances 10 / `same_socket` / `other_socket`."""

    def distance(a: int, b: int) -> int:
        if a == b:
            return 10
        return same_socket if socket_of_node[a] == socket_of_node[b] else other_socket

    count = len(cpus)
    return tuple(
        NumaNode(node, cpus[node], memory_bytes, tuple(distance(node, other) for other in range(count))) for node in range(count)
    )


def two_socket_smt(cores_per_socket: int) -> list[str]:
    """Cpulists of the two nodes of a 2-socket SMT machine: node 0 gets `0-(c-1),(2c)-(3c-1)`..."""
    c = cores_per_socket
    return [cpulist((0, c - 1), (2 * c, 3 * c - 1)), cpulist((c, 2 * c - 1), (3 * c, 4 * c - 1))]


# ---------------------------------------------------------------------------------------------
# Host assembly

P2P_NVLINK = P2PStatus(read="OK", write="OK", nvlink="OK", atomics="OK")
P2P_PCIE_OK = P2PStatus(read="OK", write="OK", nvlink="NS", atomics="NS")
P2P_NONE = P2PStatus(read="NS", write="NS", nvlink="NS", atomics="NS")

P2PRule = Callable[[LinkKind], P2PStatus]
"""P2P status of a GPU pair without NVLink, by its PCIe link class."""


def p2p_within_socket(kind: LinkKind) -> P2PStatus:
    """PCIe peer-to-peer works below one CPU socket and not across the socket interconnect."""
    return P2P_NONE if kind is LinkKind.SYS else P2P_PCIE_OK


def p2p_never(kind: LinkKind) -> P2PStatus:
    """No PCIe peer-to-peer at all (GeForce cards, most VMs)."""
    return P2P_NONE


def gpu_link(gpu_a: Gpu, gpu_b: Gpu, position_a: int, position_b: int, p2p_rule: P2PRule) -> Link:
    """The link between two GPUs: NVLink when they share active links, else their PCIe class."""
    count = nvlink_pair_count(gpu_a, gpu_b)
    if count:
        return Link(position_a, position_b, LinkKind.NVLINK, count, gpu_a.nvlink_gen, P2P_NVLINK)
    kind = classify_pci_pair(gpu_a.pci_path, gpu_a.numa_node, gpu_b.pci_path, gpu_b.numa_node)
    return Link(position_a, position_b, kind, p2p=p2p_rule(kind))


def assemble_host(
    hostname: str,
    gpus: Sequence[Gpu],
    nics: Sequence[Nic],
    nodes: tuple[NumaNode, ...],
    versions: Versions,
    capabilities: Capabilities,
    p2p_rule: P2PRule,
) -> Host:
    """A host whose links and GPU x NIC tokens are derived from the GPUs' ports and PCI paths."""
    links = tuple(gpu_link(gpus[a], gpus[b], a, b, p2p_rule) for a in range(len(gpus)) for b in range(a + 1, len(gpus)))
    gpu_nic = tuple(
        tuple(classify_pci_pair(gpu.pci_path, gpu.numa_node, nic.pci_path, nic.numa_node).value for nic in nics) for gpu in gpus
    )
    return Host(hostname, tuple(gpus), links, tuple(nics), gpu_nic, nodes, versions, capabilities)


def snapshot(name: str, host: Host, description: str, sources: Sequence[str]) -> Snapshot:
    """The sample snapshot `sample:<name>` with its description and public sources in `meta`."""
    return Snapshot(
        hosts=(host,),
        source=f"sample:{name}",
        meta=(("description", description), ("sources", "; ".join(sources))),
    )


def versions(driver: str, cuda_driver: str) -> Versions:
    """Driver versions as NVML reports them (the NVML version is `<cuda major>.<driver>`)."""
    return Versions(driver=driver, cuda_driver=cuda_driver, nvml=f"{cuda_driver.split('.')[0]}.{driver}")
