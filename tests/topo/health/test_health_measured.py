"""doctor's measurement rule: real nvbandwidth figures on the box they came from are healthy; the same
figures with one pair degraded are found, with the pair, its link and the ratio as evidence."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from linkscope.cli import main
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.health.finding import HealthContext
from linkscope.topo.health.measured import measured_below_expected
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES

NVBANDWIDTH = FIXTURES / "real" / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"


def _measured():
    return read_measurements(NVBANDWIDTH.read_text(), NVBANDWIDTH.name)


def _degraded(fraction: float):
    measured = _measured()
    copies = list(measured.peer_copies)
    first = copies[0]
    copies[0] = dataclasses.replace(first, unidir_gbps=first.unidir_gbps * fraction, size_bytes=first.size_bytes or 1 << 30)
    return dataclasses.replace(measured, peer_copies=tuple(copies)), first


def test_real_h100_copies_on_an_h100_box_are_healthy() -> None:
    assert list(measured_below_expected(HealthContext(load_sample("dgx-h100"), _measured()))) == []


@pytest.mark.parametrize(("fraction", "severity"), [(0.6, "warning"), (0.3, "error")])
def test_a_pair_below_expected_is_found(fraction: float, severity: str) -> None:
    measured, pair = _degraded(fraction)
    (finding,) = measured_below_expected(HealthContext(load_sample("dgx-h100"), measured))
    assert finding.code == "measured-below-expected" and finding.severity == severity
    assert finding.gpus == tuple(sorted({pair.src, pair.dst}))
    assert "NV18" in finding.evidence[0] and f"GPU{pair.src}" in finding.evidence[0]


def test_doctor_reports_it_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from linkscope.topo.model.codec import measurements_to_json

    measured, _ = _degraded(0.3)
    path = tmp_path / "measured.json"
    path.write_text(measurements_to_json(measured))
    assert main(["doctor", "sample:dgx-h100", "--measurements", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in report["findings"]] == ["measured-below-expected"]
