"""The key probe test: sample -> fake NVML + fake sysfs -> probe_host() -> the sample's host again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from linkscope.topo.model.codec import snapshot_from_json, snapshot_to_json
from linkscope.topo.samples import load_sample, sample_names
from support.fakes import FakeNvml
from support.probe import probe_fake


def _differences(got: object, want: object, path: str = "host") -> list[str]:
    """Field paths where two model objects differ (for a readable failure)."""
    if dataclasses.is_dataclass(got) and dataclasses.is_dataclass(want):
        found = []
        for field in dataclasses.fields(want):
            found += _differences(getattr(got, field.name), getattr(want, field.name), f"{path}.{field.name}")
        return found
    if isinstance(got, tuple) and isinstance(want, tuple) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in _differences(g, w, f"{path}[{i}]")]
    return [] if got == want else [f"{path}: got {got!r}, want {want!r}"]


@pytest.mark.parametrize("name", sample_names())
def test_probe_of_fake_machine_gives_the_sample_back(tmp_path: Path, name: str) -> None:
    sample = load_sample(name)
    probed = probe_fake(tmp_path, sample)
    assert _differences(probed.host, sample.host) == []
    assert probed.gaps == ()
    assert probed.source == "probe"


@pytest.mark.parametrize("name", ["dgx-h100", "dgx1-v100", "pcie-l40s-8"])
def test_probed_snapshot_survives_json_round_trip(tmp_path: Path, name: str) -> None:
    probed = probe_fake(tmp_path, load_sample(name))
    assert snapshot_from_json(snapshot_to_json(probed)) == probed


def test_degraded_nvswitch_gpu_gives_its_pairs_the_smaller_link_count(tmp_path: Path) -> None:
    probed = probe_fake(tmp_path, load_sample("dgx-h100-degraded"))
    matrix = probed.host.matrix_tokens()
    assert matrix[3] == ["NV16", "NV16", "NV16", "X", "NV16", "NV16", "NV16", "NV16"]
    assert matrix[0][1] == "NV18"


def test_direct_nvlink_pairs_count_ports_to_that_peer(tmp_path: Path) -> None:
    """DGX-1 hybrid cube mesh: GPU0 has 1 link to GPU1 and GPU2, 2 to GPU3 and GPU4, none to 5-7."""
    probed = probe_fake(tmp_path, load_sample("dgx1-v100"))
    assert probed.host.matrix_tokens()[0] == ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert probed.host.link(0, 3).nvlink_gen == 2


def test_probe_batches_nvlink_state_and_version_into_one_field_query_per_gpu(tmp_path: Path) -> None:
    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    probe_fake(tmp_path, sample, fake)
    assert fake.calls["nvmlDeviceGetFieldValues"] == 8
    assert fake.calls["nvmlDeviceGetNvLinkState"] == 0
    assert fake.calls["nvmlDeviceGetNvLinkVersion"] == 0
    assert fake.calls["nvmlDeviceGetNvLinkRemotePciInfo"] == 8 * 18
    assert fake.calls["nvmlShutdown"] == 1
