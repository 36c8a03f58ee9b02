"""What each link class should deliver: spec and typically measured bandwidth per direction.

Figures from ../shared/DOMAIN.md (NVIDIA datasheets, nvbandwidth and nccl-tests results).
All bandwidths are GB/s = 1e9 bytes/s, per direction. The cost model (:mod:`topo.cost`)
builds on these; `linkscope show` prints them next to the matrix.
"""

from __future__ import annotations

from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import PCIE_KINDS_NEAR_TO_FAR, Gpu, Host, Link, LinkKind, Nic, parse_link_token

NVLINK_GBPS_PER_LINK: dict[int, float] = {2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
"""Spec bandwidth of one NVLink per direction, by generation (V100 6x25=150, A100 12x25=300,
H100 18x25=450, B200 18x50=900 GB/s)."""

NVLINK_TYPICAL_FRACTION = 0.87
"""Measured copy-engine peer copies reach ~87% of NVLink line rate (H100: ~390 of 450 GB/s)."""

PCIE_X16_GBPS: dict[int, float] = {1: 4.0, 2: 8.0, 3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
"""Spec bandwidth of a PCIe x16 link per direction, by generation."""

PCIE_TYPICAL_FRACTION = 0.82
"""Measured x16 copies reach ~80-85% of spec (Gen4 ~25-26 of 31.5 GB/s, Gen5 ~55 of 63)."""

PCIE_PATH_FACTOR: dict[LinkKind, float] = {
    LinkKind.PIX: 1.0,
    LinkKind.PXB: 1.0,
    LinkKind.PHB: 0.9,
    LinkKind.NODE: 0.8,
    LinkKind.SYS: 0.6,
}
"""Rough share of the PCIe rate a GPU pair gets per path class (an estimate of this tool,
not a vendor figure): paths through the CPU and across sockets lose bandwidth, and P2P is
often unsupported there, so copies bounce through host memory."""

NETWORK_TYPICAL_FRACTION = 0.93
"""NCCL reaches ~46-48 GB/s on a 400 Gb/s (50 GB/s) NDR port."""


DEGRADED_FRACTION = 0.75
"""A measured bandwidth below this share of a link's typical figure marks the link as degraded."""

LINK_CLASS: dict[LinkKind, str] = {
    LinkKind.SELF: "self",
    LinkKind.NVLINK: "nvlink",
    LinkKind.PIX: "switch",
    LinkKind.PXB: "switch",
    LinkKind.PHB: "host",
    LinkKind.NODE: "host",
    LinkKind.SYS: "sys",
}
"""The class each link kind is shown (coloured) as: NVLink, behind PCIe switches, through the CPU,
across sockets. The console and the app both draw by these names."""


@frozen
class LinkSpeed:
    """Expected bandwidth of one link, per direction."""

    spec_gbps: float
    typical_gbps: float
    basis: str
    """How the figure was derived, for people reading the output."""


_NAME_TO_NVLINK_GEN = (
    ("B200", 5), ("GB200", 5), ("B100", 5), ("H100", 4), ("H200", 4), ("H800", 4), ("GH200", 4),
    ("A100", 3), ("A800", 3), ("V100", 2),
)  # fmt: skip
_NAME_TO_PCIE_GEN = (
    ("B200", 5), ("RTX 50", 5), ("5090", 5), ("H100", 5), ("H200", 5), ("H800", 5), ("GH200", 5), ("L40", 4),
    ("A100", 4), ("A800", 4), ("A10", 4), ("A40", 4), ("RTX 40", 4), ("RTX 30", 4),
    ("4090", 4), ("3090", 4), ("V100", 3), ("2080", 3), ("T4", 3),
)  # fmt: skip


def nvlink_generation(gpu: Gpu | None, link_count: int) -> int:
    """NVLink generation of a GPU: from the probe, else its name, else the bonded link count."""
    if gpu is not None:
        if gpu.nvlink_gen is not None:
            return gpu.nvlink_gen
        for marker, generation in _NAME_TO_NVLINK_GEN:
            if marker in gpu.name:
                return generation
    if link_count >= 18:
        return 4
    if link_count >= 8:
        return 3
    return 2


_NVLINK_TO_PCIE_GEN = {2: 3, 3: 4, 4: 5, 5: 5}
"""The PCIe generation of the GPUs of each NVLink generation: V100 and RTX 20 (NVLink2) are Gen3, A100 and
RTX 30 (NVLink3) Gen4, H100/H200 (NVLink4) and B200 (NVLink5) Gen5."""


def pcie_generation(gpu: Gpu | None, nvlink_gen: int | None = None) -> int:
    """PCIe generation of a GPU's link: the probed maximum, else from its name, else from the generation of its
    NVLinks (`nvlink_gen`: a topology text names neither), else Gen4."""
    if gpu is not None:
        if gpu.pcie_gen_max is not None:
            return gpu.pcie_gen_max
        for marker, generation in _NAME_TO_PCIE_GEN:
            if marker in gpu.name:
                return generation
    return _NVLINK_TO_PCIE_GEN.get(nvlink_gen, 4) if nvlink_gen is not None else 4


def gpu_nvlink_generation(host: Host, position: int) -> int | None:
    """The NVLink generation of the GPU at `position`, from its NVLink links on `host` (None: it has none)."""
    gpu = host.gpus[position] if position < len(host.gpus) else None
    generations = [link.nvlink_gen or nvlink_generation(gpu, link.nvlink_count) for link in host.links
                   if link.kind is LinkKind.NVLINK and position in (link.a, link.b)]
    return max(generations) if generations else None


def gpu_pcie_speed(host: Host, position: int) -> LinkSpeed:
    """The PCIe link of the GPU at `position` on `host` (its NVLinks say its generation when nothing else does)."""
    gpu = host.gpus[position] if position < len(host.gpus) else None
    return pcie_speed(gpu, gpu_nvlink_generation(host, position))


def pcie_speed(gpu: Gpu | None, nvlink_gen: int | None = None) -> LinkSpeed:
    """Bandwidth of one GPU's own PCIe link, at its current width (or x16)."""
    generation = pcie_generation(gpu, nvlink_gen)
    width = 16
    if gpu is not None and gpu.pcie_width_current is not None:
        width = gpu.pcie_width_current
    spec = PCIE_X16_GBPS.get(generation, PCIE_X16_GBPS[4]) * width / 16
    return LinkSpeed(spec, spec * PCIE_TYPICAL_FRACTION, f"PCIe Gen{generation} x{width}")


def nic_pcie_speed(nic: Nic) -> LinkSpeed | None:
    """Bandwidth of a NIC's own PCIe link at its maximum generation and width (sysfs `max_link_speed` /
    `max_link_width`, NCCL's `link_speed` / `link_width`); None when the snapshot did not read its generation
    (x16 assumed when only the width is missing)."""
    if nic.pcie_gen_max is None:
        return None
    width = nic.pcie_width_max or 16
    spec = PCIE_X16_GBPS.get(nic.pcie_gen_max, PCIE_X16_GBPS[4]) * width / 16
    return LinkSpeed(spec, spec * PCIE_TYPICAL_FRACTION, f"PCIe Gen{nic.pcie_gen_max} x{width}")


def link_speed(host: Host, link: Link) -> LinkSpeed:
    """Expected bandwidth between the two GPUs of `link` on `host`."""
    gpu_a = host.gpus[link.a] if link.a < len(host.gpus) else None
    if link.kind is LinkKind.NVLINK:
        generation = link.nvlink_gen or nvlink_generation(gpu_a, link.nvlink_count)
        spec = NVLINK_GBPS_PER_LINK.get(generation, 25.0) * link.nvlink_count
        return LinkSpeed(spec, spec * NVLINK_TYPICAL_FRACTION, f"{link.nvlink_count} x NVLink{generation}")
    if link.kind is LinkKind.SELF:
        return LinkSpeed(0.0, 0.0, "self")
    slower = min((gpu_pcie_speed(host, link.a), gpu_pcie_speed(host, link.b)), key=lambda speed: speed.spec_gbps)
    factor = PCIE_PATH_FACTOR[link.kind]
    return LinkSpeed(slower.spec_gbps * factor, slower.typical_gbps * factor, f"{slower.basis} via {link.kind.value}")


def network_speed(rate_gbit_per_s: float) -> LinkSpeed:
    """Expected bandwidth of a NIC port of the given line rate (Gb/s)."""
    spec = rate_gbit_per_s / 8
    return LinkSpeed(spec, spec * NETWORK_TYPICAL_FRACTION, f"{rate_gbit_per_s:g} Gb/s NIC")


def nvlink_pair_count(
    gpu_a: Gpu,
    gpu_b: Gpu,
    switch_links: tuple[int | None, int | None] = (None, None),
    p2p_nvlink: str | None = None,
) -> int:
    """Bonded NVLinks between two GPUs, from their active ports (what nvidia-smi shows as `NV<n>`).

    Links to another GPU count when their remote is that GPU. Through NVSwitches a remote bus id
    names no GPU (drivers answer the sentinel FFFFFFFF:FF:FF.0), so every pair of switch-attached
    GPUs gets the smaller of the two GPUs' switch link counts: `switch_links` as NVML counts them
    (NVSWITCH_CONNECTED_LINK_COUNT), else their active switch ports; none when the pair's P2P NVLink
    status (`p2p_nvlink`, a `topo -p2p` token) says they cannot reach each other over NVLink.
    """
    direct = sum(
        1 for port in gpu_a.nvlinks
        if port.active and port.remote_type == "gpu" and port.remote_pci_bus_id is not None
        and port.remote_pci_bus_id == gpu_b.pci_bus_id
    )
    counts = []
    for gpu, counted in zip((gpu_a, gpu_b), switch_links, strict=True):
        ports = sum(1 for port in gpu.nvlinks if port.active and port.remote_type == "switch")
        counts.append(counted if counted is not None else ports)
    switched = min(counts) if p2p_nvlink in (None, "OK") else 0
    return direct + switched


def nearest_nics(host: Host, position: int) -> tuple[tuple[str, ...], str | None]:
    """The NIC(s) on the closest PCIe path from GPU `position`, and that path's legend token."""
    if position >= len(host.gpu_nic) or not host.nics:
        return (), None
    row = host.gpu_nic[position]
    ranked: dict[str, int] = {kind.value: rank for rank, kind in enumerate(PCIE_KINDS_NEAR_TO_FAR)}
    best: int | None = None
    for token in row:
        try:
            kind, _ = parse_link_token(token)
        except ValueError:
            continue
        rank = ranked.get(kind.value)
        if rank is not None and (best is None or rank < best):
            best = rank
    if best is None:
        return (), None
    token = PCIE_KINDS_NEAR_TO_FAR[best].value
    names = tuple(nic.name for nic, cell in zip(host.nics, row, strict=False) if cell == token)
    return names, token
