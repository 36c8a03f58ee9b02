"""The evidence: every published nccl-tests result priced on its machine lands within 20%, outliers say why."""

from __future__ import annotations

import pytest

from linkscope.topo.cost.published import PUBLISHED, TOLERANCE, Published, markdown_table, price
from support.paths import ROOT


@pytest.mark.parametrize("row", [row for row in PUBLISHED if not row.outlier], ids=lambda row: row.machine)
def test_prediction_within_tolerance_of_the_published_busbw(row: Published) -> None:
    predicted = price(row, ROOT).busbw_gbps
    message = f"{row.machine}: predicted {predicted:.1f}, published {row.busbw_gbps}"
    assert abs(predicted / row.busbw_gbps - 1) <= TOLERANCE, message


@pytest.mark.parametrize("row", [row for row in PUBLISHED if row.outlier], ids=lambda row: row.machine)
def test_an_outlier_really_is_one(row: Published) -> None:
    """A row excused from the tolerance must be outside it: excusing a row the model meets would hide nothing."""
    predicted = price(row, ROOT).busbw_gbps
    assert abs(predicted / row.busbw_gbps - 1) > TOLERANCE


def test_the_table_covers_the_machines_the_model_must_meet() -> None:
    """NVSwitch with and without NVLS, A100 NVSwitch, DGX-1, PCIe without P2P, two-node rails."""
    met = [row for row in PUBLISHED if not row.outlier]
    algos = {(row.topology, price(row, ROOT).algo) for row in met}
    assert ("sample:dgx-h100", "nvls") in algos and ("sample:dgx-h100", "ring") in algos
    assert any(row.topology == "sample:dgx-a100" for row in met)
    assert any(row.topology == "sample:dgx1-v100" for row in met)
    assert any("no-p2p" in row.changes or "2080" in row.machine for row in met)
    assert ("sample:dgx-h100", "nvls_tree") in algos


def test_the_readme_shows_this_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert markdown_table(ROOT) in readme
