"""NCCL's view of a machine (:class:`NcclTopology`) as a :class:`Snapshot`, so that every command takes an NCCL
topology file as a SOURCE.

GPU pairs and GPU/NIC pairs get the `nvidia-smi topo -m` token of their path in NCCL's tree: `NV<n>` for NVLinks
(to each other, or n links each to NVSwitches), `PIX` under one bridge, `PXB` under a common bridge higher up,
`NODE` under different bridges of one CPU, `PHB` through the CPU itself, `SYS` across CPUs. What the snapshot cannot
hold (GPUDirect flags, NVLink targets, CPU models, the reader's notes) is kept as `nccl_topo.note` meta entries.
"""

from __future__ import annotations

import re

from linkscope.topo.common.cpulist import format_cpulist
from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.nccl_topo_model import NcclGpu, NcclNet, NcclTopology, pcie_gen_of
from linkscope.topo.model.host import Gap, Gpu, Host, Link, LinkKind, Nic, NumaNode
from linkscope.topo.model.snapshot import Snapshot

FORMAT_NAME = "nccl-topo-xml"
NOTE_KEY = "nccl_topo.note"


def nvml_bus_id(busid: str | None) -> str | None:
    """NCCL's `0000:0f:00.0` as NVML spells it, `00000000:0F:00.0`."""
    if not busid or busid.count(":") != 2:
        return busid
    domain, rest = busid.split(":", 1)
    return f"{domain.rjust(8, '0')}:{rest}".upper()


def nccl_bus_id(busid: str) -> str:
    """NVML's `00000000:0F:00.0` as NCCL spells it, `0000:0f:00.0` (domains above 0xffff keep their digits)."""
    if busid.count(":") != 2:
        return busid.lower()
    domain, rest = busid.split(":", 1)
    stripped = domain.lstrip("0")
    return f"{stripped.rjust(4, '0')}:{rest}".lower()


def cpulist_of_mask(mask: str | None) -> str | None:
    """A kernel CPU mask (`0000ffff,00ff0000`: 32-bit words, most significant first) as a Linux cpulist."""
    if not mask:
        return None
    cpus: set[int] = set()
    for word_number, word in enumerate(reversed(mask.strip().split(","))):
        try:
            value = int(word, 16)
        except ValueError:
            return None
        cpus.update(word_number * 32 + bit for bit in range(32) if value >> bit & 1)
    return format_cpulist(cpus) if cpus else None


def snapshot_of(topology: NcclTopology) -> Snapshot:
    """The snapshot of NCCL's machine (one host)."""
    gpus = _ordered_gpus(topology)
    nets = sorted((net for net in topology.nets if net.stated), key=lambda net: (net.dev is None, net.dev or 0)) + sorted(
        (net for net in topology.nets if not net.stated), key=lambda net: nvml_bus_id(net.busid) or "")
    host = Host(
        hostname="",
        gpus=tuple(_gpu(topology, gpu, index) for index, gpu in gpus),
        links=tuple(_gpu_link(topology, a, b, i, j) for i, (_, a) in enumerate(gpus)
                    for j, (_, b) in enumerate(gpus) if i < j),
        nics=tuple(_nic(topology, net) for net in nets),
        gpu_nic=tuple(tuple(_path_token(topology, gpu.cpu, gpu.busid, net.cpu, net.busid) for net in nets)
                      for _, gpu in gpus),
        numa_nodes=tuple(NumaNode(id=cpu.numa_id, cpus=cpulist_of_mask(cpu.affinity) or "")
                         for cpu in topology.cpus if cpu.numa_id is not None),
    )
    meta = [("format", FORMAT_NAME if topology.form == "xml" else "nccl-log-topology")]
    meta.extend((NOTE_KEY, note) for note in (*topology.notes, *_kept_notes(topology)))
    return Snapshot(hosts=(host,), source=topology.name, meta=tuple(meta), gaps=tuple(_gaps(topology, gpus)))


