"""The driver's own view of the GPUs, read from what `nvidia-smi` prints, for the verification kit.

These readers are deliberately small and separate from linkscope's: they are the reference the
probe is checked against, so they must not share its code. They read only what the kit compares
(bus id, UUID, name, PCIe generation and width, memory, NUMA node, NVLink state, the topology
matrix) and give None for anything the text does not state.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field


@dataclass
class DriverGpu:
    """One GPU as `nvidia-smi -q -x` reports it."""

    bus_id: str | None = None
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    """`max_link_gen`: the most the link can run at (device and host together)."""
    pcie_gen_device_max: int | None = None
    pcie_gen_host_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    numa_node: int | None = None
    """`numa_node_id` where the driver prints one (recent drivers); else None."""


@dataclass
class DriverView:
    """The parts of `nvidia-smi -q -x` the kit compares."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[DriverGpu] = field(default_factory=list)


def _number(text: str | None) -> int | None:
    """The leading integer of a value such as `16x`, `143771 MiB` or `5`; None for N/A and blanks."""
    if text is None:
        return None
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else None


def _text(element: ElementTree.Element | None, path: str) -> str | None:
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "Not Supported", "[N/A]") else value


def parse_query_xml(text: str) -> DriverView:
    """`nvidia-smi -q -x` output (the local driver's own XML, not an untrusted file)."""
    root = ElementTree.fromstring(text)
    view = DriverView(driver_version=_text(root, "driver_version"), cuda_version=_text(root, "cuda_version"))
    for gpu in root.findall("gpu"):
        link = gpu.find("pci/pci_gpu_link_info")
        view.gpus.append(DriverGpu(
            bus_id=_text(gpu, "pci/pci_bus_id") or gpu.get("id"),
            uuid=_text(gpu, "uuid"),
            name=_text(gpu, "product_name"),
            memory_total_mib=_number(_text(gpu, "fb_memory_usage/total")),
            pcie_gen_current=_number(_text(link, "pcie_gen/current_link_gen")),
            pcie_gen_max=_number(_text(link, "pcie_gen/max_link_gen")),
            pcie_gen_device_max=_number(_text(link, "pcie_gen/max_device_link_gen")),
            pcie_gen_host_max=_number(_text(link, "pcie_gen/max_host_link_gen")),
            pcie_width_current=_number(_text(link, "link_widths/current_link_width")),
            pcie_width_max=_number(_text(link, "link_widths/max_link_width")),
            numa_node=_number(_text(gpu, "numa_node_id")),
        ))
    return view


_LINK_LINE = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*)$")
_GPU_LINE = re.compile(r"^GPU\s+(\d+)\s*:")


def parse_nvlink_status(text: str) -> dict[int, dict[int, bool]]:
    """`nvidia-smi nvlink -s`: per GPU index, link number -> active (a speed printed) or not (`<inactive>`)."""
    found: dict[int, dict[int, bool]] = {}
    current: int | None = None
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            current = int(gpu.group(1))
            found.setdefault(current, {})
            continue
        link = _LINK_LINE.match(line)
        if link and current is not None:
            found[current][int(link.group(1))] = bool(re.search(r"\d+(\.\d+)?\s*GB/s", link.group(2)))
    return found


@dataclass
class DriverMatrix:
    """`nvidia-smi topo -m`: column labels, each row's tokens by column, and the NIC legend."""

    columns: list[str] = field(default_factory=list)
    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)
    """`NIC0` -> `mlx5_0` from the legend under the matrix."""
    numa_affinity: dict[str, str] = field(default_factory=dict)
    """Row label -> its `NUMA Affinity` cell."""


_DEVICE_LABEL = re.compile(r"^(GPU\d+|NIC\d+|mlx\S+)$")


def parse_topo_matrix(text: str) -> DriverMatrix:
    """The matrix printed by `nvidia-smi topo -m` on this machine (tab-separated, one header line)."""
    matrix = DriverMatrix()
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    header_at = next((number for number, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_at is None:
        return matrix
    header = [cell.strip() for cell in lines[header_at].split("\t") if cell.strip()]
    matrix.columns = [cell for cell in header if _DEVICE_LABEL.match(cell)]
    numa_column = header.index("NUMA Affinity") if "NUMA Affinity" in header else None
    for line in lines[header_at + 1:]:
        cells = [cell.strip() for cell in line.split("\t")]
        if not cells or not _DEVICE_LABEL.match(cells[0]):
            if line.strip().startswith("Legend"):
                break
            continue
        label, values = cells[0], [cell for cell in cells[1:] if cell != ""]
        matrix.rows[label] = dict(zip(matrix.columns, values, strict=False))
        if numa_column is not None and len(values) > numa_column:
            matrix.numa_affinity[label] = values[numa_column]
    for line in lines:
        legend = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if legend:
            matrix.nic_names[legend.group(1)] = legend.group(2)
    return matrix
