"""Read NUMA nodes, the PCI tree, NICs, IOMMU and loaded modules from sysfs.

Everything is read below a root directory that is a parameter (`/` on a real machine, a
`tmp_path` tree in tests), never needs root, and never writes. An unreadable file becomes a
:class:`~topo.model.host.Gap` and the rest goes on. Shell equivalents: `numactl -H`, `lspci -t`,
`ibstat`, `ip link`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from linkscope.topo.common.cpulist import format_cpulist as format_cpulist  # the probes read cpulists through this module
from linkscope.topo.common.cpulist import parse_cpulist as parse_cpulist
from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.nccl_topo_model import link_gts_of, pcie_gen_of
from linkscope.topo.model.host import Gap, Nic, NumaNode

NVIDIA_VENDOR_ID = 0x10DE
DISPLAY_CLASS = 0x03
"""PCI base class of display controllers (VGA 0x0300, 3D 0x0302): what a GPU reports."""

_BDF = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\Z")
_HOST_BRIDGE = re.compile(r"pci[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}\Z")
_NODE_DIR = re.compile(r"node(\d+)\Z")
OPERSTATE_WORDS = {"up": "ACTIVE", "down": "DOWN"}
"""`/sys/class/net/*/operstate` in the port-state words `ibstat` uses, so every NIC reads alike."""
_RATE = re.compile(r"\s*([0-9.]+)\s*Gb/sec")


@frozen
class PciDevice:
    """One PCI function as sysfs shows it."""

    bus_id: str
    """sysfs form, e.g. `0000:18:00.0`."""
    pci_path: tuple[str, ...]
    """Host bridge (`pci0000:17`) then every bridge down to, not including, the device."""
    numa_node: int | None
    vendor_id: int | None = None
    class_code: int | None = None
    pcie_gen_max: int | None = None
    """From `max_link_speed` (`32.0 GT/s PCIe`); None where sysfs has none (virtual functions, some VMs)."""
    pcie_width_max: int | None = None
    """From `max_link_width`."""


@frozen
class SysfsFacts:
    """What sysfs says about the machine's layout."""

    numa_nodes: tuple[NumaNode, ...] = ()
    gpus: tuple[PciDevice, ...] = ()
    """NVIDIA display-class PCI functions, in PCI bus id order (= NVML index order)."""
    nics: tuple[Nic, ...] = ()
    iommu_enabled: bool | None = None
    iommu_mode: str | None = None
    gpudirect_rdma: bool | None = None
    gaps: tuple[Gap, ...] = ()


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's `00000000:18:00.0` (or any case / domain width) as sysfs spells it: `0000:18:00.0`."""
    domain, _, rest = bus_id.strip().partition(":")
    if not re.fullmatch(r"[0-9A-Fa-f]{1,16}", domain):
        return bus_id.strip().lower()  # not a bus id: it matches no sysfs device, and its GPU keeps NVML's facts
    return f"{int(domain, 16):04x}:{rest.lower()}"


def nvml_bus_id(bus_id: str) -> str:
    """A sysfs bus id (`0000:1a:00.0`) in NVML's form: `00000000:1A:00.0`."""
    domain, _, rest = bus_id.strip().partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


