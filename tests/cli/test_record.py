"""`linkscope record`: counters through the live sampler on a fake NVML, written atomically, read by doctor,
replayed by the Monitor tab."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from linkscope.probes.record import ClockReader, RecordUnavailable, record_snapshot, replay_readings
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.files import write_text_file
from linkscope.topo.health.finding import HealthContext
from linkscope.topo.health.rules import run_health
from linkscope.topo.model.codec import snapshot_from_json, snapshot_to_json
from linkscope.topo.samples import load_sample
from support.fakes import FakeNvml, build_sysfs
from support.fakes.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED
from support.layout import assert_one_line_error, run_cli


class Clock:
    """A monotonic clock the fake sleep moves; each sleep also moves the fake NVML's counters on."""

    def __init__(self, fake: FakeNvml, nvlink_gbps: float = 0.0, errors_per_s: int = 0) -> None:
        self.now_s = 50.0
        self.fake = fake
        self.nvlink_gbps = nvlink_gbps
        self.errors_per_s = errors_per_s
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds
        self.fake.advance(seconds, nvlink_gbps=self.nvlink_gbps, errors=int(self.errors_per_s * seconds))


def _record(tmp_path: Path, sample: str, seconds: float = 3.0, interval_s: float = 1.0, **clock: object) -> tuple:
    snapshot = load_sample(sample)
    fake = FakeNvml.from_snapshot(snapshot)
    root = build_sysfs(tmp_path / "root", snapshot.host)
    ticking = Clock(fake, **clock)  # type: ignore[arg-type]
    recorded, interrupted = record_snapshot(fake, seconds, interval_s, sysfs_root=str(root), clock=ticking,
                                            sleep=ticking.sleep)
    return recorded, interrupted, fake, ticking


def test_readings_at_every_interval_with_rates_errors_and_clocks(tmp_path: Path) -> None:
    recorded, interrupted, fake, clock = _record(tmp_path, "dgx-h100", nvlink_gbps=10.0, errors_per_s=2)
    recording = recorded.recording
    assert not interrupted and recording is not None
    assert [sample.t_s for sample in recording.samples] == [0.0, 1.0, 2.0, 3.0]
    assert clock.slept == [1.0, 1.0, 1.0]
    gpu = recording.samples[2].gpus[5]
    assert gpu.nvlink_tx_gbps == pytest.approx(180.0, rel=1e-6) and len(gpu.links) == 18
    assert dict(gpu.nvlink_errors)["replay"] == 2 * 2 * 18, "2 errors a second on each of 18 links, over 2 s"
    assert (gpu.sm_clock_mhz, gpu.memory_clock_mhz) == (1980, 2619)
    assert (gpu.pcie_gen_current, gpu.pcie_width_current) == (5, 16)
    assert recorded.host.gpus[0].name == "NVIDIA H100 80GB HBM3", "the recording sits in this machine's snapshot"
    assert fake.calls["nvmlShutdown"] == fake.calls["nvmlInit"] == 3, "probe, sampler and clock reader each let go of NVML"


def test_doctor_reads_error_growth_from_a_recording(tmp_path: Path) -> None:
    growing, _, _, _ = _record(tmp_path / "a", "dgx-h100", errors_per_s=5)
    finding = next(f for f in run_health(HealthContext(growing)) if f.code == "nvlink-errors-growing")
    assert finding.gpus == tuple(range(8))
    # 5 errors a second on each of the 18 links, for 3 s
    assert finding.evidence[0] == "GPU0: crc +270, recovery +270, replay +270 in 3 s"  # the per-link error fields
    quiet, _, _, _ = _record(tmp_path / "b", "dgx-h100")
    assert "nvlink-errors-growing" not in [f.code for f in run_health(HealthContext(quiet))]


def test_recording_survives_json_and_replays_as_live_readings(tmp_path: Path) -> None:
    recorded, _, _, _ = _record(tmp_path, "dgx-h100-degraded", nvlink_gbps=1.0, errors_per_s=1)
    loaded = snapshot_from_json(snapshot_to_json(recorded))
    assert loaded.recording == recorded.recording
    assert loaded.recording is not None
    readings = replay_readings(loaded.recording, loaded.host)
    assert [reading.interval_s for reading in readings] == [None, 1.0, 1.0, 1.0]
    gpu3 = readings[1].gpus[3]
    assert gpu3.nvlink_tx_gbps == pytest.approx(16.0, rel=1e-6)
    # GPU3 of the degraded sample has 16 links up, each counting one error of each kind a second
    assert dict(gpu3.nvlink_error_deltas) == {"crc": 16, "replay": 16, "recovery": 16}
    assert (gpu3.pcie_width_current, gpu3.pcie_width_max, gpu3.pcie_downgraded) == (8, 16, True)


