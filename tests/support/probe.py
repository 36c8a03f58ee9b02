"""Helpers for the probe tests: run `probe_host()` on a sample through the fake NVML and a fake sysfs tree."""

from __future__ import annotations

from pathlib import Path

from linkscope.probes.capabilities import SoftwareFacts
from linkscope.probes.host import probe_host
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot
from support.fakes import FakeNvml, build_sysfs


def software_of(host: Host) -> SoftwareFacts:
    """The torch/NCCL facts a sample records (they come from neither NVML nor sysfs)."""
    return SoftwareFacts(
        torch=host.versions.torch,
        nccl=host.versions.nccl,
        torch_symmetric_memory=host.capabilities.torch_symmetric_memory,
    )


def probe_fake(tmp_path: Path, sample: Snapshot, fake: FakeNvml | None = None, budget_s: float = 5.0) -> Snapshot:
    """Probe `sample` as if it were this machine: fake NVML (built from it unless given) + fake sysfs."""
    root = build_sysfs(tmp_path / "root", sample.host)
    nvml = fake if fake is not None else FakeNvml.from_snapshot(sample)
    return probe_host(nvml=nvml, sysfs_root=str(root), hostname=sample.host.hostname, budget_s=budget_s,
                      software=software_of(sample.host))