class SysfsReader:
    """Reads one sysfs tree below `root`, collecting gaps for what it could not read."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self.sys = self.root / "sys"
        self.gaps: list[Gap] = []

    def _read(self, path: Path, quiet: bool = False) -> str | None:
        try:
            return path.read_text(errors="replace").strip()
        except OSError as exc:
            if not quiet:
                self.gaps.append(Gap(f"sysfs {self._show(path)}", exc.strerror or type(exc).__name__))
            return None

    def _show(self, path: Path) -> str:
        try:
            return "/" + str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def _int(self, path: Path, base: int = 10, quiet: bool = False) -> int | None:
        text = self._read(path, quiet)
        if text is None:
            return None
        try:
            return int(text, base)
        except ValueError:
            self.gaps.append(Gap(f"sysfs {self._show(path)}", f"not a number: {text[:40]!r}"))
            return None

    def numa_nodes(self) -> tuple[NumaNode, ...]:
        """NUMA nodes with CPU list, memory and distance row (`numactl -H`)."""
        base = self.sys / "devices" / "system" / "node"
        try:
            names = os.listdir(base)
        except OSError as exc:
            self.gaps.append(Gap(f"sysfs {self._show(base)}", exc.strerror or "unreadable"))
            return ()
        ids = sorted(int(m.group(1)) for m in map(_NODE_DIR.match, names) if m)
        nodes = []
        for node_id in ids:
            node_dir = base / f"node{node_id}"
            cpus = self._read(node_dir / "cpulist") or ""
            distance_text = self._read(node_dir / "distance") or ""
            try:
                distances = tuple(int(word) for word in distance_text.split())
            except ValueError:
                self.gaps.append(Gap(f"sysfs {self._show(node_dir / 'distance')}", "not a list of numbers"))
                distances = ()
            nodes.append(NumaNode(node_id, cpus, self._node_memory_bytes(node_dir / "meminfo"), distances))
        return tuple(nodes)

    def _node_memory_bytes(self, path: Path) -> int | None:
        text = self._read(path)
        if text is None:
            return None
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 4 and words[2] == "MemTotal:" and words[3].isdigit():
                return int(words[3]) * 1024
        self.gaps.append(Gap(f"sysfs {self._show(path)}", "no MemTotal line"))
        return None

    def _device_at(self, device_dir: Path) -> PciDevice | None:
        elements = self._pci_elements(device_dir)
        if not elements or not _BDF.match(elements[-1]):
            return None
        numa = self._int(device_dir / "numa_node", quiet=True)
        return PciDevice(
            bus_id=elements[-1],
            pci_path=tuple(elements[:-1]),
            numa_node=numa if numa is not None and numa >= 0 else None,
            vendor_id=self._int(device_dir / "vendor", 16, quiet=True),
            class_code=self._int(device_dir / "class", 16, quiet=True),
            pcie_gen_max=pcie_gen_of(link_gts_of(self._read(device_dir / "max_link_speed", quiet=True))),
            pcie_width_max=self._int(device_dir / "max_link_width", quiet=True) or None,
        )

    def _pci_elements(self, resolved: Path) -> list[str]:
        """Host bridge and bus ids from `/sys/devices/...` down to the last PCI function in `resolved`."""
        try:
            relative = resolved.relative_to(Path(os.path.realpath(self.sys / "devices")))
        except ValueError:
            return []
        elements = [part for part in relative.parts if _HOST_BRIDGE.match(part) or _BDF.match(part)]
        while elements and not _BDF.match(elements[-1]):
            elements.pop()
        return elements

    def gpus(self) -> tuple[PciDevice, ...]:
        """NVIDIA display-class functions (the GPUs), in bus id order."""
        base = self.sys / "bus" / "pci" / "devices"
        try:
            names = sorted(os.listdir(base))
        except OSError as exc:
            self.gaps.append(Gap(f"sysfs {self._show(base)}", exc.strerror or "unreadable"))
            return ()
        found = []
        for name in names:
            vendor = self._int(base / name / "vendor", 16, quiet=True)
            if vendor != NVIDIA_VENDOR_ID:
                continue
            code = self._int(base / name / "class", 16, quiet=True)
            if code is None or code >> 16 != DISPLAY_CLASS:
                continue
            device = self._device_at(Path(os.path.realpath(base / name)))
            if device is not None:
                found.append(device)
        return tuple(found)

    def nics(self) -> tuple[Nic, ...]:
        """RDMA devices (`/sys/class/infiniband`, first port) and the other PCI netdevs (`/sys/class/net`)."""
        nics: list[Nic] = []
        covered_netdevs: set[str] = set()
        ib_base = self.sys / "class" / "infiniband"
        for name in _listdir(ib_base):
            nic = self._rdma_nic(ib_base / name, name)
            nics.append(nic)
            if nic.netdev:
                covered_netdevs.add(nic.netdev)
        net_base = self.sys / "class" / "net"
        for name in _listdir(net_base):
            if name in covered_netdevs or not (net_base / name / "device").exists():
                continue
            plain = self._net_nic(net_base / name, name)
            if plain is not None:
                nics.append(plain)
        return tuple(nics)

    def _rdma_nic(self, device_dir: Path, name: str) -> Nic:
        pci = self._device_at(Path(os.path.realpath(device_dir / "device")))
        ports = sorted(_listdir(device_dir / "ports"), key=lambda p: int(p) if p.isdigit() else 0)
        state = rate = layer = None
        if ports:
            port_dir = device_dir / "ports" / ports[0]
            state_text = self._read(port_dir / "state")
            state = state_text.split(":", 1)[-1].strip() if state_text else None
            rate_text = self._read(port_dir / "rate")
            match = _RATE.match(rate_text or "")
            rate = float(match.group(1)) if match else None
            layer = self._read(port_dir / "link_layer")
        netdevs = _listdir(device_dir / "device" / "net")
        return Nic(
            name=name,
            netdev=netdevs[0] if netdevs else None,
            pci_bus_id=pci.bus_id if pci else None,
            numa_node=pci.numa_node if pci else None,
            link_layer=layer,
            rate_gbit_per_s=rate,
            state=state,
            pci_path=pci.pci_path if pci else (),
            pcie_gen_max=pci.pcie_gen_max if pci else None,
            pcie_width_max=pci.pcie_width_max if pci else None,
        )

    def _net_nic(self, net_dir: Path, name: str) -> Nic | None:
        pci = self._device_at(Path(os.path.realpath(net_dir / "device")))
        if pci is None:
            return None
        speed_mbps = self._int(net_dir / "speed", quiet=True)
        operstate = self._read(net_dir / "operstate", quiet=True)
        state = OPERSTATE_WORDS.get(operstate, operstate.upper()) if operstate else None
        return Nic(
            name=name,
            netdev=name,
            pci_bus_id=pci.bus_id,
            numa_node=pci.numa_node,
            link_layer="Ethernet",
            rate_gbit_per_s=speed_mbps / 1000 if speed_mbps is not None and speed_mbps > 0 else None,
            state=state,
            pci_path=pci.pci_path,
            pcie_gen_max=pci.pcie_gen_max,
            pcie_width_max=pci.pcie_width_max,
        )

    def iommu_enabled(self) -> bool | None:
        """True when an IOMMU is active (devices in `/sys/kernel/iommu_groups` or `/sys/class/iommu`)."""
        groups = self.sys / "kernel" / "iommu_groups"
        units = self.sys / "class" / "iommu"
        if _listdir(groups) or _listdir(units):
            return True
        return False if groups.is_dir() or units.is_dir() else None

    def iommu_mode(self) -> str | None:
        """The default-domain type of the IOMMU groups (`identity` = passthrough, `DMA`, `DMA-FQ`); the
        most common one when groups differ, None without groups."""
        groups = self.sys / "kernel" / "iommu_groups"
        counts: dict[str, int] = {}
        for name in _listdir(groups):
            kind = self._read(groups / name / "type", quiet=True)
            if kind:
                counts[kind] = counts.get(kind, 0) + 1
        return max(counts, key=lambda kind: counts[kind]) if counts else None

    def gpudirect_rdma(self) -> bool | None:
        """True when `nvidia_peermem` (or the older `nv_peer_mem`) is loaded; None when /sys/module is absent."""
        modules = self.sys / "module"
        if not modules.is_dir():
            return None
        return (modules / "nvidia_peermem").exists() or (modules / "nv_peer_mem").exists()

    def read_all(self) -> SysfsFacts:
        """Everything above in one pass."""
        return SysfsFacts(
            numa_nodes=self.numa_nodes(),
            gpus=self.gpus(),
            nics=self.nics(),
            iommu_enabled=self.iommu_enabled(),
            iommu_mode=self.iommu_mode(),
            gpudirect_rdma=self.gpudirect_rdma(),
            gaps=tuple(self.gaps),
        )


def _natural_key(name: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _listdir(path: Path) -> list[str]:
    """Entries of `path` in natural order (`mlx5_2` before `mlx5_10`, as nvidia-smi lists NICs); [] if unreadable."""
    try:
        return sorted(os.listdir(path), key=_natural_key)
    except OSError:
        return []


def read_sysfs(root: str | os.PathLike[str] = "/") -> SysfsFacts:
    """Read NUMA, GPUs' PCI functions, NICs, IOMMU and peer-memory module state below `root`."""
    return SysfsReader(root).read_all()
