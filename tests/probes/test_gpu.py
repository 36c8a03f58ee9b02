"""The probe against a real NVIDIA driver (skipped on machines without one)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from linkscope.probes.host import probe_host
from linkscope.probes.live import LiveSampler
from linkscope.probes.sysfs import sysfs_bus_id
from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo


def _require_driver() -> None:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pytest.skip("needs an NVIDIA driver (libnvidia-ml.so.1)")


@pytest.mark.gpu
def test_gpu_probe_reads_every_gpu_with_its_sysfs_facts() -> None:
    _require_driver()
    snapshot = probe_host(budget_s=10.0)
    print(snapshot.gaps)
    host = snapshot.host
    assert host.gpus, snapshot.meta
    assert not [gap for gap in snapshot.gaps if gap.reason.startswith(("TypeError", "AttributeError", "ValueError"))]
    for gpu in host.gpus:
        assert gpu.name and gpu.uuid and gpu.uuid.startswith("GPU-")
        assert gpu.pci_bus_id and gpu.pci_path
        numa_file = Path("/sys/bus/pci/devices") / sysfs_bus_id(gpu.pci_bus_id) / "numa_node"
        numa = int(numa_file.read_text())
        assert gpu.numa_node == (numa if numa >= 0 else None)
        assert gpu.memory_total_bytes and gpu.memory_total_bytes > 1 << 30


@pytest.mark.gpu
def test_gpu_probe_matrix_matches_nvidia_smi_topo() -> None:
    _require_driver()
    if shutil.which("nvidia-smi") is None:
        pytest.skip("needs nvidia-smi")
    text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=True, timeout=60).stdout
    expected = read_nvsmi_topo(text, "nvidia-smi topo -m").host
    probed = probe_host(budget_s=10.0).host
    assert probed.matrix_tokens() == expected.matrix_tokens()
    if [nic.name for nic in probed.nics] == [nic.name for nic in expected.nics]:
        assert probed.gpu_nic == expected.gpu_nic


@pytest.mark.gpu
def test_gpu_live_sampler_reads_twice() -> None:
    _require_driver()
    with LiveSampler(with_pcie=True) as sampler:
        first = sampler.read()
        second = sampler.read()
    assert first.available and len(second.gpus) == len(first.gpus) > 0
    assert second.interval_s is not None and second.interval_s > 0
