"""`import` tables at the widths people read them: every measured figure whole, never `45…`."""

from __future__ import annotations

import pytest

from linkscope.cli import main
from linkscope.render import console as console_module
from linkscope.topo.cost.expect import row_expectations
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "nccl_tests"
H200 = REAL / "h200-2node-16gpu-baremetal-all_reduce.txt"


@pytest.mark.parametrize("width", [80, 120])
def test_measured_figures_are_never_cut(width: int, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(console_module, "PIPED_TABLE_WIDTH", width)
    assert main(["import", str(H200), "--expect", "sample:dgx-h100", "--force"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= width
    for figure in ("4389.5", "458.65", "37218", "486.84"):  # time and busbw, read by hand
        assert figure in out
    first = row_expectations(read_measurements(H200.read_text(), H200.name), load_sample("dgx-h100")).all()[0]
    assert f"{first.expected_gbps:.0f}" in out and f"{first.ratio:.2f}" in out  # the model's figures, whole
    assert "left out" in out if width == 80 else True
    assert "all_reduce" in out and "…" not in out
