"""sysfs reader: fake trees built from samples, hand-made edge cases, and this machine's real /sys."""

from __future__ import annotations

import os
import re
from pathlib import Path

import psutil
import pytest

from linkscope.probes.sysfs import (
    SysfsReader,
    format_cpulist,
    nvml_bus_id,
    parse_cpulist,
    read_sysfs,
    sysfs_bus_id,
)
from linkscope.topo.samples import load_sample
from support.fakes import build_sysfs


@pytest.mark.parametrize(
    ("text", "numbers"),
    [("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("5", {5}), ("", set()),
     ("0-55,112-167\n", set(range(56)) | set(range(112, 168)))],
)
def test_cpulist_parse_and_format(text: str, numbers: set[int]) -> None:
    assert parse_cpulist(text) == numbers
    assert parse_cpulist(format_cpulist(numbers)) == numbers


def test_format_cpulist_joins_ranges() -> None:
    assert format_cpulist({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert format_cpulist(set()) == ""


@pytest.mark.parametrize("bad", ["3-1", "a-b", "1,,x"])
def test_parse_cpulist_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_cpulist(bad)


def test_bus_id_forms() -> None:
    assert sysfs_bus_id("00000000:1B:00.0") == "0000:1b:00.0"
    assert nvml_bus_id("0000:1b:00.0") == "00000000:1B:00.0"
    assert sysfs_bus_id("00000001:00:00.0") == "0001:00:00.0"


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-a100", "consumer-2gpu", "a100-pcie-nvbridge-4"])
def test_fake_tree_reads_back_numa_nics_and_gpu_paths(tmp_path: Path, name: str) -> None:
    host = load_sample(name).host
    facts = read_sysfs(build_sysfs(tmp_path, host))
    assert facts.numa_nodes == host.numa_nodes
    assert facts.nics == host.nics
    assert [nvml_bus_id(g.bus_id) for g in facts.gpus] == [g.pci_bus_id for g in host.gpus]
    assert [g.pci_path for g in facts.gpus] == [g.pci_path for g in host.gpus]
    assert [g.numa_node for g in facts.gpus] == [g.numa_node for g in host.gpus]
    assert facts.gpudirect_rdma == host.capabilities.gpudirect_rdma
    assert facts.iommu_enabled == host.capabilities.iommu_enabled
    assert facts.gaps == ()


def test_nic_pcie_link_is_read_for_the_nccl_topology_file(tmp_path: Path) -> None:
    """`max_link_speed`/`max_link_width` of a NIC (what an exported NCCL_TOPO_FILE states for it) round-trip."""
    import dataclasses

    host = load_sample("dgx-h100").host
    nics = (dataclasses.replace(host.nics[0], pcie_gen_max=5, pcie_width_max=16), *host.nics[1:])
    facts = read_sysfs(build_sysfs(tmp_path, dataclasses.replace(host, nics=nics)))
    assert (facts.nics[0].pcie_gen_max, facts.nics[0].pcie_width_max) == (5, 16)
    assert (facts.nics[1].pcie_gen_max, facts.nics[1].pcie_width_max) == (None, None)


def test_nics_are_listed_in_natural_order(tmp_path: Path) -> None:
    facts = read_sysfs(build_sysfs(tmp_path, load_sample("dgx-h100").host))
    assert [nic.name for nic in facts.nics][8:] == ["mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_unknown_numa_node_and_missing_files_become_none_and_gaps(tmp_path: Path) -> None:
    device = tmp_path / "sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0"
    _write(device / "vendor", "0x10de\n")
    _write(device / "class", "0x030000\n")
    _write(device / "numa_node", "-1\n")
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices/0000:03:00.0").symlink_to("../../../devices/pci0000:00/0000:00:02.0/0000:03:00.0")
    node = tmp_path / "sys/devices/system/node/node0"
    _write(node / "cpulist", "0-3\n")
    _write(node / "distance", "10 x\n")
    facts = read_sysfs(tmp_path)
    [gpu] = facts.gpus
    assert gpu.numa_node is None
    assert gpu.pci_path == ("pci0000:00", "0000:00:02.0")
    assert facts.numa_nodes[0].cpus == "0-3"
    assert facts.numa_nodes[0].distances == ()
    assert facts.numa_nodes[0].memory_bytes is None
    subjects = {gap.subject for gap in facts.gaps}
    assert "sysfs /sys/devices/system/node/node0/meminfo" in subjects
    assert "sysfs /sys/devices/system/node/node0/distance" in subjects
    assert facts.iommu_enabled is None and facts.gpudirect_rdma is None


def test_non_nvidia_and_non_display_devices_are_not_gpus(tmp_path: Path) -> None:
    for bus, vendor, code in (("0000:01:00.0", "0x10de", "0x040300"), ("0000:02:00.0", "0x1002", "0x030000")):
        device = tmp_path / f"sys/devices/pci0000:00/{bus}"
        _write(device / "vendor", vendor)
        _write(device / "class", code)
        link = tmp_path / f"sys/bus/pci/devices/{bus}"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f"../../../devices/pci0000:00/{bus}")
    assert read_sysfs(tmp_path).gpus == ()


def test_legacy_nv_peer_mem_counts_as_gpudirect(tmp_path: Path) -> None:
    (tmp_path / "sys/module/nv_peer_mem").mkdir(parents=True)
    assert SysfsReader(tmp_path).gpudirect_rdma() is True


# --- this machine ------------------------------------------------------------------------

def test_real_sysfs_numa_nodes_match_the_os() -> None:
    facts = read_sysfs("/")
    node_dir = Path("/sys/devices/system/node")
    expected_ids = sorted(int(m.group(1)) for m in (re.match(r"node(\d+)$", n) for n in os.listdir(node_dir)) if m)
    assert [node.id for node in facts.numa_nodes] == expected_ids
    all_cpus: set[int] = set()
    for node in facts.numa_nodes:
        all_cpus |= parse_cpulist(node.cpus)
        assert node.memory_bytes is not None and node.memory_bytes > 0
        assert len(node.distances) == len(facts.numa_nodes)
    online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    assert all_cpus == online
    assert len(all_cpus) == psutil.cpu_count(logical=True)
    assert os.sched_getaffinity(0) <= all_cpus


def test_real_sysfs_gpus_are_nvidia_display_devices() -> None:
    facts = read_sysfs("/")
    for gpu in facts.gpus:
        assert gpu.vendor_id == 0x10DE
        assert gpu.class_code is not None and gpu.class_code >> 16 == 0x03
    lspci_like = [
        name for name in os.listdir("/sys/bus/pci/devices")
        if Path(f"/sys/bus/pci/devices/{name}/vendor").read_text().strip() == "0x10de"
        and Path(f"/sys/bus/pci/devices/{name}/class").read_text().strip().startswith("0x03")
    ]
    assert sorted(g.bus_id for g in facts.gpus) == sorted(lspci_like)


def test_real_sysfs_nics_have_pci_devices_and_no_unexpected_gaps() -> None:
    facts = read_sysfs("/")
    for nic in facts.nics:
        assert nic.pci_bus_id is not None and nic.pci_path
        assert Path(f"/sys/bus/pci/devices/{nic.pci_bus_id}").exists()
    assert facts.gaps == ()


@pytest.mark.parametrize(("types", "mode"), [(["identity", "identity", "DMA"], "identity"), (["DMA-FQ"], "DMA-FQ"), ([], None)])
def test_iommu_mode_is_the_default_domain_type_most_groups_have(tmp_path: Path, types: list[str], mode: str | None) -> None:
    """`/sys/kernel/iommu_groups/N/type`: `identity` under iommu=pt, `DMA` / `DMA-FQ` when DMA is translated."""
    groups = tmp_path / "sys" / "kernel" / "iommu_groups"
    groups.mkdir(parents=True)
    for number, kind in enumerate(types):
        _write(groups / str(number) / "type", kind + "\n")
    facts = read_sysfs(tmp_path)
    assert facts.iommu_mode == mode and facts.iommu_enabled is bool(types)
