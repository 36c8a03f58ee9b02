"""Write a sysfs tree for a Host below a directory, laid out the way Linux lays it out.

`build_sysfs(tmp_path, load_sample("dgx-h100").host)` creates
`sys/devices/pci0000:15/0000:15:01.0/.../0000:1b:00.0` (with `vendor`, `class`, `numa_node`),
`sys/bus/pci/devices/*` symlinks, `sys/devices/system/node/nodeN/{cpulist,meminfo,distance}`,
`sys/class/infiniband/mlx5_N` (ports/1/{state,rate,link_layer}, `device` link),
`sys/class/net/<netdev>` (speed, operstate, `device` link), IOMMU groups and `sys/module`.
A NIC whose name differs from its netdev is an RDMA device; one named like its netdev is plain Ethernet.
"""

from __future__ import annotations

import os
from pathlib import Path

from linkscope.topo.model.host import Host

NVIDIA_VENDOR = "0x10de"
MELLANOX_VENDOR = "0x15b3"
GPU_CLASS = "0x030200"
"""3D controller (what data-centre GPUs report; consumer cards say 0x030000)."""
BRIDGE_CLASS = "0x060400"
IB_CLASS = "0x020700"
ETHERNET_CLASS = "0x020000"


def _sysfs_bus_id(bus_id: str) -> str:
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(target, link.parent))


class FakeSysfs:
    """Builder of one fake tree; `root` is what the probe gets as `sysfs_root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sys = root / "sys"

    def pci_function(self, path: tuple[str, ...], bus_id: str, vendor: str, class_code: str, numa: int | None) -> Path:
        """Create the device directory at `path` + `bus_id` (and its bridges), with its bus symlink."""
        directory = self.sys / "devices"
        for element in path:
            directory = directory / element
            if not element.startswith("pci"):
                self._attributes(directory, "0x8086", BRIDGE_CLASS, numa)
                _link(self.sys / "bus" / "pci" / "devices" / element, directory)
            else:
                directory.mkdir(parents=True, exist_ok=True)
        if not path:
            directory = directory / "pci0000:00"
        directory = directory / bus_id
        self._attributes(directory, vendor, class_code, numa)
        _link(self.sys / "bus" / "pci" / "devices" / bus_id, directory)
        return directory

    def _attributes(self, directory: Path, vendor: str, class_code: str, numa: int | None) -> None:
        if (directory / "vendor").exists():
            return
        _write(directory / "vendor", vendor)
        _write(directory / "class", class_code)
        _write(directory / "numa_node", str(numa if numa is not None else -1))

    def numa_node(self, node_id: int, cpus: str, memory_bytes: int | None, distances: tuple[int, ...]) -> None:
        """One `nodeN` directory."""
        directory = self.sys / "devices" / "system" / "node" / f"node{node_id}"
        _write(directory / "cpulist", cpus)
        kib = (memory_bytes or 0) // 1024
        _write(directory / "meminfo", f"Node {node_id} MemTotal:       {kib} kB\nNode {node_id} MemFree:        {kib // 2} kB")
        _write(directory / "distance", " ".join(map(str, distances)))

    def netdev(self, device_dir: Path, name: str, state: str | None, rate_gbit_per_s: float | None) -> None:
        """`/sys/class/net/<name>` under PCI function `device_dir`."""
        net_dir = device_dir / "net" / name
        _write(net_dir / "operstate", "up" if state == "ACTIVE" else "down")
        _write(net_dir / "speed", str(int(rate_gbit_per_s * 1000)) if rate_gbit_per_s is not None else "-1")
        _link(net_dir / "device", device_dir)
        _link(self.sys / "class" / "net" / name, net_dir)

    def rdma(self, device_dir: Path, name: str, state: str | None, rate: float | None, layer: str | None) -> None:
        """`/sys/class/infiniband/<name>` with port 1."""
        ib_dir = device_dir / "infiniband" / name
        port = ib_dir / "ports" / "1"
        state_codes = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
        if state is not None:
            _write(port / "state", f"{state_codes.get(state, 0)}: {state}")
        if rate is not None:
            _write(port / "rate", f"{rate:g} Gb/sec (4X)")
        if layer is not None:
            _write(port / "link_layer", layer)
        _link(ib_dir / "device", device_dir)
        _link(self.sys / "class" / "infiniband" / name, ib_dir)


GEN_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe",
             6: "64.0 GT/s PCIe"}
"""`max_link_speed` as Linux 5.7+ writes it, by PCIe generation."""


def build_sysfs(root: Path, host: Host) -> Path:
    """Write the sysfs tree of `host` below `root` and return `root`."""
    tree = FakeSysfs(root)
    for node in host.numa_nodes:
        tree.numa_node(node.id, node.cpus, node.memory_bytes, node.distances)
    for gpu in host.gpus:
        if gpu.pci_bus_id:
            tree.pci_function(gpu.pci_path, _sysfs_bus_id(gpu.pci_bus_id), NVIDIA_VENDOR, GPU_CLASS, gpu.numa_node)
    for nic in host.nics:
        if nic.pci_bus_id is None:
            continue
        rdma = nic.name != nic.netdev
        class_code = IB_CLASS if nic.link_layer == "InfiniBand" else ETHERNET_CLASS
        device_dir = tree.pci_function(nic.pci_path, nic.pci_bus_id, MELLANOX_VENDOR, class_code, nic.numa_node)
        if nic.pcie_gen_max is not None:
            _write(device_dir / "max_link_speed", f"{GEN_SPEED[nic.pcie_gen_max]}\n")
        if nic.pcie_width_max is not None:
            _write(device_dir / "max_link_width", f"{nic.pcie_width_max}\n")
        if rdma:
            tree.rdma(device_dir, nic.name, nic.state, nic.rate_gbit_per_s, nic.link_layer)
        if nic.netdev:
            tree.netdev(device_dir, nic.netdev, nic.state, None if rdma else nic.rate_gbit_per_s)
    caps = host.capabilities
    if caps.iommu_enabled is not None:
        groups = tree.sys / "kernel" / "iommu_groups"
        groups.mkdir(parents=True, exist_ok=True)
        if caps.iommu_enabled:
            (groups / "0" / "devices").mkdir(parents=True, exist_ok=True)
            if caps.iommu_mode:
                _write(groups / "0" / "type", caps.iommu_mode)
    if caps.gpudirect_rdma is not None:
        modules = tree.sys / "module"
        (modules / "nvidia").mkdir(parents=True, exist_ok=True)
        if caps.gpudirect_rdma:
            (modules / "nvidia_peermem").mkdir(parents=True, exist_ok=True)
    return root