def _ordered_gpus(topology: NcclTopology) -> list[tuple[int, NcclGpu]]:
    """GPUs with their index: NCCL's `dev` where every GPU states a distinct one, else PCI bus id order (NVML's)."""
    devs = [gpu.dev for gpu in topology.gpus]
    if devs and all(dev is not None for dev in devs) and len(set(devs)) == len(devs):
        return sorted(((int(gpu.dev or 0), gpu) for gpu in topology.gpus), key=lambda pair: pair[0])
    ordered = sorted(topology.gpus, key=lambda gpu: nvml_bus_id(gpu.busid) or "")
    return list(enumerate(ordered))


def _bridges(topology: NcclTopology, busid: str | None) -> tuple[str, ...]:
    """Bus ids of the `<pci>` elements above `busid` (the device's own one excluded), top first."""
    return tuple(node.busid for node in topology.pci_chain(busid)[:-1])


def _gpu(topology: NcclTopology, gpu: NcclGpu, index: int) -> Gpu:
    pci = topology.pci(gpu.busid)
    cpu = topology.cpus[gpu.cpu]
    return Gpu(
        index=index,
        pci_bus_id=nvml_bus_id(gpu.busid),
        numa_node=cpu.numa_id,
        cpu_affinity=cpulist_of_mask(cpu.affinity),
        numa_affinity=str(cpu.numa_id) if cpu.numa_id is not None else None,
        compute_capability=f"{gpu.sm // 10}.{gpu.sm % 10}" if gpu.sm else None,
        pcie_gen_max=pcie_gen_of(pci.link_gts) if pci else None,
        pcie_width_max=(pci.link_width or None) if pci else None,
        pci_path=tuple(nvml_bus_id(bus) or bus for bus in _bridges(topology, gpu.busid)),
    )


def _nic(topology: NcclTopology, net: NcclNet) -> Nic:
    pci = topology.pci(net.busid)
    cpu = topology.cpus[net.cpu]
    class_code = pci.class_code if pci else None
    layer = {"0x020700": "InfiniBand", "0x020000": "Ethernet"}.get(class_code or "")
    return Nic(
        name=net.name,
        pci_bus_id=nvml_bus_id(net.busid),
        numa_node=cpu.numa_id,
        link_layer=layer,
        rate_gbit_per_s=net.speed_mbps / 1000 if net.speed_mbps else None,
        pci_path=tuple(nvml_bus_id(bus) or bus for bus in _bridges(topology, net.busid)),
        pcie_gen_max=pcie_gen_of(pci.link_gts) if pci else None,
        pcie_width_max=(pci.link_width or None) if pci else None,
    )


def _nvlink_count(a: NcclGpu, b: NcclGpu) -> int:
    """NVLinks between two GPUs: links to each other, or the smaller of their NVSwitch link counts."""
    direct = sum(link.count for link in a.nvlinks if b.busid and link.target.lower() == b.busid.lower())
    if direct:
        return direct
    a_switch = sum(link.count for link in a.nvlinks if link.to_nvswitch)
    b_switch = sum(link.count for link in b.nvlinks if link.to_nvswitch)
    return min(a_switch, b_switch)


def _gpu_link(topology: NcclTopology, a: NcclGpu, b: NcclGpu, i: int, j: int) -> Link:
    count = _nvlink_count(a, b)
    if count:
        return Link(i, j, LinkKind.NVLINK, nvlink_count=count)
    token = _path_token(topology, a.cpu, a.busid, b.cpu, b.busid)
    return Link(i, j, LinkKind(token))


def _path_token(topology: NcclTopology, cpu_a: int, busid_a: str | None, cpu_b: int, busid_b: str | None) -> str:
    """The legend token of the PCIe path between two devices in NCCL's tree."""
    if topology.cpus[cpu_a].numa_id != topology.cpus[cpu_b].numa_id or (
            cpu_a != cpu_b and topology.cpus[cpu_a].numa_id is None):
        return LinkKind.SYS.value
    above_a, above_b = _bridges(topology, busid_a), _bridges(topology, busid_b)
    common = 0
    while common < min(len(above_a), len(above_b)) and above_a[common] == above_b[common]:
        common += 1
    if common:
        return (LinkKind.PIX if common == len(above_a) == len(above_b) else LinkKind.PXB).value
    return (LinkKind.NODE if above_a and above_b else LinkKind.PHB).value


