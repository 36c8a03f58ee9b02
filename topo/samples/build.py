"""Generator of the built-in sample machines: builds each as model objects and writes its JSON.

The JSON files next to this module are committed data; `python -m linkscope.topo.samples.build` rewrites
them and `python -m linkscope.topo.samples.build --check` fails when they differ from what this module
builds (a test runs the same comparison). The building blocks and the conventions shared with
the probe are in :mod:`topo.samples.parts`. Bus numbers follow the public layout where it is
known (GPU bus ids, interface names); otherwise they are plausible, unique numbers. NVSwitch bus
ids are placeholders.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from linkscope.topo.common.text import say
from linkscope.topo.model.codec import snapshot_to_json
from linkscope.topo.model.host import Capabilities, Gpu, Host, Nic
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import SAMPLE_NAMES, sample_file_name
from linkscope.topo.samples.clusters import gb200_nvl72, h100_cluster_mixed
from linkscope.topo.samples.parts import (
    A100_PCIE,
    A100_SXM,
    B200_SXM,
    GIB,
    H100_SXM,
    L40S,
    RTX_4090,
    V100_SXM2,
    GpuModel,
    Slot,
    assemble_host,
    cpulist,
    direct_nvlink_ports,
    host_bridge_slot,
    make_gpu,
    make_nic,
    numa_nodes,
    nvswitch_ports,
    p2p_never,
    p2p_within_socket,
    root_port,
    snapshot,
    switch,
    two_socket_smt,
    versions,
)

# ---------------------------------------------------------------------------------------------
# The machines

DGX_H100_SOURCES = (
    "NVIDIA DGX H100/H200 User Guide (hardware overview, network ports and NUMA)",
    "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 18 NVLink4 links, 900 GB/s; PCIe Gen5 x16)",
    "NVIDIA Hopper architecture whitepaper (four 3rd-generation NVSwitch chips per HGX H100 8-GPU, 5/4/4/5 links per GPU)",
    "real `nvidia-smi topo -m` of a DGX-style 8x H100 node: tests/fixtures/real/topo/h100-8gpu-nv18-13nic-named-ib-eth.txt",
)


def hgx_nvswitch_host(name: str, model: GpuModel, links_per_switch: Sequence[int], cores_per_socket: int,
                      nic_gbit: float, driver: tuple[str, str], degraded_gpu: int | None = None) -> Host:
    """An 8-GPU NVSwitch baseboard server (DGX/HGX H100, HGX B200): 2 sockets, four PCIe host bridges each
    holding two PCIe switches with one GPU and its own compute NIC (PIX), and two dual-port storage cards.

    With `degraded_gpu`, that GPU has two of its NVLinks down and its PCIe link trained to x8.
    """
    nodes = numa_nodes(two_socket_smt(cores_per_socket), 1024 * GIB, (0, 1), 21, 21)
    switch_bus_ids = [f"00000000:{0xE4 + chip:02X}:00.0" for chip in range(len(links_per_switch))]
    host_bridges = (0x15, 0x37, 0x97, 0xB7)
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for pair, bridge in enumerate(host_bridges):
        numa = nodes[pair // 2]
        upper = switch(root_port(bridge, 1, bridge + 1), (bridge + 3, bridge + 8))
        for side, lower_slot in enumerate(upper):
            index = 2 * pair + side
            gpu_slot, nic_slot = switch(lower_slot, (lower_slot.bus + 3, lower_slot.bus + 2))
            degraded = index == degraded_gpu
            active = sum(links_per_switch) - 2 if degraded else None
            ports = nvswitch_ports(model.nvlink_gen or 4, links_per_switch, switch_bus_ids, active=active)
            gpus.append(make_gpu(name, index, model, gpu_slot, numa, ports, pcie_width_current=8 if degraded else 16))
            nics.append(make_nic(f"mlx5_{index}", nic_slot, numa.id, "InfiniBand", nic_gbit))
    for card, bridge in enumerate((0x57, 0xD7)):
        slot = root_port(bridge, 1, bridge + 1)
        for function in (0, 1):
            nics.append(make_nic(f"mlx5_{8 + 2 * card + function}", slot, nodes[card].id, "Ethernet", 200.0, function, True))
    return assemble_host(
        name,
        gpus,
        nics,
        nodes,
        versions(*driver),
        Capabilities(iommu_enabled=False, gpudirect_rdma=True, nvlink_fabric="Completed"),
        p2p_within_socket,
    )


def dgx_h100(name: str = "dgx-h100", degraded_gpu: int | None = None) -> Snapshot:
    """DGX H100: 8x H100 SXM5 on four NVSwitches, 2x Xeon 8480C, 8x ConnectX-7 NDR + 4 storage ports.

    With `degraded_gpu`, that GPU has 16 of 18 NVLinks up and its PCIe link trained to x8.
    """
    host = hgx_nvswitch_host(name, H100_SXM, (5, 4, 4, 5), 56, 400.0, ("535.129.03", "12.2"), degraded_gpu)
    description = (
        "DGX H100: 8x H100 SXM5 80GB, NV18 to every peer through 4 NVSwitches, 2x Xeon 8480C (56 cores, SMT), "
        "8x ConnectX-7 400 Gb/s InfiniBand (one PIX to each GPU), 2x dual-port 200 GbE storage, PCIe Gen5 x16"
    )
    if degraded_gpu is not None:
        description = (
            f"DGX H100 with a fault: GPU {degraded_gpu} has 16 of 18 NVLinks up (its pairs show NV16) "
            "and its PCIe link trained to x8 of x16; otherwise as sample:dgx-h100"
        )
    return snapshot(name, host, description, DGX_H100_SOURCES)


B200_HGX_SOURCES = (
    "NVIDIA HGX platform page and HGX B200 specification (8x B200 SXM, fifth-generation NVLink at 1.8 TB/s per GPU "
    "through NVLink switch chips on the baseboard, up to 8x 400 Gb/s networking)",
    "NVIDIA DGX B200 datasheet and user guide (8x B200 with 1,440 GB of GPU memory, 2x NVLink switch chips, "
    "2x Xeon Platinum 8570 with 56 cores each, 8x single-port ConnectX-7 400 Gb/s, 2x dual-port BlueField-3)",
    "NVIDIA Blackwell architecture technical brief (NVLink 5: 18 links of 100 GB/s bidirectional per GPU)",
    "real `nvidia-smi topo -m` of an 8x B200 cloud VM with 8 ConnectX NICs, NV18 between every pair: "
    "tests/fixtures/real/topo/b200-8gpu-gcp-a4-vm-8nic-pix-pairs-numa-gpu-numa-id-collapsed-spacing.txt",
)


def b200_hgx() -> Snapshot:
    """HGX B200 as NVIDIA's specification describes it (the DGX B200 layout): 8x B200 SXM on two NVLink switch
    chips (9 links each, NV18 between every pair, 1.8 TB/s per GPU both ways), 2x Xeon 8570, one 400 Gb/s
    ConnectX-7 under each GPU's PCIe switch, and two dual-port storage cards."""
    name = "b200-hgx"
    host = hgx_nvswitch_host(name, B200_SXM, (9, 9), 56, 400.0, ("570.124.06", "12.8"))
    description = (
        "HGX B200: 8x B200 SXM 180GB, NV18 (NVLink 5, 1.8 TB/s per GPU both ways) to every peer through 2 NVLink "
        "switch chips, 2x Xeon 8570 (56 cores, SMT), 8x ConnectX-7 400 Gb/s InfiniBand (one PIX to each GPU), "
        "2x dual-port storage, PCIe Gen5 x16"
    )
    return snapshot(name, host, description, B200_HGX_SOURCES)


