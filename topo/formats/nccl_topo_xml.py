"""Read NCCL's topology XML: an `NCCL_TOPO_DUMP_FILE` dump or a vendor's hand-written `NCCL_TOPO_FILE`.

The schema is NCCL's (src/graph/xml.cc, `ncclTopoXmlLoadSystem` and below, NCCL 2.4 to 2.28): `<system version="1">`
holding `<cpu numaid affinity arch vendor familyid modelid>`, each holding `<pci busid class link_speed link_width>`
trees and `<nic>`s; a `<pci>` holds `<pci>`, `<gpu dev sm rank gdr>` (with `<nvlink target count tclass>` and
`<c2c>`), `<nic>` (with `<net name dev speed port gdr ...>`) or `<pcilink>`. Hand-written files often state only
the `<pci>` tree: a GPU or NIC is then known by its PCI class alone, and NCCL fills in the rest on the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_NVLINKS_PER_PAIR
from linkscope.topo.formats.nccl_topo_model import (
    GPU_CLASS_PREFIX,
    NIC_CLASS_PREFIX,
    NcclCpu,
    NcclGpu,
    NcclNet,
    NcclNvLink,
    NcclPci,
    NcclTopology,
)
from linkscope.topo.formats.nccl_xml import XmlElement, attr_int, looks_like_xml_of, parse_nccl_root

TOPO_XML_VERSION = 1
"""`NCCL_TOPO_XML_VERSION` in src/graph/xml.h: NCCL refuses a `<system>` of any other version."""


def looks_like_nccl_topo_xml(text: str) -> bool:
    """True when `text` is XML holding NCCL's `<system>` (comments and a declaration may come first)."""
    return looks_like_xml_of(text, "system")


def read_nccl_topo_xml(text: str, name: str) -> NcclTopology:
    """NCCL's machine from its topology XML; raise InputError (one line) on a file NCCL would not load either."""
    root = parse_nccl_root(text, name, "system", TOPO_XML_VERSION, "topology")
    walk = _Walk()
    for element in root.children:
        if element.tag == "cpu":
            walk.cpu(element)
        else:
            walk.unknown(element, "system")
    if not walk.cpus:
        raise InputError(f"{name}: line {root.line}: <system> holds no <cpu>")
    return NcclTopology(name=name, cpus=tuple(walk.cpus), pcis=tuple(walk.pcis), gpus=tuple(walk.gpus),
                        nets=tuple(walk.nets), notes=tuple(walk.notes))


def _flag(text: str | None) -> bool | None:
    value = attr_int(text)
    return None if value is None else value != 0


@dataclass
class _Walk:
    """What one pass over the `<cpu>` elements collects."""

    cpus: list[NcclCpu] = field(default_factory=list)
    pcis: list[NcclPci] = field(default_factory=list)
    gpus: list[NcclGpu] = field(default_factory=list)
    nets: list[NcclNet] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repeated: dict[str, int] = field(default_factory=dict)

    def unknown(self, element: XmlElement, where: str) -> None:
        self.notes.append(f"line {element.line}: <{element.tag}> inside <{where}> is not part of NCCL's schema; ignored")

    def cpu(self, element: XmlElement) -> None:
        numa = attr_int(element.get("numaid"))
        self.cpus.append(NcclCpu(
            numa_id=numa if numa is not None and numa >= 0 else None, affinity=element.get("affinity"),
            arch=element.get("arch"), vendor=element.get("vendor"), family_id=attr_int(element.get("familyid")),
            model_id=attr_int(element.get("modelid")), host_hash=element.get("host_hash")))
        index = len(self.cpus) - 1
        for child in element.children:
            if child.tag == "pci":
                self.pci(child, index, None)
            elif child.tag == "nic":
                self.nic(child, index, None)
            else:
                self.unknown(child, "cpu")

    def pci(self, element: XmlElement, cpu: int, parent: str | None) -> None:
        busid = element.get("busid") or f"(no busid, line {element.line})"
        class_code = element.get("class")
        self.pcis.append(NcclPci(
            busid=busid, class_code=class_code, cpu=cpu, parent=parent, link_speed=element.get("link_speed"),
            link_width=attr_int(element.get("link_width")), vendor=element.get("vendor"), device=element.get("device"),
            line=element.line))
        has_gpu = has_nic = False
        for child in element.children:
            if child.tag == "pci":
                self.pci(child, cpu, busid)
            elif child.tag == "gpu":
                has_gpu = True
                self.gpu(child, cpu, busid)
            elif child.tag == "nic":
                has_nic = True
                self.nic(child, cpu, busid)
            elif child.tag in ("pcilink", "c2c"):
                self.notes.append(f"line {child.line}: <{child.tag}> of {busid} kept in NCCL's file only")
            else:
                self.unknown(child, "pci")
        kind = class_code or ""
        if not has_gpu and kind.startswith(GPU_CLASS_PREFIX):
            self.gpus.append(NcclGpu(busid=busid, cpu=cpu, stated=False))
        if not has_nic and kind.startswith(NIC_CLASS_PREFIX):
            self.nets.append(NcclNet(name=busid, cpu=cpu, busid=busid, stated=False))

    def gpu(self, element: XmlElement, cpu: int, busid: str) -> None:
        links: list[NcclNvLink] = []
        for child in element.children:
            if child.tag == "nvlink":
                target = child.get("target") or ""
                if target == busid:
                    self.notes.append(f"line {child.line}: an <nvlink> of GPU {busid} targets the GPU itself "
                                      "(a bridged pair written as a self-loop): its peer is not named")
                count = attr_int(child.get("count")) or 0
                if not 0 <= count <= MAX_NVLINKS_PER_PAIR:
                    self.notes.append(f"line {child.line}: <nvlink count={count}> is not a link count; ignored")
                    continue
                links.append(NcclNvLink(target, count, child.get("tclass")))
            elif child.tag == "c2c":
                self.notes.append(f"line {child.line}: <c2c> (the GPU's chip-to-chip link to its CPU) of {busid} kept "
                                  "in NCCL's file only")
            else:
                self.unknown(child, "gpu")
        self.gpus.append(NcclGpu(busid=busid, cpu=cpu, dev=attr_int(element.get("dev")), sm=attr_int(element.get("sm")),
                                 rank=attr_int(element.get("rank")), gdr=_flag(element.get("gdr")), nvlinks=tuple(links)))

    def nic(self, element: XmlElement, cpu: int, busid: str | None) -> None:
        for child in element.children:
            if child.tag != "net":
                self.unknown(child, "nic")
                continue
            name = child.get("name") or f"net{child.get('dev') or len(self.nets)}"
            if any(net.name == name for net in self.nets):
                self.repeated[name] = self.repeated.get(name, 1) + 1
                if self.repeated[name] == 2:
                    self.notes.append(f"line {child.line}: <net name={name!r}> appears under more than one CPU "
                                      "(a device without a PCI path, repeated by NCCL); kept once")
                continue
            self.nets.append(NcclNet(
                name=name, cpu=cpu, busid=busid, dev=attr_int(child.get("dev")), speed_mbps=attr_int(child.get("speed")),
                port=attr_int(child.get("port")), gdr=_flag(child.get("gdr")), guid=child.get("guid")))
