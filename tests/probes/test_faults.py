"""Fault scenarios, each named after the failure it models: the probe records a gap and goes on."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest

from linkscope.probes.host import probe_host
from linkscope.topo.model.host import LinkKind
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.fakes import FakeNvml, build_sysfs
from support.fakes.fake_nvml import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
)
from support.paths import ROOT
from support.probe import probe_fake, software_of


def _notes(snapshot: Snapshot) -> list[str]:
    return [value for name, value in snapshot.meta if name == "note"]


def _reasons(snapshot: Snapshot) -> dict[str, str]:
    return {gap.subject: gap.reason for gap in snapshot.gaps}


@pytest.mark.parametrize(
    ("code", "reason", "note_words"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, "LibraryNotFound", "not found"),
        (NVML_ERROR_LIB_RM_VERSION_MISMATCH, "DriverLibraryVersionMismatch", "differ in version"),
        (NVML_ERROR_NO_PERMISSION, "NoPermission", "could not start (NoPermission)"),
    ],
    ids=["no_nvml_library", "driver_library_version_mismatch", "no_permission_at_init"],
)
def test_nvml_that_cannot_start_leaves_sysfs_gpus_numa_and_nics(tmp_path: Path, code: int, reason: str, note_words: str) -> None:
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail_init(code)
    probed = probe_fake(tmp_path, sample, fake)
    host = probed.host
    assert _reasons(probed)["nvmlInit"] == reason
    assert any(note_words in note for note in _notes(probed))
    assert [g.pci_bus_id for g in host.gpus] == [g.pci_bus_id for g in sample.host.gpus]
    assert [g.pci_path for g in host.gpus] == [g.pci_path for g in sample.host.gpus]
    assert all(g.name == "" and g.nvlinks == () for g in host.gpus)
    assert host.nics == sample.host.nics
    assert host.gpu_nic == sample.host.gpu_nic
    assert host.numa_nodes == sample.host.numa_nodes
    assert fake.total_calls == 1


def test_one_gpu_lost_the_others_still_reported(tmp_path: Path) -> None:
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    fake.lose_gpu(3)
    probed = probe_fake(tmp_path, sample, fake)
    assert [g.index for g in probed.host.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert list(probed.host.gpus) == [g for g in sample.host.gpus if g.index != 3]
    assert len(probed.host.links) == 21
    assert {link.token for link in probed.host.links} == {"NV18"}
    assert _reasons(probed) == {"nvmlDeviceGetHandleByIndex(gpu 3)": "GpuIsLost"}
    assert any("not reported: 3" in note for note in _notes(probed))


def test_gpu_lost_in_the_middle_of_reading_it_is_left_out(tmp_path: Path) -> None:
    sample = load_sample("pcie-l40s-8")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail("nvmlDeviceGetMemoryInfo", 15, gpu=5)
    probed = probe_fake(tmp_path, sample, fake)
    assert [g.index for g in probed.host.gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert fake.calls["nvmlDeviceGetCudaComputeCapability"] == 7, "no further calls for the lost GPU"


def test_not_supported_on_one_call_for_one_gpu(tmp_path: Path) -> None:
    sample = load_sample("dgx-a100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", NVML_ERROR_NOT_SUPPORTED, gpu=2)
    probed = probe_fake(tmp_path, sample, fake)
    assert probed.host.gpus[2].pcie_width_current is None
    assert probed.host.gpus[2].pcie_width_max == sample.host.gpus[2].pcie_width_max
    assert [g for i, g in enumerate(probed.host.gpus) if i != 2] == [g for i, g in enumerate(sample.host.gpus) if i != 2]
    assert probed.host.links == sample.host.links
    assert _reasons(probed) == {"nvmlDeviceGetCurrPcieLinkWidth(gpu 2)": "NotSupported"}


def test_no_permission_on_p2p_status_keeps_the_link_matrix(tmp_path: Path) -> None:
    sample = load_sample("dgx1-v100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail("nvmlDeviceGetP2PStatus", NVML_ERROR_NO_PERMISSION)
    probed = probe_fake(tmp_path, sample, fake)
    assert probed.host.matrix_tokens() == sample.host.matrix_tokens()
    assert all(link.p2p is None for link in probed.host.links)
    [gap] = probed.gaps
    assert gap.reason == "NoPermission"
    assert gap.subject == "nvmlDeviceGetP2PStatus (112x: gpu 0, gpu 1, read; gpu 0, gpu 1, write; gpu 0, gpu 1, nvlink; ...)"


def test_field_values_not_supported_falls_back_to_per_link_calls(tmp_path: Path) -> None:
    """An older driver without batched NVLink fields: the probe asks link by link and gets the same answer."""
    sample = load_sample("dgx1-v100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail("nvmlDeviceGetFieldValues", NVML_ERROR_NOT_SUPPORTED)
    probed = probe_fake(tmp_path, sample, fake)
    assert probed.host == sample.host
    assert fake.calls["nvmlDeviceGetNvLinkState"] == 8 * 7, "6 links, then the 7th answers InvalidArgument"


def test_function_not_found_is_recorded_once(tmp_path: Path) -> None:
    """An old driver without nvmlDeviceGetNvLinkRemoteDeviceType: one gap, not one per link."""
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail("nvmlDeviceGetNvLinkRemoteDeviceType", NVML_ERROR_FUNCTION_NOT_FOUND)
    probed = probe_fake(tmp_path, sample, fake)
    assert _reasons(probed) == {"nvmlDeviceGetNvLinkRemoteDeviceType": "FunctionNotFound"}
    assert all(port.remote_type is None for gpu in probed.host.gpus for port in gpu.nvlinks)


@pytest.mark.parametrize(
    "function",
    ["nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetGpuFabricInfoV"],
)
def test_functions_newer_than_the_driver_leave_no_gap(tmp_path: Path, function: str) -> None:
    """pynvml raises FunctionNotFound when the driver's library lacks a symbol (R535 has no NumaNodeId);
    for these optional calls that is a normal answer, and the CUDA version comes from the plain call."""
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    fake.fail(function, NVML_ERROR_FUNCTION_NOT_FOUND)
    probed = probe_fake(tmp_path, sample, fake)
    assert probed.gaps == ()
    assert probed.host.versions.cuda_driver == sample.host.versions.cuda_driver
    if function != "nvmlDeviceGetGpuFabricInfoV":
        assert probed.host == sample.host


def test_hung_p2p_call_returns_within_the_budget_with_a_gap(tmp_path: Path) -> None:
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    release = fake.hang("nvmlDeviceGetP2PStatus")
    try:
        started = time.perf_counter()
        probed = probe_fake(tmp_path, sample, fake, budget_s=0.3)
        elapsed_s = time.perf_counter() - started
    finally:
        release.set()
    assert elapsed_s < 2.0
    [gap] = probed.gaps
    assert gap.subject == "nvmlDeviceGetP2PStatus(gpu 0, gpu 1, read)"
    assert gap.reason.startswith("timed out after 0.3 s")
    assert list(probed.host.gpus) == list(sample.host.gpus), "GPUs read before the hang are kept"
    assert probed.host.matrix_tokens() == sample.host.matrix_tokens()
    assert all(link.p2p is None for link in probed.host.links)


def test_hung_init_gives_sysfs_only_snapshot_with_a_note(tmp_path: Path) -> None:
    sample = load_sample("consumer-2gpu")
    fake = FakeNvml.from_snapshot(sample)
    release = fake.hang("nvmlInit")
    try:
        probed = probe_fake(tmp_path, sample, fake, budget_s=0.2)
    finally:
        release.set()
    assert _reasons(probed) == {"nvmlInit": "timed out after 0.2 s; the rest of NVML was not read"}
    assert any("did not answer within 0.2 s" in note for note in _notes(probed))
    assert len(probed.host.gpus) == 2
    assert probed.host.link(0, 1).kind is LinkKind.PHB


def test_probe_calls_only_nvml_getters(tmp_path: Path) -> None:
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    probe_fake(tmp_path, sample, fake)
    assert fake.calls
    allowed = ("nvmlInit", "nvmlShutdown", "nvmlSystemGet", "nvmlDeviceGet")
    assert [name for name in fake.calls if not name.startswith(allowed)] == []


SETTER = re.compile(r"nvml\w*?(Set|Reset|Clear|Modify|Remove|Discover|Register|Create|Destroy|Freeze)\w*")


def test_no_nvml_setter_is_referenced_in_probes() -> None:
    offenders = []
    for path in sorted((ROOT / "probes").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if SETTER.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_setter_pattern_catches_setters() -> None:
    """The pattern above would catch the calls it is meant to forbid."""
    for name in ("nvmlDeviceSetPersistenceMode", "nvmlDeviceResetNvLinkErrorCounters", "nvmlDeviceClearCpuAffinity",
                 "nvmlSystemSetNvlinkBwMode", "nvmlDeviceModifyDrainState"):
        assert SETTER.search(name), name
    assert not SETTER.search("nvmlDeviceGetP2PStatus")


def test_gpu_on_the_pci_bus_but_missing_from_nvml_is_noted(tmp_path: Path) -> None:
    sample = load_sample("consumer-2gpu")
    one_gpu = dataclasses.replace(sample.host, gpus=sample.host.gpus[:1], links=())
    fake = FakeNvml(one_gpu)
    probed = probe_fake(tmp_path, sample, fake)
    assert len(probed.host.gpus) == 1
    assert any("sysfs lists 2 NVIDIA GPUs but NVML counts 1" in note for note in _notes(probed))


class _AncestorSaysSys(FakeNvml):
    """A driver whose common-ancestor answer disagrees with the PCI tree."""

    def nvmlDeviceGetTopologyCommonAncestor(self, a: object, b: object) -> int:
        super().nvmlDeviceGetTopologyCommonAncestor(a, b)  # type: ignore[arg-type]
        return 50


def test_pci_paths_win_over_a_disagreeing_common_ancestor_and_the_disagreement_is_a_gap(tmp_path: Path) -> None:
    sample = load_sample("pcie-l40s-8")
    probed = probe_fake(tmp_path, sample, _AncestorSaysSys(sample.host))
    assert probed.host.links == sample.host.links
    not_sys = [link for link in sample.host.links if link.kind is not LinkKind.SYS]
    [gap] = probed.gaps
    assert gap.subject == f"pair topology ({len(not_sys)}x: gpu 0, gpu 1; gpu 0, gpu 2; gpu 0, gpu 3; ...)"
    assert gap.reason.startswith("nvmlDeviceGetTopologyCommonAncestor says SYS")


def test_common_ancestor_decides_when_sysfs_has_no_gpu_paths(tmp_path: Path) -> None:
    """E.g. a container that hides /sys/bus/pci: the pair classes come from NVML alone."""
    sample = load_sample("pcie-l40s-8")
    no_gpus_in_sysfs = dataclasses.replace(sample.host, gpus=())
    root = build_sysfs(tmp_path / "root", no_gpus_in_sysfs)
    probed = probe_host(nvml=FakeNvml.from_snapshot(sample), sysfs_root=str(root), hostname="x", budget_s=5.0,
                        software=software_of(sample.host))
    assert probed.host.matrix_tokens() == sample.host.matrix_tokens()
    assert all(gpu.pci_path == () for gpu in probed.host.gpus)
    [gap] = probed.gaps
    assert gap.subject.startswith("sysfs PCI device (8x: 00000000:18:00.0;")