def dgx_h100_degraded() -> Snapshot:
    """`dgx-h100` with GPU 3 short of two NVLinks and at PCIe x8."""
    return dgx_h100("dgx-h100-degraded", degraded_gpu=3)


def dgx_a100() -> Snapshot:
    """DGX A100: 8x A100 SXM4 80GB on six NVSwitches, 2x EPYC 7742 in NPS4, 8x ConnectX-6 HDR + storage."""
    name = "dgx-a100"
    cpus = [cpulist((16 * node, 16 * node + 15), (128 + 16 * node, 128 + 16 * node + 15)) for node in range(8)]
    nodes = numa_nodes(cpus, 128 * GIB, (0, 0, 0, 0, 1, 1, 1, 1), 12, 32)
    switch_bus_ids = [f"00000000:{bus:02X}:00.0" for bus in range(0xC4, 0xCA)]
    # (host bridge, NUMA node, GPU buses, NIC buses): GPU bus ids and the NICs' `ibp<bus>s0` names
    # are those of the DGX A100 user guide.
    quadrants = (
        (0x00, 3, (0x07, 0x0F), (0x0C, 0x12)),
        (0x40, 1, (0x47, 0x4E), (0x4B, 0x54)),
        (0x80, 7, (0x87, 0x90), (0x8D, 0x94)),
        (0xB0, 5, (0xB7, 0xBD), (0xBA, 0xCC)),
    )
    nic_names = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9")
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for quadrant, (bridge, node, gpu_buses, nic_buses) in enumerate(quadrants):
        gpu_switch, nic_switch = switch(root_port(bridge, 1, bridge + 1, function=1), (bridge + 3, bridge + 5))
        for side, gpu_slot in enumerate(switch(gpu_switch, gpu_buses)):
            index = 2 * quadrant + side
            gpus.append(make_gpu(name, index, A100_SXM, gpu_slot, nodes[node], nvswitch_ports(3, (2,) * 6, switch_bus_ids)))
        for side, nic_slot in enumerate(switch(nic_switch, nic_buses)):
            nics.append(make_nic(nic_names[2 * quadrant + side], nic_slot, node, "InfiniBand", 200.0))
    storage = root_port(0xE0, 1, 0xE1, function=1)
    nics[4:4] = [make_nic(f"mlx5_{4 + function}", storage, 4, "Ethernet", 200.0, function, True) for function in (0, 1)]
    host = assemble_host(
        name,
        gpus,
        nics,
        nodes,
        versions("525.85.12", "12.0"),
        Capabilities(iommu_enabled=False, gpudirect_rdma=True),
        p2p_within_socket,
    )
    return snapshot(
        name,
        host,
        "DGX A100: 8x A100 SXM4 80GB, NV12 to every peer through 6 NVSwitches, 2x EPYC 7742 in NPS4 (8 NUMA nodes), "
        "2 GPUs + 2 ConnectX-6 200 Gb/s HDR per PCIe switch pair (PXB), dual-port storage NIC, PCIe Gen4",
        (
            "NVIDIA DGX A100 User Guide (network ports ibp12s0..ibp204s0 and enp225s0f0/1, GPU bus ids, NPS4 NUMA affinity)",
            "NVIDIA DGX A100 System Architecture whitepaper (six NVSwitches, 12 NVLink3 links per GPU, 4 PCIe switches)",
            "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB: 600 GB/s NVLink, PCIe Gen4)",
        ),
    )


