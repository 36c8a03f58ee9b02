"""NCCL's debug-log form of its topology (`=== System : maxBw ...` tree) and graphs (`Pattern ...` lines), read by the
NCCL log reader into the same models as the XML dumps. Facts read by hand off the real logs."""

from __future__ import annotations

from linkscope.topo.formats.nccl_log import read_nccl_log_text
from support.paths import FIXTURES

LOGS = FIXTURES / "real" / "nccl_debug"
KVM = LOGS / "h200-kvm-vm-topology-dump-pci-0.2-links.txt"
RTX3090 = next(LOGS.glob("rtx3090-2node-16rank-nccl-2.12-graph-subsys-*.txt"))
H200_DDP = FIXTURES / "real" / "gpu" / "h200-580.159.04" / "nccl-debug-ddp-step.txt"


def test_kvm_guest_tree_new_id_form() -> None:
    """`CPU/0-0`, `CPU/0-1`; under each 4 x `+ PCI[0.2] - PCI/0-xxxxx (104c823200000000)` each holding `NIC/0-...` with
    `NET[50.0] - NET/0-c (0/d4f9fc0003ae6d94/1/50.000000)` and `GPU/0-68000 (8)` with `NVL[370.8] - NVS/0-0`."""
    log = read_nccl_log_text(KVM.read_text(), KVM.name)
    (topology,) = log.topologies
    assert (topology.form, topology.max_bw_gbps, topology.total_bw_gbps) == ("log", 48.0, 370.8)
    assert [cpu.numa_id for cpu in topology.cpus] == [0, 1]
    bridges = [port for port in topology.pcis if port.parent is None]
    assert [port.busid for port in bridges] == ["0000:65:00.0", "0000:69:00.0", "0000:6d:00.0", "0000:71:00.0",
                                                "0000:c9:00.0", "0000:cd:00.0", "0000:d1:00.0", "0000:d5:00.0"]
    assert {port.bw_gbps for port in bridges} == {0.2} and {port.device for port in bridges} == {"104c823200000000"}
    gpus = {gpu.busid: gpu for gpu in topology.gpus}
    first = gpus["0000:68:00.0"]
    assert first.rank == 8 and topology.pci(first.busid).parent == "0000:65:00.0"  # type: ignore[union-attr]
    assert [(link.to_nvswitch, link.bw_gbps) for link in first.nvlinks] == [(True, 370.8)]
    assert sorted(gpu.rank for gpu in topology.gpus) == list(range(8, 16))  # type: ignore[type-var]
    net = topology.nets[0]
    assert (net.dev, net.busid, net.speed_mbps, net.guid, net.port) == (12, "0000:67:00.0", 400000, "d4f9fc0003ae6d94", 1)
    assert topology.cpus[topology.gpus[4].cpu].numa_id == 1


def test_old_id_form_and_its_graphs() -> None:
    """NCCL 2.12: `CPU/0 (1/1/2)`, `+ PCI[24.0] - PCI/C000`, GPUs F000-12000 (ranks 0-3) under it, GPUs 9B000-9E000
    (4-7) and `NIC/9A000` -> `NET[7.0] - NET/0 (30c7170003fd7010/1/7.000000)` under PCI/98000 on CPU/1; `Pattern 4,
    crossNic 0, nChannels 1, bw 4.000000/4.000000, type SYS/SYS` with ` 0 : NET/0 GPU/0 ... GPU/7 NET/0`."""
    log = read_nccl_log_text(RTX3090.read_text(), RTX3090.name)
    (topology,) = log.topologies
    assert (topology.max_bw_gbps, topology.total_bw_gbps) == (7.0, 24.0)
    under = {port.busid: sorted(child.busid for child in topology.pcis if child.parent == port.busid)
             for port in topology.pcis if port.parent is None}
    assert under["0000:0c:00.0"] == ["0000:0f:00.0", "0000:10:00.0", "0000:11:00.0", "0000:12:00.0"]
    assert under["0000:98:00.0"] == ["0000:9a:00.0", "0000:9b:00.0", "0000:9c:00.0", "0000:9d:00.0", "0000:9e:00.0"]
    (net,) = topology.nets
    assert (net.dev, net.busid, net.speed_mbps, net.guid, net.port) == (0, "0000:9a:00.0", 56000, "30c7170003fd7010", 1)
    ring = log.graphs[0].graphs[0]
    assert (ring.pattern, ring.crossnic, ring.nchannels, ring.speed_intra_gbps, ring.type_intra, ring.type_inter) == \
        ("ring", 0, 1, 4.0, "SYS", "SYS")
    assert [hop.label for hop in ring.channels[0]] == ["net0", *(f"rank{n}" for n in range(8)), "net0"]


def test_this_projects_h200_vm_log() -> None:
    """`=== System : maxBw 5000.0 totalBw 5000.0 ===`, `CPU/0-ffffffffffffff` (no NUMA id), `+ PCI[48.0] - GPU/0-60 (0)`;
    `Pattern 4, crossNic 0, nChannels 32, bw 60.000000/60.000000, type LOC/PIX` with 32 channels ` N : GPU/0-60`."""
    log = read_nccl_log_text(H200_DDP.read_text(), H200_DDP.name)
    (topology,) = log.topologies
    assert topology.cpus[0].numa_id is None
    (gpu,) = topology.gpus
    assert (gpu.busid, gpu.rank, topology.pci(gpu.busid).bw_gbps) == ("0000:00:06.0", 0, 48.0)  # type: ignore[union-attr]
    ring = log.graphs[0].graphs[0]
    assert (ring.nchannels, ring.speed_intra_gbps, ring.type_intra, ring.type_inter) == (32, 60.0, "LOC", "PIX")
    assert len(ring.channels) == 32 and {hop.busid for channel in ring.channels for hop in channel} == {"0000:00:06.0"}


def test_a_log_without_topology_lines_has_none() -> None:
    log = read_nccl_log_text("h:1:2 [0] NCCL INFO Channel 00/02 :    0   1\nh:1:2 [0] NCCL INFO + PCI[bad] - x\n", "x.log")
    assert log.topologies == () and log.graphs == ()
