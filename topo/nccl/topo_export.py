"""Write the topology file NCCL reads with `NCCL_TOPO_FILE`, from a snapshot: for the VM that cannot see its own PCIe
tree (virtual ports without speed, GPUs and NICs under the wrong CPU).

The file has the structure cloud vendors ship for their GPU VMs (Azure's NDv4/NDv5 files, AWS's p4d, Crusoe's B300):
`<system version="1">`, one `<cpu numaid affinity>` per NUMA node, and under it the PCIe tree of bridges with each GPU
(class 0x030200) and NIC (0x020700 InfiniBand, 0x020000 Ethernet) as a `<pci busid class link_speed link_width>` leaf.
GPUs carry no `<gpu>`/`<nvlink>` element: NCCL fills those in itself on the machine, through NVML, as it does for the
vendors' files. Attribute names, the version and the speed strings follow NCCL's reader (src/graph/xml.cc
`ncclTopoXmlLoadSystem` and below, `kvDictPciGen` in src/graph/topo.cc), unchanged from NCCL 2.12 to 2.28.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from linkscope.topo.common.cpulist import parse_cpulist
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_NCCL_STR_CHARS
from linkscope.topo.formats.nccl_topo_model import NCCL_LANE_RATE, NCCL_SPEED_WORDS
from linkscope.topo.formats.nccl_topo_snapshot import NotedCpu, nccl_bus_id, noted_bridges, noted_cpus
from linkscope.topo.formats.nccl_topo_xml import TOPO_XML_VERSION
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot

GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""PCIe transfer rate per lane (GT/s) by generation."""

BUS_ID = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
"""A PCI bus id (`0000:1a:00.0`); a snapshot's pci paths also hold sysfs root names (`pci0000:00`), not devices."""

@dataclass
class _Leaf:
    busid: str
    klass: str
    gen: int | None
    width: int | None


@dataclass
class _Node:
    busid: str
    children: dict[str, _Node] = field(default_factory=dict)
    leaves: list[_Leaf] = field(default_factory=list)


@frozen
class ExportedTopology:
    """The file's text and what the snapshot lacked for it (each a line for people)."""

    text: str
    gpus: int
    nics: int
    cpus: int
    notes: tuple[str, ...] = ()


def export_nccl_topology(snapshot: Snapshot) -> ExportedTopology:
    """The NCCL topology file of the snapshot's first host."""
    host = snapshot.host
    notes: list[str] = []
    if len(snapshot.hosts) > 1:
        notes.append(f"the snapshot holds {len(snapshot.hosts)} hosts: the file describes the first, "
                     f"{host.hostname or '(unnamed)'}")
    trees: dict[int, _Node] = {}
    gpus = nics = 0
    for gpu in host.gpus:
        if not gpu.pci_bus_id:
            notes.append(f"GPU {gpu.index}: no PCI bus id in the snapshot; left out (NCCL adds it itself)")
            continue
        gpus += 1
        _place(trees, gpu.numa_node, gpu.pci_path, _Leaf(nccl_bus_id(gpu.pci_bus_id), "0x030200",
                                                         gpu.pcie_gen_max or gpu.pcie_gen_current,
                                                         gpu.pcie_width_max or gpu.pcie_width_current))
    written: set[str] = set()
    for nic in host.nics:
        if not nic.pci_bus_id or not BUS_ID.fullmatch(nic.pci_bus_id):
            notes.append(f"NIC {nic.name}: no PCI bus id in the snapshot; left out (NCCL finds it itself)")
            continue
        if nic.pci_bus_id.lower() in written:
            continue
        written.add(nic.pci_bus_id.lower())
        nics += 1
        klass = "0x020700" if (nic.link_layer or "").lower() == "infiniband" else "0x020000"
        _place(trees, nic.numa_node, nic.pci_path, _Leaf(nccl_bus_id(nic.pci_bus_id), klass, nic.pcie_gen_max,
                                                         nic.pcie_width_max))
    missing_speed = [leaf.busid for tree in trees.values() for leaf in _leaves(tree) if leaf.gen is None]
    if missing_speed:
        notes.append(f"no PCIe generation/width in the snapshot for {', '.join(missing_speed[:8])}: their link_speed and "
                     "link_width are left out, and NCCL reads them on the machine")
    cpus = noted_cpus(snapshot)
    bridges = noted_bridges(snapshot)
    lines = [f'<system version="{TOPO_XML_VERSION}">']
    for numa in sorted(trees, key=lambda key: (key < 0, key)):
        lines.append(f"  <cpu{_cpu_attributes(host, numa, cpus.get(numa if numa >= 0 else None))}>")
        root = trees[numa]
        lines.extend(_leaf_lines(root.leaves, 4))
        for busid in sorted(root.children):
            lines.extend(_bridge_lines(root.children[busid], 4, bridges))
        lines.append("  </cpu>")
    lines.append("</system>")
    if not cpus:
        notes.append("CPU models (arch, vendor, familyid, modelid) are not in the snapshot: NCCL reads them on the machine")
    return ExportedTopology("\n".join(lines) + "\n", gpus, nics, len(trees), tuple(notes))