def test_a_clock_the_driver_does_not_report_is_missing_not_fatal(tmp_path: Path) -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    fake.fail("nvmlDeviceGetClockInfo", NVML_ERROR_NOT_SUPPORTED, gpu=1)
    reader = ClockReader(fake)
    assert reader.read(0) == (1980, 2619) and reader.read(1) == (None, None)
    assert {gap.subject for gap in reader.query.gaps} == {"nvmlDeviceGetClockInfo(gpu 1)"}  # type: ignore[union-attr]


def test_no_nvml_means_nothing_to_record(tmp_path: Path) -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(RecordUnavailable, match="nvmlInit: LibraryNotFound"):
        record_snapshot(fake, 1.0, 1.0, sysfs_root=str(tmp_path))
    with pytest.raises(RecordUnavailable, match="not installed"):
        record_snapshot(None, 1.0, 1.0, sysfs_root=str(tmp_path))


def test_ctrl_c_keeps_what_was_read(tmp_path: Path) -> None:
    snapshot = load_sample("consumer-2gpu")
    fake = FakeNvml.from_snapshot(snapshot)
    clock = Clock(fake)

    def sleep(seconds: float) -> None:
        if len(clock.slept) == 2:
            raise KeyboardInterrupt
        clock.sleep(seconds)

    recorded, interrupted = record_snapshot(fake, 10.0, 1.0, sysfs_root=str(build_sysfs(tmp_path / "r", snapshot.host)),
                                            clock=clock, sleep=sleep)
    assert interrupted and recorded.recording is not None and len(recorded.recording.samples) == 3


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "rec.json"
    target.write_text("old")
    write_text_file(str(target), '{"new": true}')
    assert target.read_text() == '{"new": true}\n'
    assert os.listdir(tmp_path) == ["rec.json"]
    with pytest.raises(InputError, match="cannot write"):
        write_text_file(str(tmp_path / "missing" / "rec.json"), "{}")


def test_record_command_writes_a_snapshot_with_the_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    monkeypatch.setattr("linkscope.probes.nvml.load_pynvml", lambda: fake)
    output = tmp_path / "rec.json"
    code, out, _ = run_cli(["record", "-o", str(output), "--seconds", "0.2", "--interval", "0.1"], capsys)
    assert code == 0 and "recorded 3 readings of 2 GPU(s)" in out
    data = json.loads(output.read_text())
    assert len(data["recording"]["samples"]) == 3 and data["recording"]["interval_s"] == 0.1


def test_record_command_without_gpu_counters_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml.from_snapshot(load_sample("consumer-2gpu"))
    fake.fail_init(NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr("linkscope.probes.nvml.load_pynvml", lambda: fake)
    output = tmp_path / "rec.json"
    code, _, err = run_cli(["record", "-o", str(output), "--seconds", "1"], capsys)
    assert_one_line_error(code, err, "no live counters", "LibraryNotFound")
    assert not output.exists()


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--seconds", "0"], "--seconds"),
    (["--seconds", "2", "--interval", "5"], "--interval"),
    (["--seconds", "2", "--interval", "-1"], "--interval"),
])
def test_record_command_bad_times(argv: list[str], fragment: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["record", "-o", str(tmp_path / "x.json"), *argv], capsys)
    assert_one_line_error(code, err, fragment)


def test_record_command_refuses_an_unwritable_output_before_recording(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    code, _, err = run_cli(["record", "-o", str(tmp_path / "no" / "x.json"), "--seconds", "1"], capsys)
    assert_one_line_error(code, err, "cannot write")


def test_snapshot_without_recording_field_still_opens(tmp_path: Path) -> None:
    """Snapshots written before recordings existed have no `recording` key and still load."""
    data = json.loads(snapshot_to_json(load_sample("dgx-h100")))
    del data["recording"]
    assert snapshot_from_json(json.dumps(data)).recording is None
    assert dataclasses.replace(load_sample("dgx-h100")).recording is None
