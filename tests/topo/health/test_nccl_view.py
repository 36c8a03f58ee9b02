"""NCCL's view of the machine set beside NVML's: each difference a finding with evidence from both sides and its fix.

The real cases: this project's own H200 VM run (NCCL's dump says link_width="0" where NVML reads Gen5 x16), an H200 KVM
guest whose NCCL log prices every emulated switch port at PCI[0.2], and vendor and dumped topology files."""

from __future__ import annotations

import json

import pytest

from linkscope.topo.formats.nccl_view import load_nccl_topology, nccl_topology_of_text
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.nccl_view import nccl_view_differs
from linkscope.topo.model.codec import snapshot_from_json
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES

REAL = FIXTURES / "real"
H200 = REAL / "gpu" / "h200-580.159.04"
KVM_LOG = REAL / "nccl_debug" / "h200-kvm-vm-topology-dump-pci-0.2-links.txt"


def _probe(path: str) -> Snapshot:
    return snapshot_from_json(json.dumps(json.loads((H200 / path).read_text())["snapshot"]), path)


def _findings(snapshot: Snapshot, topology_path: str) -> dict[str, HealthFinding]:
    topology = load_nccl_topology(topology_path)
    return {finding.code: finding for finding in nccl_view_differs(HealthContext(snapshot, nccl_topology=topology))}


def test_h200_vm_dump_beside_its_nvml_snapshot_says_ncc_sees_no_link_width() -> None:
    """The dump (read by hand): `<pci busid="0000:00:06.0" ... link_speed="32.0 GT/s PCIe" link_width="0">`; the same
    machine's probe: GPU 0 at 00000000:00:06.0, PCIe Gen5 x16. NCCL assumes x16, which is right here: info, with the fix."""
    found = _findings(_probe("probe.json"), str(H200 / "nccl-topo-dump.xml"))
    assert set(found) == {"nccl-pcie-width-unknown"}
    finding = found["nccl-pcie-width-unknown"]
    assert finding.severity == "info" and finding.gpus == (0,)
    assert any("0000:00:06.0" in line and "link_width=0" in line for line in finding.evidence)
    assert any(line.startswith("NVML:") and "Gen5 x16" in line for line in finding.evidence)
    assert "NCCL_TOPO_FILE" in finding.fix and "linkscope export nccl-topo" in finding.fix


def test_a_narrower_nvml_link_makes_the_missing_width_a_warning() -> None:
    import dataclasses

    probe = _probe("probe.json")
    gpu = dataclasses.replace(probe.host.gpus[0], pcie_width_max=8)
    narrow = dataclasses.replace(probe, hosts=(dataclasses.replace(probe.host, gpus=(gpu,)),))
    finding = _findings(narrow, str(H200 / "nccl-topo-dump.xml"))["nccl-pcie-width-unknown"]
    assert finding.severity == "warning" and "wider than the link NVML reads" in finding.message


def test_kvm_guest_log_prices_every_emulated_switch_port_at_0_2() -> None:
    """The log (read by hand): under each of 2 CPUs, 4 `+ PCI[0.2] - PCI/0-xxxxx` switches, each holding a GPU at
    PCI[48.0]; the 8 GPUs are 68000, 6b000, 70000, 73000, cc000, cf000, d3000, d8000."""
    topology = nccl_topology_of_text(KVM_LOG.read_text(), KVM_LOG.name)
    assert topology.form == "log" and (topology.max_bw_gbps, topology.total_bw_gbps) == (48.0, 370.8)
    finding = {f.code: f for f in nccl_view_differs(HealthContext(load_sample("dgx-h100"), nccl_topology=topology))}
    slow = finding["nccl-pcie-path-slow"]
    assert slow.severity == "warning" and len(slow.evidence) == 8
    assert all("at 0.2 GB/s" in line and "48.0 GB/s" in line for line in slow.evidence)
    assert "0000:68:00.0" in slow.evidence[0] and "0000:65:00.0" in slow.evidence[0]
    assert "x-speed" in slow.fix and "ACS" in slow.fix and "NCCL_TOPO_FILE" in slow.fix