def _place(trees: dict[int, _Node], numa: int | None, path: tuple[str, ...], leaf: _Leaf) -> None:
    node = trees.setdefault(numa if numa is not None else -1, _Node("cpu"))
    for bridge in path:
        if BUS_ID.fullmatch(bridge) or bridge.lower().startswith("ffff:"):
            busid = nccl_bus_id(bridge)
            node = node.children.setdefault(busid, _Node(busid))
    if all(known.busid != leaf.busid for known in node.leaves):  # a dual-port NIC is one PCI function
        node.leaves.append(leaf)


def _leaves(node: _Node) -> list[_Leaf]:
    found = list(node.leaves)
    for child in node.children.values():
        found.extend(_leaves(child))
    return found


def _speed_attributes(gen: int | None, width: int | None) -> str:
    words = NCCL_SPEED_WORDS.get(GEN_GTS.get(gen or 0, 0.0))
    speed = f' link_speed="{words}"' if words else ""
    return speed + (f' link_width="{width}"' if width else "")


def _leaf_lines(leaves: list[_Leaf], indent: int) -> list[str]:
    return [f'{" " * indent}<pci busid="{leaf.busid}" class="{leaf.klass}"{_speed_attributes(leaf.gen, leaf.width)}/>'
            for leaf in sorted(leaves, key=lambda leaf: leaf.busid)]


def _bridge_lines(node: _Node, indent: int, noted: dict[str, tuple[str, str, int | None]]) -> list[str]:
    known = noted.get(node.busid)
    if known is not None and known[1] in NCCL_LANE_RATE:
        klass, speed, width = known
        attributes = f' link_speed="{speed}"' + (f' link_width="{width}"' if width else "")
    else:
        klass = known[0] if known else "0x060400"
        leaves = [leaf for leaf in _leaves(node) if leaf.gen is not None]
        fastest = max(leaves, key=lambda leaf: (leaf.gen or 0, leaf.width or 0), default=None)
        attributes = _speed_attributes(fastest.gen, fastest.width) if fastest else ""
    lines = [f'{" " * indent}<pci busid="{node.busid}" class="{klass}"{attributes}>']
    lines.extend(_leaf_lines(node.leaves, indent + 2))
    for busid in sorted(node.children):
        lines.extend(_bridge_lines(node.children[busid], indent + 2, noted))
    lines.append(f'{" " * indent}</pci>')
    return lines


def _cpu_attributes(host: Host, numa: int, model: NotedCpu | None) -> str:
    attributes = f' numaid="{numa}"'
    mask = _affinity_mask(host, numa)
    if mask:
        attributes += f' affinity="{mask}"'
    if model is not None:
        for name, value in (("arch", model.arch), ("vendor", model.vendor), ("familyid", model.family_id),
                            ("modelid", model.model_id)):
            if value is not None and re.fullmatch(r"[\w.-]{1,64}", str(value)):
                attributes += f' {name}="{value}"'
    return attributes


def _affinity_mask(host: Host, numa: int) -> str | None:
    """The NUMA node's CPUs as the kernel's hex mask (`0000ffff,00ff0000`), from the node's cpulist or its GPUs'."""
    cpulist = next((node.cpus for node in host.numa_nodes if node.id == numa and node.cpus), None)
    if cpulist is None:
        cpulist = next((gpu.cpu_affinity for gpu in host.gpus if gpu.numa_node == numa and gpu.cpu_affinity), None)
    if not cpulist:
        return None
    try:
        cpus = parse_cpulist(cpulist)
    except ValueError:
        return None
    if not cpus:
        return None
    words = max(cpus) // 32 + 1
    value = sum(1 << cpu for cpu in cpus)
    mask = ",".join(f"{(value >> (32 * word)) & 0xFFFFFFFF:08x}" for word in reversed(range(words)))
    return mask if len(mask) <= MAX_NCCL_STR_CHARS else None

