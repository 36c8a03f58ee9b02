"""`linkscope show` on every real `nvidia-smi topo -m` output prints the matrix nvidia-smi printed."""

from __future__ import annotations

import json

import pytest

from linkscope.cli import main
from support.samples import REAL_TOPO_DIR


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


def _printed_as_read(file_name: str) -> bool:
    """Whether nvidia-smi's own words can be compared one by one: a `topo -m` matrix whose GPU rows hold one
    current-vocabulary token per column (no fused `SYSSYS`, no old `SOC`, the header split cleanly); the others
    are checked cell by cell by the corpus test (tests/topo/formats/test_corpus.py)."""
    text = (REAL_TOPO_DIR / file_name).read_text()
    rows = _printed_rows(file_name)
    header = next(line.split() for line in text.splitlines() if line.split()[:1] == ["GPU0"])
    columns = [word for word in header if word not in ("CPU", "NUMA", "GPU", "Affinity", "ID")]
    tokens = {"X", "PIX", "PXB", "PHB", "NODE", "SYS"}
    return bool(rows) and all(all(word in tokens or (word.startswith("NV") and word[2:].isdigit())
                                  for word in row[1:1 + len(columns)]) for row in rows) and \
        all(len(row) > len(columns) or len(row) == len(columns) + 1 for row in rows)


REAL_FILES = sorted(path.name for path in REAL_TOPO_DIR.glob("*.txt") if _printed_as_read(path.name))


def test_the_token_by_token_comparison_covers_most_real_files() -> None:
    assert len(REAL_FILES) >= 25


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