def test_empty_link_speed_in_a_vm_dump_is_a_speed_nccl_does_not_know() -> None:
    """azure-nc48ads: both GPUs' `<pci ... link_speed="" link_width="0">` (read by hand)."""
    path = REAL / "nccl_topo_xml" / "azure-nc48ads-a100-v4-2gpu-vm-nvlink-pair-empty-link-speed-eth0.xml"
    topology = load_nccl_topology(str(path))
    from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of

    found = {f.code: f for f in nccl_view_differs(HealthContext(snapshot_of(topology), nccl_topology=topology))}
    assert {"nccl-pcie-speed-unknown", "nccl-pcie-width-unknown"} <= set(found)
    assert "Gen3" in found["nccl-pcie-speed-unknown"].message and found["nccl-pcie-speed-unknown"].gpus == (0, 1)


def _dgx_view(gpu_children: str, numa_of_gpu0: int = 0, gdr: int = 1) -> str:
    """NCCL's view of the dgx-h100 sample's first two GPUs and first NIC, with the parts a test changes."""
    return f"""<system version="1">
  <cpu numaid="{numa_of_gpu0}" affinity="ffff">
    <pci busid="0000:1b:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">{gpu_children}</gpu>
    </pci>
  </cpu>
  <cpu numaid="0" affinity="ffff0000">
    <pci busid="0000:20:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1" gdr="1">{gpu_children}</gpu>
    </pci>
    <pci busid="0000:1a:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
      <nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="{gdr}"/></nic>
    </pci>
  </cpu>
</system>
"""


def _dgx_findings(text: str) -> dict[str, HealthFinding]:
    topology = nccl_topology_of_text(text, "view.xml")
    return {f.code: f for f in nccl_view_differs(HealthContext(load_sample("dgx-h100"), nccl_topology=topology))}


SWITCHED = '<nvlink target="0000:c0:00.0" count="18" tclass="0x068000"/>'


def test_the_same_machine_seen_alike_gives_no_finding() -> None:
    assert _dgx_findings(_dgx_view(SWITCHED)) == {}


def test_nvlinks_nccl_does_not_see_are_an_error_naming_both_gpus() -> None:
    finding = _dgx_findings(_dgx_view(""))["nccl-nvlink-not-seen"]
    assert finding.severity == "error" and finding.gpus == (0, 1)
    assert finding.evidence == ("NVML: GPU 0 - GPU 1: NV18; NCCL: no NVLink between 0000:1b:00.0 and 0000:20:00.0",)
    assert "nvidia-fabricmanager" in finding.fix


def test_nvlinks_to_each_other_instead_of_to_nvswitches_say_the_switch_is_not_seen() -> None:
    text = _dgx_view("").replace('gdr="1"></gpu>', 'gdr="1"><nvlink target="0000:20:00.0" count="18" tclass="0x030200"/>'
                                 "</gpu>", 1)
    found = _dgx_findings(text)
    assert "nccl-nvlink-not-seen" not in found and found["nccl-nvswitch-not-seen"].severity == "warning"


def test_a_gpu_under_another_cpu_than_nvml_says_is_an_affinity_finding() -> None:
    finding = _dgx_findings(_dgx_view(SWITCHED, numa_of_gpu0=1))["nccl-affinity-differs"]
    assert finding.gpus == (0,)
    assert finding.evidence == ("GPU 0000:1b:00.0: NVML NUMA node 0; NCCL puts it under CPU numaid 1",)
    assert "numa_node" in finding.fix


def test_an_rdma_nic_without_gdr_is_a_finding_with_peermem_in_evidence_and_fix() -> None:
    finding = _dgx_findings(_dgx_view(SWITCHED, gdr=0))["nccl-nic-no-gdr"]
    assert finding.evidence == ("NCCL (view.xml): net mlx5_0 gdr=0", "snapshot: nvidia_peermem loaded")
    assert "nvidia_peermem" in finding.fix and "ATS" in finding.fix


@pytest.mark.parametrize("name", ["rtx3090-8gpu-2-plx-switches-fdr-nic-gdr0-dump.xml",
                                  "rtx4090-2gpu-amd-nps4-numa3-numa2-cx4-nic-gdr0-dump.xml"])
def test_real_dumps_with_gdr_0_on_their_mellanox_nic(name: str) -> None:
    """Both dumps (read by hand) state `<net name="mlx5_0" ... gdr="0"/>`."""
    topology = load_nccl_topology(str(REAL / "nccl_topo_xml" / name))
    from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of

    found = {f.code for f in nccl_view_differs(HealthContext(snapshot_of(topology), nccl_topology=topology))}
    assert "nccl-nic-no-gdr" in found
