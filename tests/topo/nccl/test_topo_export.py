"""`export nccl-topo`: every real topology file's machine, read as a SOURCE and exported, gives back the file's
structure (the same GPUs and NICs under the same bridges and CPUs, with the same speeds and widths), and the file is
one NCCL's own reader accepts."""

from __future__ import annotations

import json

import pytest

from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of
from linkscope.topo.formats.nccl_topo_xml import read_nccl_topo_xml
from linkscope.topo.model.codec import snapshot_from_json
from linkscope.topo.nccl.topo_export import export_nccl_topology
from linkscope.topo.samples import load_sample
from support.nccl_xml import nccl_reader_problems, structure
from support.paths import FIXTURES

TOPO_FILES = sorted((FIXTURES / "real" / "nccl_topo_xml").glob("*.xml"))


def _round_trip(name: str) -> tuple[object, object, str]:
    path = FIXTURES / "real" / "nccl_topo_xml" / name
    source = read_nccl_topo_xml(path.read_text(), path.name)
    exported = export_nccl_topology(snapshot_of(source)).text
    return source, read_nccl_topo_xml(exported, "exported.xml"), exported


@pytest.mark.parametrize("path", TOPO_FILES, ids=lambda path: path.name)
def test_export_of_a_real_file_reproduces_its_structure(path: object) -> None:
    source, again, text = _round_trip(path.name)  # type: ignore[attr-defined]
    cpus, leaves, bridges = structure(source)  # type: ignore[arg-type]
    cpus_again, leaves_again, bridges_again = structure(again)  # type: ignore[arg-type]
    assert leaves and cpus
    assert cpus_again == {numa: mask for numa, mask in cpus.items() if any(leaf.cpu_numa == numa for leaf in
                                                                          leaves.values())}
    assert leaves_again == leaves
    for busid, (gts, width) in bridges_again.items():
        assert bridges[busid] == (gts, width) or bridges[busid][0] is None
    assert nccl_reader_problems(text) == []


def test_ndv4_export_pairs_the_vendors_gpus_and_nics_under_the_same_switches() -> None:
    """Azure's ndv4-topo.xml (read by hand): numaid 0 holds ffff:ff:01.0 with GPUs 0003, 0004 and NICs 0103, 0104;
    numaid 1 ffff:ff:02.0 with 0001, 0002, 0101, 0102; every link 16 GT/s x16; CPU model x86_64 AuthenticAMD 23/49."""
    _, again, text = _round_trip("azure-ndv4-a100-8gpu-vendor-topo-4numa-virtual-switches-ffff-busids.xml")
    under = {port.busid: sorted(child.busid[:4] for child in again.pcis if child.parent == port.busid)  # type: ignore[attr-defined]
             for port in again.pcis if port.is_bridge}  # type: ignore[attr-defined]
    assert under["ffff:ff:01.0"] == ["0003", "0004", "0103", "0104"]
    assert under["ffff:ff:02.0"] == ["0001", "0002", "0101", "0102"]
    assert '<cpu numaid="0" affinity="00ffffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">' in text
    assert {(port.link_gts, port.link_width) for port in again.pcis} == {(16.0, 16)}  # type: ignore[attr-defined]


def test_ndv5_export_keeps_one_gpu_and_one_nic_per_virtual_switch() -> None:
    _, again, _ = _round_trip("azure-ndv5-h100-8gpu-vendor-topo-2numa-8-virtual-switches-pcie-gen5.xml")
    bridges = [port for port in again.pcis if port.is_bridge]  # type: ignore[attr-defined]
    kinds = [sorted((child.class_code or "") for child in again.pcis if child.parent == bridge.busid)  # type: ignore[attr-defined]
             for bridge in bridges]
    assert len(bridges) == 8 and kinds == [["0x020700", "0x030200"]] * 8


def test_export_of_a_probe_writes_what_it_read_and_says_what_it_lacks() -> None:
    """The H200 VM's probe: GPU 00000000:00:06.0 at Gen5 x16, NIC eth0 at 0000:00:03.0 without a PCIe speed, no NUMA."""
    path = FIXTURES / "real" / "gpu" / "h200-580.159.04" / "probe.json"
    snapshot = snapshot_from_json(json.dumps(json.loads(path.read_text())["snapshot"]), path.name)
    exported = export_nccl_topology(snapshot)
    assert '<pci busid="0000:00:06.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>' in exported.text
    assert '<pci busid="0000:00:03.0" class="0x020000"/>' in exported.text and '<cpu numaid="-1">' in exported.text
    assert any("0000:00:03.0" in note for note in exported.notes) and any("CPU models" in note for note in exported.notes)
    assert nccl_reader_problems(exported.text) == []


@pytest.mark.parametrize("name", ["dgx-h100", "b200-hgx", "dgx1-v100", "pcie-l40s-8", "gb200-nvl72", "h100-cluster-mixed"])
def test_export_of_samples_is_what_nccls_reader_accepts(name: str) -> None:
    snapshot = load_sample(name)
    exported = export_nccl_topology(snapshot)
    assert nccl_reader_problems(exported.text) == []
    again = snapshot_of(read_nccl_topo_xml(exported.text, "x.xml"))
    host = snapshot.host
    assert [gpu.pci_bus_id for gpu in again.host.gpus] == sorted(gpu.pci_bus_id for gpu in host.gpus if gpu.pci_bus_id)
    numa_of = {gpu.pci_bus_id: gpu.numa_node for gpu in host.gpus}
    assert all(numa_of[gpu.pci_bus_id] == gpu.numa_node for gpu in again.host.gpus)
