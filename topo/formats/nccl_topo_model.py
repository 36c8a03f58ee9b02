"""NCCL's view of one machine, as its topology XML (`NCCL_TOPO_DUMP_FILE`, a vendor's `NCCL_TOPO_FILE`) or its debug
log's `=== System : maxBw ...` tree states it: CPUs, the PCIe tree, GPUs with NVLinks, NICs with their networks.

Frozen dataclasses that keep NCCL's own words (bus ids as NCCL spells them, class codes, link speeds in GT/s); the
snapshot made from them is :func:`topo.formats.nccl_topo_snapshot.snapshot_of`.
"""

from __future__ import annotations

import re

from linkscope.topo.common.frozen import frozen

NVSWITCH_CLASS = "0x068000"
"""PCI class NCCL gives an NVSwitch as an NVLink target (`PCI_NVSWITCH_CLASS` in src/graph/xml.h)."""

GPU_CLASS_PREFIX = "0x03"
"""Display controllers (`0x030000` VGA, `0x030200` 3D): a GPU."""

NIC_CLASS_PREFIX = "0x02"
"""Network controllers (`0x020000` Ethernet, `0x020700` InfiniBand)."""

BRIDGE_CLASS_PREFIX = "0x06"
"""Bridges (`0x060400` PCI-to-PCI, `0x060000` host bridge)."""

PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}
"""PCIe generation by transfer rate per lane (GT/s), as sysfs `max_link_speed` states it."""


NCCL_LANE_RATE = {"2.5 GT/s": 15, "5 GT/s": 30, "8 GT/s": 60, "16 GT/s": 120, "32 GT/s": 240, "2.5 GT/s PCIe": 15,
                  "5.0 GT/s PCIe": 30, "8.0 GT/s PCIe": 60, "16.0 GT/s PCIe": 120, "32.0 GT/s PCIe": 240,
                  "64.0 GT/s PCIe": 480}
"""`kvDictPciGen` of src/graph/topo.cc (NCCL 2.12 to 2.28): the `link_speed` strings NCCL knows, in 100 Mb/s per lane.
Any other string (empty, `16.0 GT/s` without `PCIe`, a Gen7 rate) falls back to 60, Gen3's rate."""

NCCL_FALLBACK_LANE_RATE = 60

NCCL_SPEED_WORDS = {2.5: "2.5 GT/s PCIe", 5.0: "5.0 GT/s PCIe", 8.0: "8.0 GT/s PCIe", 16.0: "16.0 GT/s PCIe",
                    32.0: "32.0 GT/s PCIe", 64.0: "64.0 GT/s PCIe"}
"""How NCCL's own dumps spell each speed (keys of :data:`NCCL_LANE_RATE`)."""


def pcie_gen_of(gts: float | None) -> int | None:
    """The PCIe generation of a link speed in GT/s (None for an unknown or empty speed)."""
    return PCIE_GEN_BY_GTS.get(gts) if gts is not None else None


def link_gts_of(text: str | None) -> float | None:
    """`16.0 GT/s PCIe`, `16 GT/s` -> 16.0; an empty or unreadable speed (virtual ports) -> None."""
    if not text:
        return None
    match = re.match(r"\s*(\d+(?:\.\d+)?)\s*GT/s", text)
    return float(match.group(1)) if match else None


@frozen
class NcclCpu:
    """One `<cpu>`: a NUMA node as NCCL sees it."""

    numa_id: int | None
    """`numaid`; None where NCCL wrote -1 (no NUMA information, common in VMs)."""
    affinity: str | None = None
    """The hex CPU mask, as the kernel prints it (`00000000,00ffffff`)."""
    arch: str | None = None
    vendor: str | None = None
    family_id: int | None = None
    model_id: int | None = None
    host_hash: str | None = None