def _gaps(topology: NcclTopology, gpus: list[tuple[int, NcclGpu]]) -> list[Gap]:
    gaps: list[Gap] = []
    for index, gpu in gpus:
        pci = topology.pci(gpu.busid)
        if pci is not None and pci.is_virtual:
            gaps.append(Gap(f"PCIe link speed/width of GPU {index} ({gpu.busid})",
                            f"NCCL's file states link_speed={pci.link_speed or ''!r} link_width={pci.link_width} "
                            "(a virtual port: NCCL assumes Gen3 for an unknown speed, x16 for an unknown width)"))
    if gpus and not any(gpu.stated for _, gpu in gpus):
        gaps.append(Gap("GPUs and NVLinks", "the file states GPUs by PCI class only (no <gpu>/<nvlink>): NCCL fills "
                        "them in from the machine it runs on"))
    if not topology.gpus:
        gaps.append(Gap("GPUs", "NCCL's file names no GPU"))
    return gaps


def _kept_notes(topology: NcclTopology) -> list[str]:
    """What NCCL states that the snapshot model has no field for."""
    notes: list[str] = []
    for gpu in topology.gpus:
        if gpu.stated:
            switch = [f"{link.target} x{link.count}" for link in gpu.nvlinks if link.to_nvswitch]
            notes.append(f"GPU {gpu.busid}: dev {gpu.dev}, rank {gpu.rank}, gdr {_yes_no(gpu.gdr)}"
                         + (f", NVLinks to NVSwitch {', '.join(switch)}" if switch else ""))
    for net in topology.nets:
        if net.stated:
            notes.append(f"net {net.name}: dev {net.dev}, port {net.port}, gdr {_yes_no(net.gdr)}, guid {net.guid}")
    for cpu in topology.cpus:
        notes.append(f"cpu numaid {cpu.numa_id}: {cpu.arch or '?'} {cpu.vendor or '?'} family {cpu.family_id} "
                     f"model {cpu.model_id}" + (f", host_hash {cpu.host_hash}" if cpu.host_hash else ""))
    for pci in topology.pcis:
        if pci.is_bridge:
            notes.append(f"bridge {pci.busid} (class {pci.class_code}): link_speed {pci.link_speed!r} "
                         f"link_width {pci.link_width}")
    return notes


_CPU_NOTE = re.compile(r"cpu numaid (-?\d+|None): (\S+) (\S+) family (\d+|None) model (\d+|None)")
_BRIDGE_NOTE = re.compile(r"bridge (\S+) \(class (\S+)\): link_speed '([^']*)' link_width (\d+|None)")


@frozen
class NotedCpu:
    """A CPU's model as an NCCL topology SOURCE stated it (kept in the snapshot's notes)."""

    arch: str | None
    vendor: str | None
    family_id: int | None
    model_id: int | None


def noted_cpus(snapshot: Snapshot) -> dict[int | None, NotedCpu]:
    """The CPU models the snapshot's `nccl_topo.note` entries state, by NUMA id (what :func:`snapshot_of` kept)."""
    found: dict[int | None, NotedCpu] = {}
    for key, value in snapshot.meta:
        match = _CPU_NOTE.fullmatch(value.split(",")[0]) if key == NOTE_KEY else None
        if match is not None:
            numa, arch, vendor, family, model = match.groups()
            found.setdefault(None if numa == "None" else int(numa), NotedCpu(
                None if arch == "?" else arch, None if vendor == "?" else vendor,
                None if family == "None" else int(family), None if model == "None" else int(model)))
    return found


def noted_bridges(snapshot: Snapshot) -> dict[str, tuple[str, str, int | None]]:
    """Bridges an NCCL topology SOURCE stated, by NCCL bus id: (class, link_speed, link_width)."""
    found: dict[str, tuple[str, str, int | None]] = {}
    for key, value in snapshot.meta:
        match = _BRIDGE_NOTE.fullmatch(value) if key == NOTE_KEY else None
        if match is not None:
            busid, klass, speed, width = match.groups()
            found.setdefault(busid, (klass, speed, None if width == "None" else int(width)))
    return found


def _yes_no(flag: bool | None) -> str:
    return "?" if flag is None else ("1" if flag else "0")
