"""`linkscope show` on every real `nvidia-smi topo -m` output prints the matrix nvidia-smi printed."""

from __future__ import annotations

import json

import pytest

from linkscope.cli import main
from support.samples import REAL_TOPO_DIR

REAL_FILES = sorted(path.name for path in REAL_TOPO_DIR.glob("*.txt"))


def _printed_rows(file_name: str) -> list[list[str]]:
    """The GPU rows of the first matrix in the file, split on whitespace, up to the first blank line."""
    lines = [line for line in (REAL_TOPO_DIR / file_name).read_text().splitlines() if not line.startswith("#")]
    header_at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"])
    rows = []
    for line in lines[header_at + 1 :]:
        if not line.strip():
            break
        if line.split()[0].startswith("GPU"):
            rows.append(line.split())
    return rows


@pytest.mark.parametrize("file_name", REAL_FILES)
def test_show_prints_the_matrix_nvidia_smi_printed(file_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(REAL_TOPO_DIR / file_name), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    gpu_count, nic_count = len(shown["gpus"]), len(shown["nics"])
    printed = _printed_rows(file_name)
    assert len(printed) == gpu_count
    for index, row in enumerate(printed):
        assert row[0] == f"GPU{index}"
        assert shown["matrix"][index] == row[1 : 1 + gpu_count]
        assert shown["gpu_nic"][index] == row[1 + gpu_count : 1 + gpu_count + nic_count]


@pytest.mark.parametrize("file_name", REAL_FILES)
def test_show_text_of_real_file_has_every_printed_token(file_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(REAL_TOPO_DIR / file_name)]) == 0
    out = capsys.readouterr().out
    for row in _printed_rows(file_name):
        for token in row[1:]:
            if token[:1].isalpha() and token != "N/A":
                assert token in out