@frozen
class NcclPci:
    """One `<pci>` element: a bridge, a GPU's or a NIC's PCI function."""

    busid: str
    class_code: str | None
    cpu: int
    """Position of the enclosing CPU in :attr:`NcclTopology.cpus`."""
    parent: str | None
    """Bus id of the enclosing `<pci>`; None when the element hangs directly under its CPU."""
    link_speed: str | None = None
    """`link_speed` as written (`32.0 GT/s PCIe`; empty on virtual ports)."""
    link_width: int | None = None
    """`link_width`; 0 on virtual ports that do not state one."""
    vendor: str | None = None
    device: str | None = None
    line: int = 0
    bw_gbps: float | None = None
    """The bandwidth NCCL gave the link up from this element (a debug log's `PCI[48.0]`); None from XML."""

    @property
    def link_gts(self) -> float | None:
        """The link speed per lane in GT/s; None when not stated."""
        return link_gts_of(self.link_speed)

    @property
    def is_bridge(self) -> bool:
        return (self.class_code or "").startswith(BRIDGE_CLASS_PREFIX)

    @property
    def speed_unknown(self) -> bool:
        """True when NCCL cannot read this port's `link_speed` (empty, or a string it does not know): it then
        assumes Gen3's 8 GT/s. A debug log's `PCI[...]` states only the result: never unknown there."""
        return self.bw_gbps is None and (self.link_speed or "") not in NCCL_LANE_RATE

    @property
    def width_unknown(self) -> bool:
        """True when the XML states no link width (`link_width="0"`): NCCL then assumes x16."""
        return self.bw_gbps is None and not self.link_width

    @property
    def is_virtual(self) -> bool:
        """True for a port without a stated speed or width (what VMs show NCCL)."""
        return self.speed_unknown or self.width_unknown

    @property
    def nccl_bw_gbps(self) -> float:
        """The bandwidth NCCL gives the link (GB/s): `width x lane rate / 80` with its defaults (x16, Gen3), as
        `ncclTopoAddPci` computes it; a debug log's printed value where there is one."""
        if self.bw_gbps is not None:
            return self.bw_gbps
        rate = NCCL_LANE_RATE.get(self.link_speed or "", NCCL_FALLBACK_LANE_RATE)
        return (self.link_width or 16) * rate / 80


@frozen
class NcclNvLink:
    """One `<nvlink>` of a GPU: `count` links to `target` (a GPU's bus id, or an NVSwitch)."""

    target: str
    count: int
    """Links (0 where a debug log states only their bandwidth)."""
    target_class: str | None = None
    bw_gbps: float | None = None
    """NCCL's bandwidth of the links (a debug log's `NVL[370.8]`); None from XML."""

    @property
    def to_nvswitch(self) -> bool:
        return self.target_class == NVSWITCH_CLASS


@frozen
class NcclGpu:
    """One GPU: a `<gpu>` element, or a GPU-class `<pci>` without one (hand-written vendor files)."""

    busid: str | None
    cpu: int
    dev: int | None = None
    sm: int | None = None
    rank: int | None = None
    gdr: bool | None = None
    nvlinks: tuple[NcclNvLink, ...] = ()
    stated: bool = True
    """False for a GPU known only from its PCI class (NCCL fills the rest from the machine it runs on)."""

    @property
    def nvlink_count(self) -> int:
        return sum(link.count for link in self.nvlinks)


@frozen
class NcclNet:
    """One network device: a `<net>` inside a `<nic>`, or a NIC-class `<pci>` without one."""

    name: str
    cpu: int
    busid: str | None = None
    """The `<pci>` the NIC sits in; None for a `<nic>` directly under a CPU (virtual or plain Ethernet)."""
    dev: int | None = None
    speed_mbps: int | None = None
    port: int | None = None
    gdr: bool | None = None
    guid: str | None = None
    stated: bool = True
    """False for a NIC known only from its PCI class."""


@frozen
class NcclTopology:
    """NCCL's machine: what its topology XML or its debug log's topology tree states."""

    name: str
    cpus: tuple[NcclCpu, ...]
    pcis: tuple[NcclPci, ...]
    gpus: tuple[NcclGpu, ...]
    nets: tuple[NcclNet, ...]
    notes: tuple[str, ...] = ()
    """What NCCL's file says that the snapshot model cannot hold, and oddities met while reading."""
    form: str = "xml"
    """`xml` (a dump or topology file) or `log` (the `=== System` tree of a debug log)."""
    max_bw_gbps: float | None = None
    """`maxBw` of the log's `=== System` line; None for XML."""
    total_bw_gbps: float | None = None

    def pci(self, busid: str | None) -> NcclPci | None:
        """The `<pci>` of bus id `busid`, or None."""
        for node in self.pcis:
            if node.busid == busid:
                return node
        return None

    def pci_chain(self, busid: str | None) -> tuple[NcclPci, ...]:
        """The `<pci>` elements from the CPU down to `busid` (included)."""
        chain: list[NcclPci] = []
        node = self.pci(busid)
        while node is not None and len(chain) <= len(self.pcis):
            chain.append(node)
            node = self.pci(node.parent)
        return tuple(reversed(chain))
