"""Live sampler: rates from counter deltas through the fake NVML, driven by a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from linkscope.probes.live import LiveSampler
from linkscope.topo.samples import load_sample
from support.fakes import FakeNvml
from support.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_first_reading_has_no_rates_then_deltas_give_gbps() -> None:
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    clock = Clock()
    sampler = LiveSampler(fake, clock=clock, per_link=True)
    first = sampler.read()
    assert first.interval_s is None and len(first.gpus) == 8
    assert all(gpu.nvlink_tx_gbps is None for gpu in first.gpus)
    fake.advance(2.0, nvlink_gbps=10.0, errors=3)
    clock.now_s += 2.0
    second = sampler.read()
    assert second.interval_s == 2.0
    gpu = second.gpus[0]
    # 18 links x 10 GB/s, counters kept in whole KiB
    assert gpu.nvlink_tx_gbps == pytest.approx(180.0, rel=1e-6)
    assert gpu.nvlink_rx_gbps == pytest.approx(180.0, rel=1e-6)
    assert len(gpu.links) == 18 and gpu.links[0].tx_gbps == pytest.approx(10.0, rel=1e-6)
    # the per-link error fields are read first: 3 new errors of each kind on each of 18 links
    assert dict(gpu.nvlink_error_deltas) == {"replay": 54, "recovery": 54, "crc": 54}
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert second.gaps == ()


def test_degraded_gpu_counts_only_its_active_links() -> None:
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100-degraded"))
    clock = Clock()
    sampler = LiveSampler(fake, clock=clock)
    sampler.read()
    fake.advance(1.0, nvlink_gbps=1.0)
    clock.now_s += 1.0
    reading = sampler.read()
    assert reading.gpus[3].nvlink_tx_gbps == pytest.approx(16.0, rel=1e-6)
    assert reading.gpus[0].nvlink_tx_gbps == pytest.approx(18.0, rel=1e-6)
    assert reading.gpus[0].links == (), "per-link rates only on request"


def test_pcie_throughput_and_pcie_only_gpus() -> None:
    fake = FakeNvml.from_snapshot(load_sample("pcie-l40s-8"))
    fake.pcie_kb_per_s[2] = (1_000_000, 500_000)
    sampler = LiveSampler(fake)
    reading = sampler.read()
    gpu = reading.gpus[2]
    assert gpu.nvlink_tx_gbps is None and gpu.nvlink_errors == ()
    assert gpu.pcie_tx_gbps == pytest.approx(1.024)
    assert gpu.pcie_rx_gbps == pytest.approx(0.512)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 16


def test_one_field_query_per_gpu_per_reading() -> None:
    fake = FakeNvml.from_snapshot(load_sample("dgx-a100"))
    sampler = LiveSampler(fake, with_pcie=False)
    sampler.read()
    before = fake.calls["nvmlDeviceGetFieldValues"]
    sampler.read()
    assert fake.calls["nvmlDeviceGetFieldValues"] - before == 8
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_pcie_throughput_not_supported_is_a_gap_not_a_crash() -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    fake.fail("nvmlDeviceGetPcieThroughput", NVML_ERROR_NOT_SUPPORTED, gpu=1)
    reading = LiveSampler(fake).read()
    assert reading.gpus[1].pcie_tx_gbps is None and reading.gpus[0].pcie_tx_gbps == 0.0
    assert {gap.subject for gap in reading.gaps} == {"nvmlDeviceGetPcieThroughput(gpu 1)"}


def test_no_nvml_gives_an_unavailable_reading() -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    reading = LiveSampler(fake).read()
    assert not reading.available and reading.gpus == ()
    assert [(g.subject, g.reason) for g in reading.gaps] == [("nvmlInit", "LibraryNotFound")]


def test_narrow_pcie_link_is_flagged() -> None:
    sample = load_sample("consumer-2gpu")
    fake = FakeNvml.from_snapshot(sample)
    original = fake.nvmlDeviceGetCurrPcieLinkWidth
    fake.nvmlDeviceGetCurrPcieLinkWidth = lambda handle: 8 if handle.index == 0 else original(handle)  # type: ignore[method-assign]
    reading = LiveSampler(fake).read()
    assert reading.gpus[0].pcie_downgraded and not reading.gpus[1].pcie_downgraded


def test_close_shuts_nvml_down() -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    with LiveSampler(fake) as sampler:
        sampler.read()
    assert fake.calls["nvmlShutdown"] == 1 and not fake.initialized


def test_links_whose_state_field_says_traffic_disabled_are_not_sampled() -> None:
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    fake.set_field_link_state(0, 0, 3)  # NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED
    fake.set_field_link_state(0, 1, 2)  # NVML_NVLINK_STATE_SLEEP: trained, low power
    reading = LiveSampler(fake, per_link=True, with_pcie=False).read()
    assert [rate.link for rate in reading.gpus[0].links] == list(range(1, 18))
    assert len(reading.gpus[1].links) == 18


def test_without_the_aggregate_counter_distinct_links_are_summed() -> None:
    """A driver that refuses scopeId UINT_MAX: the total is the sum of the per-link rates."""
    from support.fakes.fake_nvml import DriverQuirks

    fake = FakeNvml.from_snapshot(load_sample("dgx-a100"), DriverQuirks(aggregate_throughput=False))
    clock = Clock()
    sampler = LiveSampler(fake, clock=clock, with_pcie=False)
    sampler.read()
    for link in range(12):
        fake.counters.nvlink_tx_kib[(0, link)] = (link + 1) * 1_000_000
        fake.counters.nvlink_rx_kib[(0, link)] = 1_000_000
    clock.now_s += 1.0
    gpu = sampler.read().gpus[0]
    assert gpu.nvlink_tx_gbps == pytest.approx(78 * 1_000_000 * 1024 / 1e9)
    assert gpu.nvlink_rx_gbps is None, "equal links without an aggregate: the total is unknown"
    assert gpu.links == ()


def test_totals_are_read_from_the_aggregate_scope_only_unless_per_link_is_asked() -> None:
    fake = FakeNvml.from_snapshot(load_sample("dgx-a100"))
    sampler = LiveSampler(fake, with_pcie=False)
    sampler.read()
    asked: list[tuple[int, int]] = []
    original = fake.nvmlDeviceGetFieldValues

    def recorded(handle: Any, field_ids: list[Any]) -> list[Any]:
        asked.extend(field_ids)
        return original(handle, field_ids)

    fake.nvmlDeviceGetFieldValues = recorded  # type: ignore[method-assign]
    sampler.read()
    throughput = {scope for field_id, scope in asked if field_id in (138, 139)}
    assert throughput == {0xFFFFFFFF}