V100_CUBE_MESH: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}  # fmt: skip
"""NVLinks per GPU pair of the DGX-1 hybrid cube mesh (six links per GPU)."""


def dgx1_v100() -> Snapshot:
    """DGX-1 with V100: hybrid cube mesh of NVLink2, 2x Xeon E5-2698 v4, 4 PLX switches, 4x EDR."""
    name = "dgx1-v100"
    nodes = numa_nodes(two_socket_smt(20), 256 * GIB, (0, 1), 21, 21)
    # (host bridge, root port, switch upstream bus, GPU buses, NIC bus, NIC name)
    switches = (
        (0x00, 0x02, 0x03, (0x06, 0x07), 0x05, "mlx5_0"),
        (0x00, 0x03, 0x08, (0x0A, 0x0B), 0x0C, "mlx5_1"),
        (0x80, 0x02, 0x82, (0x85, 0x86), 0x84, "mlx5_2"),
        (0x80, 0x03, 0x87, (0x89, 0x8A), 0x8B, "mlx5_3"),
    )
    gpu_slots: list[Slot] = []
    nics: list[Nic] = []
    for bridge, port, upstream_bus, gpu_buses, nic_bus, nic_name in switches:
        *slots, nic_slot = switch(root_port(bridge, port, upstream_bus), (*gpu_buses, nic_bus))
        gpu_slots.extend(slots)
        nics.append(make_nic(nic_name, nic_slot, 0 if bridge == 0 else 1, "InfiniBand", 100.0))
    gpus = []
    for index, slot in enumerate(gpu_slots):
        peers = sorted((b if a == index else a, count) for (a, b), count in V100_CUBE_MESH.items() if index in (a, b))
        ports = direct_nvlink_ports(2, [(gpu_slots[peer].nvml_bus_id(), count) for peer, count in peers])
        gpus.append(make_gpu(name, index, V100_SXM2, slot, nodes[index // 4], ports))
    host = assemble_host(
        name,
        gpus,
        nics,
        nodes,
        versions("440.33.01", "10.2"),
        Capabilities(iommu_enabled=False, gpudirect_rdma=True),
        p2p_within_socket,
    )
    return snapshot(
        name,
        host,
        "DGX-1 with V100: 8x V100 SXM2 16GB in the NVLink2 hybrid cube mesh (NV1/NV2, SYS otherwise), "
        "2x Xeon E5-2698 v4, 4 PCIe switches with 2 GPUs + 1 ConnectX-4 100 Gb/s EDR each, PCIe Gen3",
        (
            "NVIDIA DGX-1 System Architecture whitepaper (hybrid cube-mesh NVLink topology, PLX switches, 4x EDR IB)",
            "NVIDIA Tesla V100 datasheet (SXM2: six NVLink2 links, 300 GB/s total)",
            "real `nvidia-smi topo -m` of a DGX-1-style V100 server: "
            "tests/fixtures/real/topo/v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt",
        ),
    )


def pcie_l40s_8() -> Snapshot:
    """A common 2-socket PCIe server: 8x L40S, two GPUs and one NIC per PCIe switch, one switch per root port."""
    name = "pcie-l40s-8"
    nodes = numa_nodes(two_socket_smt(32), 512 * GIB, (0, 1), 21, 21)
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for number, bridge in enumerate((0x15, 0x37, 0x97, 0xB7)):
        numa = nodes[number // 2]
        gpu_a, gpu_b, nic_slot = switch(root_port(bridge, 1, bridge + 1), (bridge + 3, bridge + 4, bridge + 5))
        gpus.extend(make_gpu(name, 2 * number + side, L40S, slot, numa) for side, slot in enumerate((gpu_a, gpu_b)))
        nics.append(make_nic(f"mlx5_{number}", nic_slot, numa.id, "Ethernet", 200.0))
    host = assemble_host(
        name,
        gpus,
        nics,
        nodes,
        versions("550.54.15", "12.4"),
        Capabilities(iommu_enabled=False, gpudirect_rdma=True),
        p2p_within_socket,
    )
    return snapshot(
        name,
        host,
        "2-socket PCIe server: 8x L40S 48GB without NVLink, 2x Xeon 8462Y+ (32 cores, SMT), one PCIe Gen4 switch per "
        "root port with 2 GPUs (PIX) + 1 ConnectX-7 200 GbE; NODE within a socket, SYS across, no P2P across sockets",
        (
            "NVIDIA L40S datasheet (PCIe Gen4 x16, 48 GB GDDR6, no NVLink)",
            "real `nvidia-smi topo -m` of an 8x L40S server (NODE within a socket, SYS across): "
            "tests/fixtures/real/topo/l40s-8gpu-pcie-node-sys-1nic-pass-case.txt",
            "nvidia-smi topo -p2p legend (OK / NS) and NVML nvmlDeviceGetP2PStatus documentation",
        ),
    )


def a100_pcie_nvbridge_4() -> Snapshot:
    """Azure NC96ads A100 v4: 4x A100 80GB PCIe, NVLink bridges 0-1 and 2-3, each GPU on its own NUMA node."""
    name = "a100-pcie-nvbridge-4"
    cpus = [cpulist((24 * node, 24 * node + 23)) for node in range(4)]
    nodes = numa_nodes(cpus, 220 * GIB, (0, 0, 1, 1), 12, 32)
    slots = [host_bridge_slot(domain) for domain in (1, 2, 3, 4)]
    gpus = [
        make_gpu(name, index, A100_PCIE, slot, nodes[index], direct_nvlink_ports(3, [(slots[index ^ 1].nvml_bus_id(), 12)]))
        for index, slot in enumerate(slots)
    ]
    host = assemble_host(
        name,
        gpus,
        [],
        nodes,
        versions("535.54.03", "12.2"),
        Capabilities(iommu_enabled=False, gpudirect_rdma=False),
        p2p_never,
    )
    return snapshot(
        name,
        host,
        "Azure NC96ads A100 v4 VM: 4x A100 80GB PCIe with NVLink bridges in pairs (NV12 0-1 and 2-3, SYS otherwise), "
        "96 vCPUs in 4 NUMA nodes (one GPU each), each GPU on its own virtual PCI domain, no RDMA NIC",
        (
            "Microsoft Azure NC A100 v4-series documentation (Standard_NC96ads_A100_v4: 4x A100 80GB PCIe, 96 vCPUs, 880 GiB)",
            "NVIDIA A100 80GB PCIe datasheet (NVLink bridge for 2 GPUs: 600 GB/s, 12 links; PCIe Gen4)",
            "real `nvidia-smi topo -m` of this VM type: "
            "tests/fixtures/real/topo/a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt",
        ),
    )


def consumer_2gpu() -> Snapshot:
    """A one-socket workstation with two RTX 4090 on two CPU root ports (PHB), no P2P, one onboard 2.5 GbE port."""
    name = "consumer-2gpu"
    nodes = numa_nodes([cpulist((0, 47))], 128 * GIB, (0,), 12, 32)
    gpu_slots = [root_port(0x00, 1, 0x01, function=1), root_port(0x00, 3, 0x02, function=1)]
    gpus = [make_gpu(name, index, RTX_4090, slot, nodes[0]) for index, slot in enumerate(gpu_slots)]
    (chipset_port,) = switch(root_port(0x00, 2, 0x03, function=1), (0x06,))
    nic = make_nic("enp6s0", chipset_port, 0, "Ethernet", 2.5)
    host = assemble_host(
        name,
        gpus,
        [nic],
        nodes,
        versions("550.90.07", "12.4"),
        Capabilities(iommu_enabled=False, gpudirect_rdma=False),
        p2p_never,
    )
    return snapshot(
        name,
        host,
        "Workstation: 2x GeForce RTX 4090 24GB on two CPU root ports (PHB), PCIe Gen4 x16 each, no NVLink and no P2P "
        "(GeForce), 1 socket (Threadripper 7960X, 24 cores, SMT), one onboard 2.5 GbE port",
        (
            "NVIDIA GeForce RTX 4090 specifications (PCIe Gen4 x16, 24 GB, no NVLink)",
            "real NCCL log of a 2-GPU desktop without P2P (SHM transport, NET/Socket over enp6s0): "
            "tests/fixtures/real/nccl_debug/consumer-2gpu-msi-ms7d31-shm-socket.txt",
            "real `nvidia-smi topo -m` / `-p2p` of 2 consumer GPUs reporting NS: "
            "tests/fixtures/real/topo/rtx2080ti-2gpu-pix-p2p-not-supported.txt",
        ),
    )


BUILDERS: dict[str, Callable[[], Snapshot]] = {
    "dgx-h100": dgx_h100,
    "dgx-h100-degraded": dgx_h100_degraded,
    "b200-hgx": b200_hgx,
    "dgx-a100": dgx_a100,
    "dgx1-v100": dgx1_v100,
    "pcie-l40s-8": pcie_l40s_8,
    "a100-pcie-nvbridge-4": a100_pcie_nvbridge_4,
    "consumer-2gpu": consumer_2gpu,
    "gb200-nvl72": gb200_nvl72,
    "h100-cluster-mixed": h100_cluster_mixed,
}
"""How each sample is built, by name."""


def build_sample(name: str) -> Snapshot:
    """Build sample `name` from its description in this module."""
    return BUILDERS[name]()


def sample_json(name: str) -> str:
    """The exact text of sample `name`'s data file."""
    return snapshot_to_json(build_sample(name)) + "\n"


def data_dir() -> Path:
    """The directory that holds the committed sample JSON files."""
    return Path(__file__).resolve().parent


def main(argv: Sequence[str] | None = None) -> int:
    """Write every sample's JSON (or, with --check, report the ones that differ); exit status 1 on a difference."""
    parser = argparse.ArgumentParser(prog="python -m linkscope.topo.samples.build", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    assert set(BUILDERS) == set(SAMPLE_NAMES), "every listed sample needs a builder"
    stale = []
    for name in SAMPLE_NAMES:
        path = data_dir() / sample_file_name(name)
        text = sample_json(name)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    verb = "differ" if args.check else "rewritten"
    say(f"{len(stale)} of {len(SAMPLE_NAMES)} samples {verb}: {', '.join(stale) or '-'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
