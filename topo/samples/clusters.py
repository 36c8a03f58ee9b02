"""Builders of the multi-host samples: a GB200 NVL72 rack and a small H100 cluster with odd nodes.

Kept apart from :mod:`topo.samples.build` (which registers them) because a cluster is assembled
from per-host builders: the NVL72 compute tray here, the DGX H100 there.
"""

from __future__ import annotations

import dataclasses
import hashlib

from linkscope.topo.model.host import Capabilities, Gpu, Host, Nic
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples.parts import (
    GIB,
    GpuModel,
    assemble_host,
    cpulist,
    make_gpu,
    make_nic,
    numa_nodes,
    nvswitch_ports,
    p2p_within_socket,
    root_port,
    versions,
)

GB200 = GpuModel("NVIDIA GB200", 192 * GIB, "10.0", 5, 5)
"""B200 GPU of a Grace-Blackwell superchip as NVML names it (memory as the public GB200 NVML profile reports)."""

NVL72_TRAYS = 18
NVL72_SWITCH_CHIPS = 18
"""Nine NVLink switch trays of two NVSwitch chips: each GPU has one NVLink5 link to every chip."""

GB200_NVL72_SOURCES = (
    "NVIDIA GB200 NVL72 product page and datasheet (72 Blackwell GPUs and 36 Grace CPUs in one NVLink domain, "
    "fifth-generation NVLink 1.8 TB/s per GPU, 18 compute trays of 2 superchips, 9 NVLink switch trays)",
    "NVIDIA Grace CPU datasheet (72 Arm Neoverse V2 cores, up to 480 GB LPDDR5X per CPU)",
    "NVIDIA/k8s-test-infra mocknvml GB200 profile (4 GPUs per compute tray as one OS sees them, 2 Grace NUMA nodes, "
    "name `NVIDIA GB200`, compute capability 10.0, NVLink version 5 with 18 links per GPU, fabric cluster UUID and "
    "clique id, driver 580.65.06 / CUDA 13.0)",
    "NVML API reference (nvmlDeviceGetGpuFabricInfoV: clusterUuid and cliqueId; GPUs with the same pair are one "
    "NVLink domain)",
)


def _cluster_uuid(name: str) -> str:
    digest = hashlib.sha256(f"linkscope-sample:{name}:fabric".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def gb200_tray(sample: str, hostname: str, cluster_uuid: str, clique_id: int) -> Host:
    """One GB200 NVL72 compute tray: 2 Grace CPUs (one NUMA node each), 4 GPUs on the rack's NVLink
    switches, one 400 Gb/s InfiniBand NIC per GPU on the Grace of its superchip."""
    nodes = numa_nodes([cpulist((0, 71)), cpulist((72, 143))], 480 * 10**9, (0, 1), 10, 40)
    switch_bus_ids = [f"00000000:{0xE0 + chip:02X}:00.0" for chip in range(NVL72_SWITCH_CHIPS)]
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for superchip, (gpu_bridge, nic_bridge) in enumerate(((0x00, 0x10), (0x40, 0x50))):
        numa = nodes[superchip]
        for side, bus in enumerate((gpu_bridge + 0x0A, gpu_bridge + 0x0B)):
            index = 2 * superchip + side
            ports = nvswitch_ports(5, (1,) * NVL72_SWITCH_CHIPS, switch_bus_ids)
            gpu = make_gpu(f"{sample}/{hostname}", index, GB200, root_port(gpu_bridge, side + 1, bus), numa, ports)
            gpus.append(dataclasses.replace(gpu, fabric_cluster_uuid=cluster_uuid, fabric_clique_id=clique_id))
        for side in (0, 1):
            slot = root_port(nic_bridge, side + 1, nic_bridge + 1 + side)
            nics.append(make_nic(f"mlx5_{2 * superchip + side}", slot, numa.id, "InfiniBand", 400.0))
    return assemble_host(hostname, gpus, nics, nodes, versions("580.65.06", "13.0"),
                         Capabilities(iommu_enabled=False, gpudirect_rdma=True, nvlink_fabric="Completed"),
                         p2p_within_socket)


def gb200_nvl72() -> Snapshot:
    """A GB200 NVL72 rack: 18 compute trays of 4 GPUs, all 72 GPUs in one NVLink clique."""
    name = "gb200-nvl72"
    uuid = _cluster_uuid(name)
    hosts = tuple(gb200_tray(name, f"nvl72-tray{tray:02d}", uuid, 0) for tray in range(1, NVL72_TRAYS + 1))
    description = ("GB200 NVL72 rack: 18 compute trays x 4 GB200 GPUs (NV18 inside a tray), all 72 GPUs one NVLink5 "
                   "domain through 18 NVSwitch chips (fabric cluster UUID + clique 0), 2 Grace CPUs and "
                   "4x 400 Gb/s InfiniBand per tray")
    return Snapshot(hosts=hosts, source=f"sample:{name}",
                    meta=(("description", description), ("sources", "; ".join(GB200_NVL72_SOURCES))))


def _without_nic(host: Host, name: str) -> Host:
    """`host` with NIC `name` gone (its column removed from the GPU x NIC matrix)."""
    column = next(index for index, nic in enumerate(host.nics) if nic.name == name)
    nics = host.nics[:column] + host.nics[column + 1 :]
    gpu_nic = tuple(row[:column] + row[column + 1 :] for row in host.gpu_nic)
    return dataclasses.replace(host, nics=nics, gpu_nic=gpu_nic)


def h100_cluster_mixed() -> Snapshot:
    """Four DGX H100 nodes, two of them odd: node02's GPU 3 is short of two NVLinks and at PCIe x8,
    node03 lacks the compute NIC mlx5_5 (so GPU 5 sends through a farther NIC)."""
    from linkscope.topo.samples.build import DGX_H100_SOURCES, dgx_h100

    name = "h100-cluster-mixed"
    hosts = []
    for number in range(1, 5):
        hostname = f"node{number:02d}"
        host = dgx_h100(hostname, degraded_gpu=3 if number == 2 else None).host
        if number == 3:
            host = _without_nic(host, "mlx5_5")
        hosts.append(host)
    description = ("4 DGX H100 nodes as sample:dgx-h100, two of them odd: node02's GPU 3 has 16 of 18 NVLinks up "
                   "and PCIe x8, node03 has 7 compute NICs (mlx5_5 missing)")
    return Snapshot(hosts=tuple(hosts), source=f"sample:{name}",
                    meta=(("description", description), ("sources", "; ".join(DGX_H100_SOURCES))))
