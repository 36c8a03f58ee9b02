"""What NCCL's own XML reader (src/graph/xml.cc and topo.cc, NCCL 2.12 to 2.28) demands of a topology file, and the
structure of a topology file to compare an exported one with its source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from linkscope.topo.formats.nccl_topo_model import NCCL_LANE_RATE, NcclTopology
from linkscope.topo.formats.nccl_xml import XmlElement, parse_xml

MAX_STR_LEN = 255
MAX_ATTR_COUNT = 16
MAX_SUBS = 640
CHILDREN = {"system": {"cpu"}, "cpu": {"pci", "nic"}, "pci": {"pci", "gpu", "nic", "pcilink"}, "gpu": {"nvlink", "c2c"},
            "nic": {"net"}, "nvlink": set(), "net": set(), "c2c": set(), "pcilink": set()}
"""`ncclTopoXmlLoad*` handlers: which element may hold which."""


def nccl_reader_problems(text: str) -> list[str]:
    """Why NCCL's reader would refuse `text` (empty: it loads). Its tokenizer reads `<`, a name, `key="value"` pairs
    separated by single spaces and `>` or `/>`; `ncclTopoXmlLoadSystem` wants version 1; `ncclTopoAddCpu` a numaid;
    `ncclTopoAddPci` a busid and a class."""
    problems: list[str] = []
    if "&" in text:
        problems.append("an entity (NCCL's reader does not expand them)")
    for tag in re.findall(r"<[^!/][^>]*>", text):
        if re.search(r"\s{2,}\w|\t|\n", tag.strip("<>/ ")):
            problems.append(f"attributes not separated by single spaces: {tag[:60]}")
    root = parse_xml(text, "exported.xml")
    if root.tag != "system" or root.get("version") != "1":
        problems.append("the root is not <system version=\"1\">")

    def walk(element: XmlElement) -> None:
        if len(element.attrs) > MAX_ATTR_COUNT:
            problems.append(f"<{element.tag}> has more than {MAX_ATTR_COUNT} attributes")
        if len(element.children) > MAX_SUBS:
            problems.append(f"<{element.tag}> has more than {MAX_SUBS} children")
        for key, value in element.attrs:
            if len(key) > MAX_STR_LEN or len(value) > MAX_STR_LEN:
                problems.append(f"<{element.tag} {key}> longer than {MAX_STR_LEN}")
        if element.tag == "cpu" and element.get("numaid") is None:
            problems.append("a <cpu> without numaid")
        if element.tag == "pci":
            if element.get("busid") is None or element.get("class") is None:
                problems.append("a <pci> without busid or class")
            speed = element.get("link_speed")
            if speed is not None and speed not in NCCL_LANE_RATE:
                problems.append(f"link_speed {speed!r} that NCCL does not know")
        for child in element.children:
            if child.tag not in CHILDREN.get(element.tag, set()):
                problems.append(f"<{child.tag}> inside <{element.tag}>")
            walk(child)

    walk(root)
    return problems


@dataclass(frozen=True)
class Leaf:
    """A GPU or NIC PCI function: where it hangs and how fast its link is (None: not stated)."""

    cpu_numa: int | None
    bridges: tuple[str, ...]
    kind: str
    gts: float | None
    width: int | None


def _mask_value(mask: str | None) -> int | None:
    if not mask:
        return None
    return sum(int(word, 16) << (32 * number) for number, word in enumerate(reversed(mask.split(","))))


def structure(topology: NcclTopology) -> tuple[dict[int | None, int | None], dict[str, Leaf], dict[str, tuple[float | None,
                                                                                                           int | None]]]:
    """(CPU affinity by numaid, GPU/NIC leaves by bus id, bridge speeds by bus id) of a topology."""
    cpus = {cpu.numa_id: _mask_value(cpu.affinity) for cpu in topology.cpus}
    leaves: dict[str, Leaf] = {}
    for busid, kind in [(gpu.busid, "gpu") for gpu in topology.gpus] + [(net.busid, "nic") for net in topology.nets]:
        node = topology.pci(busid)
        if busid is None or node is None:
            continue
        chain = topology.pci_chain(busid)
        leaves[busid] = Leaf(topology.cpus[node.cpu].numa_id, tuple(port.busid for port in chain[:-1]), kind,
                             node.link_gts, node.link_width or None)
    bridges = {port.busid: (port.link_gts, port.link_width or None) for port in topology.pcis if port.is_bridge}
    return cpus, leaves, bridges
