"""The built-in sample machines: data files, internal consistency, and agreement with real outputs."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.source import load_source
from linkscope.topo.machine.pcipath import classify_pci_pair
from linkscope.topo.model.codec import snapshot_from_json, snapshot_to_json
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.samples import load_sample, sample_description, sample_names
from linkscope.topo.samples.build import build_sample, data_dir, main, sample_json
from support.samples import fixture_gpu_rows

NAMES = sample_names()
UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
NVML_BUS_ID = re.compile(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]\Z")
SYSFS_BUS_ID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")


def host_of(name: str) -> Host:
    return load_sample(name).host


def test_the_ten_samples_are_listed() -> None:
    assert sorted(NAMES) == sorted(
        ["dgx-h100", "dgx-a100", "dgx1-v100", "pcie-l40s-8", "a100-pcie-nvbridge-4", "consumer-2gpu", "dgx-h100-degraded",
         "b200-hgx", "gb200-nvl72", "h100-cluster-mixed"]
    )


@pytest.mark.parametrize("name", NAMES)
def test_data_file_equals_generator_output(name: str) -> None:
    """The committed JSON is exactly what `python -m linkscope.topo.samples.build` writes."""
    assert (data_dir() / f"{name}.json").read_text(encoding="utf-8") == sample_json(name)


def test_build_check_reports_no_difference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0
    assert "0 of 10 samples differ" in capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip(name: str) -> None:
    snapshot = load_sample(name)
    assert snapshot == build_sample(name)
    assert snapshot_from_json(snapshot_to_json(snapshot)) == snapshot


@pytest.mark.parametrize("name", NAMES)
def test_source_description_and_sources(name: str) -> None:
    snapshot = load_sample(name)
    assert snapshot.source == f"sample:{name}"
    assert sample_description(name) == snapshot.meta_value("description")
    assert len(sample_description(name)) > 40
    assert "\n" not in sample_description(name)
    assert snapshot.meta_value("sources")


def test_sample_source_spec_loads_the_sample() -> None:
    assert load_source("sample:dgx-a100") is load_sample("dgx-a100")


@pytest.mark.parametrize("bad", ["nope", "", "DGX-H100", "../dgx-h100", "dgx-h100.json"])
def test_unknown_sample_is_input_error(bad: str) -> None:
    with pytest.raises(InputError, match=r"unknown sample .*\(available: dgx-h100, "):
        load_sample(bad)


@pytest.mark.parametrize("name", NAMES)
def test_gpus_carry_every_probe_field(name: str) -> None:
    host = host_of(name)
    assert [gpu.index for gpu in host.gpus] == list(range(len(host.gpus)))
    for gpu in host.gpus:
        assert gpu.name and gpu.compute_capability and gpu.memory_total_bytes
        assert gpu.uuid is not None and UUID.match(gpu.uuid), gpu.uuid
        assert gpu.pci_bus_id is not None and NVML_BUS_ID.match(gpu.pci_bus_id), gpu.pci_bus_id
        assert gpu.mig_enabled is False
        assert None not in (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max)
        assert gpu.pci_path and gpu.pci_path[0].startswith("pci")
        assert all(SYSFS_BUS_ID.match(element) for element in gpu.pci_path[1:])
    assert len({gpu.uuid for gpu in host.gpus}) == len(host.gpus)
    assert len({gpu.pci_bus_id for gpu in host.gpus}) == len(host.gpus)
    assert host.versions.driver and host.versions.cuda_driver and host.versions.nvml
    assert host.capabilities.iommu_enabled is not None and host.capabilities.gpudirect_rdma is not None


@pytest.mark.parametrize("name", NAMES)
def test_numa_layout(name: str) -> None:
    host = host_of(name)
    ids = [node.id for node in host.numa_nodes]
    assert ids == list(range(len(ids)))
    for node in host.numa_nodes:
        assert len(node.distances) == len(ids)
        assert node.distances[node.id] == 10
        assert node.cpus and node.memory_bytes
    assert all(host.numa_nodes[a].distances[b] == host.numa_nodes[b].distances[a] for a in ids for b in ids)
    for gpu in host.gpus:
        assert gpu.numa_node in ids
        assert gpu.cpu_affinity == host.numa_nodes[gpu.numa_node].cpus
        assert gpu.numa_affinity == str(gpu.numa_node)
    assert all(nic.numa_node in ids for nic in host.nics)


@pytest.mark.parametrize("name", NAMES)
def test_links_complete_and_symmetric(name: str) -> None:
    host = host_of(name)
    count = len(host.gpus)
    assert Counter((link.a, link.b) for link in host.links) == Counter((a, b) for a in range(count) for b in range(a + 1, count))
    matrix = host.matrix_tokens()
    assert all(matrix[a][b] == matrix[b][a] for a in range(count) for b in range(count))
    assert all(matrix[a][a] == "X" for a in range(count))
    assert all(link.p2p is not None for link in host.links)


@pytest.mark.parametrize("name", NAMES)
def test_pcie_classes_follow_the_pci_paths(name: str) -> None:
    """Non-NVLink GPU pairs and GPU x NIC tokens are what the probe computes from the PCI tree."""
    host = host_of(name)
    for link in host.links:
        if link.kind is not LinkKind.NVLINK:
            a, b = host.gpus[link.a], host.gpus[link.b]
            assert link.kind is classify_pci_pair(a.pci_path, a.numa_node, b.pci_path, b.numa_node), (link.a, link.b)
    assert len(host.gpu_nic) == len(host.gpus)
    for gpu, row in zip(host.gpus, host.gpu_nic, strict=True):
        expected = [classify_pci_pair(gpu.pci_path, gpu.numa_node, nic.pci_path, nic.numa_node).value for nic in host.nics]
        assert list(row) == expected, gpu.index


@pytest.mark.parametrize("name", NAMES)
def test_nvlink_pair_counts_match_the_ports(name: str) -> None:
    host = host_of(name)
    by_bus = {gpu.pci_bus_id: gpu.index for gpu in host.gpus}
    for link in host.links:
        a, b = host.gpus[link.a], host.gpus[link.b]
        to_b = sum(
            1 for port in a.nvlinks if port.active and port.remote_type == "gpu" and port.remote_pci_bus_id == b.pci_bus_id
        )
        to_a = sum(
            1 for port in b.nvlinks if port.active and port.remote_type == "gpu" and port.remote_pci_bus_id == a.pci_bus_id
        )
        assert to_a == to_b
        switched = [sum(1 for port in gpu.nvlinks if port.active and port.remote_type == "switch") for gpu in (a, b)]
        assert link.nvlink_count == to_b + min(switched), (link.a, link.b)
        assert (link.kind is LinkKind.NVLINK) == (link.nvlink_count > 0)
        if link.kind is LinkKind.NVLINK:
            assert link.nvlink_gen == a.nvlink_gen == b.nvlink_gen
            assert link.p2p is not None and link.p2p.nvlink == "OK"
    for gpu in host.gpus:
        for port in gpu.nvlinks:
            assert port.version == gpu.nvlink_gen
            if port.active and port.remote_type == "gpu":
                assert port.remote_pci_bus_id in by_bus and by_bus[port.remote_pci_bus_id] != gpu.index
            if not port.active:
                assert port.remote_pci_bus_id is None


@pytest.mark.parametrize("name", NAMES)
def test_nics_are_complete(name: str) -> None:
    host = host_of(name)
    assert len({nic.name for nic in host.nics}) == len(host.nics)
    for nic in host.nics:
        assert nic.netdev and nic.link_layer in ("InfiniBand", "Ethernet") and nic.rate_gbit_per_s and nic.state == "ACTIVE"
        assert nic.pci_bus_id is not None and SYSFS_BUS_ID.match(nic.pci_bus_id)
        assert nic.pci_path and nic.pci_path[0].startswith("pci")


@pytest.mark.parametrize(
    ("name", "fixture"),
    [
        ("dgx1-v100", "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt"),
        ("a100-pcie-nvbridge-4", "a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt"),
        ("dgx-h100", "h100-8gpu-nv18-13nic-named-ib-eth.txt"),
    ],
)
def test_gpu_matrix_equals_the_real_machine(name: str, fixture: str) -> None:
    gpu_matrix, _ = fixture_gpu_rows(fixture)
    assert host_of(name).matrix_tokens() == gpu_matrix


def test_dgx_h100_compute_nics_sit_like_the_real_machine() -> None:
    """Each ConnectX-7 is PIX to one GPU and PXB to its neighbour, as in the real 8x H100 output."""
    _, real_gpu_nic = fixture_gpu_rows("h100-8gpu-nv18-13nic-named-ib-eth.txt")
    host = host_of("dgx-h100")
    assert [list(row[:8]) for row in host.gpu_nic] == [row[:8] for row in real_gpu_nic]
    assert [gpu.cpu_affinity for gpu in host.gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4


def test_dgx_h100_degraded_gpu3() -> None:
    healthy, degraded = host_of("dgx-h100"), host_of("dgx-h100-degraded")
    gpu3 = degraded.gpus[3]
    assert (gpu3.nvlink_active_count, len(gpu3.nvlinks)) == (16, 18)
    assert (gpu3.pcie_width_current, gpu3.pcie_width_max) == (8, 16)
    matrix = degraded.matrix_tokens()
    for other in range(8):
        if other != 3:
            assert matrix[3][other] == matrix[other][3] == "NV16"
            assert degraded.gpus[other].nvlink_active_count == 18
    assert all(matrix[a][b] == "NV18" for a in range(8) for b in range(8) if a != b and 3 not in (a, b))
    assert degraded.gpu_nic == healthy.gpu_nic
    assert healthy.gpus[3].nvlink_active_count == 18 and healthy.gpus[3].pcie_width_current == 16


@pytest.mark.parametrize(
    ("name", "pair", "read", "write"),
    [
        ("pcie-l40s-8", (0, 1), "OK", "OK"),
        ("pcie-l40s-8", (0, 4), "NS", "NS"),
        ("consumer-2gpu", (0, 1), "NS", "NS"),
        ("a100-pcie-nvbridge-4", (0, 2), "NS", "NS"),
        ("dgx-a100", (0, 7), "OK", "OK"),
    ],
)
def test_p2p_status(name: str, pair: tuple[int, int], read: str, write: str) -> None:
    p2p = host_of(name).link(*pair).p2p
    assert p2p is not None and (p2p.read, p2p.write) == (read, write)


def test_consumer_2gpu_is_phb_without_p2p() -> None:
    host = host_of("consumer-2gpu")
    assert host.matrix_tokens() == [["X", "PHB"], ["PHB", "X"]]
    assert [nic.link_layer for nic in host.nics] == ["Ethernet"]
    assert len(host.numa_nodes) == 1
