"""Measurements travel between commands: bench/import write them, check and the app read them,
alone or attached to a snapshot, and raw output of other tools reads the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.cli import main
from linkscope.files import load_measurements
from linkscope.topo.model.codec import snapshot_from_json
from support.paths import FIXTURES

REAL = FIXTURES / "real"
NVBANDWIDTH = REAL / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"
NCCL_TESTS = REAL / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"


def test_import_attach_writes_a_snapshot_carrying_the_measurements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h100-measured.json"
    assert main(["import", str(NVBANDWIDTH), "--attach", "sample:dgx-h100", "-o", str(out)]) == 0
    snapshot = snapshot_from_json(out.read_text(), str(out))
    assert snapshot.source == "sample:dgx-h100"
    assert snapshot.measurements is not None
    assert len(snapshot.measurements.peer_copies) == 56
    copy = next(c for c in snapshot.measurements.peer_copies if (c.src, c.dst) == (2, 4))
    assert copy.unidir_gbps == pytest.approx(372.96)


def test_check_uses_measurements_a_snapshot_carries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h200-measured.json"
    # H200 numbers on the H100 sample: another kind of machine, attached only with --force
    assert main(["import", str(NCCL_TESTS), "--attach", "sample:dgx-h100", "-o", str(out)]) == 2
    assert main(["import", str(NCCL_TESTS), "--attach", "sample:dgx-h100", "-o", str(out), "--force"]) == 0
    capsys.readouterr()
    assert main(["check", str(out), "--tp", "8", "--nodes", "2", "--json"]) == 0
    carried = json.loads(capsys.readouterr().out)
    assert main(["check", "sample:dgx-h100", "--tp", "8", "--nodes", "2", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert any("calibrated" in note for note in carried["assumptions"])
    assert not any("calibrated" in note for note in plain["assumptions"])
    assert carried["costs"] != plain["costs"]


def test_raw_tool_output_reads_as_measurements() -> None:
    measurements = load_measurements(str(NCCL_TESTS))
    assert measurements.source.startswith("nccl-tests")
    assert [round(r.busbw_gbps, 2) for r in measurements.collectives if not r.in_place] == [458.65, 483.77, 488.81]


@pytest.mark.parametrize(
    "argv",
    [
        ["import", str(NVBANDWIDTH), "--attach", "sample:dgx-h100"],
        ["import", str(NVBANDWIDTH), "--attach", "sample:no-such", "-o", "/tmp/linkscope-never-written.json"],
        ["bench", "collectives", "--backend", "gloo", "--attach", "sample:dgx-h100"],
        ["open", "--measurements", str(NVBANDWIDTH)],
        ["open", "sample:dgx-h100", "--measurements", "/no/such/file.txt"],
        ["check", "sample:dgx-h100", "--tp", "8", "--measurements", str(REAL / "topo" / "rtx4090-8gpu-all-sys-tabs.txt")],
    ],
)
def test_bad_measurement_options_are_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("linkscope: error: ") and err.count("\n") == 1
    assert not Path("/tmp/linkscope-never-written.json").exists()

