"""JSON out is standard JSON everywhere (no NaN or Infinity); one writer and one console for all commands."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from linkscope.topo.common.jsonio import json_text, read_json
from support.fuzz import REAL, ROOT, run_cli


def _strict(text: str) -> Any:
    def refuse(word: str) -> None:
        raise AssertionError(f"non-standard JSON constant {word}")

    return json.loads(text, parse_constant=refuse)


def test_estimate_of_one_rank_is_refused() -> None:
    """Over one rank a collective moves nothing between GPUs (no time, no bandwidth): a one-line refusal, not a
    table of zeros and dashes."""
    outcome = run_cli(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "1", "--json"])
    assert outcome.status == 2 and outcome.out == "" and "--ranks" in outcome.err and "minimum 2" in outcome.err


def test_an_infinite_matrix_cell_is_refused(tmp_path: Path) -> None:
    source = REAL / "p2p" / "h100-pcie-2gpu-nvlink-bridge-p2pBandwidthLatencyTest.txt"
    for cell in ("inf", "1e999", "nan"):
        path = tmp_path / "matrix.txt"
        path.write_text(source.read_text().replace("256.62", cell))
        outcome = run_cli(["import", str(path), "--json", "-o", str(tmp_path / "out.json")])
        assert outcome.status == 2 and str(path) in outcome.err, (cell, outcome.out[:300])
        assert not (tmp_path / "out.json").exists()


def test_a_snapshot_carrying_nan_is_refused(tmp_path: Path) -> None:
    text = (ROOT / "topo" / "samples" / "dgx-h100.json").read_text()
    path = tmp_path / "nan.json"
    path.write_text(re.sub(r'"rate_gbit_per_s": [0-9.]+', '"rate_gbit_per_s": NaN', text, count=1))
    for argv in (["show", str(path), "--json"], ["import", "sample:dgx-h100", "--attach", str(path), "-o", "x"]):
        outcome = run_cli(argv)
        assert outcome.status == 2 and "NaN" in outcome.err


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_the_writer_writes_no_finite_value_as_null(value: float) -> None:
    assert _strict(json_text({"a": [1.5, value], "b": value})) == {"a": [1.5, None], "b": None}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("[" * 10_000 + "]" * 10_000, "nested deeper"), ("[" + "9" * 5000 + "]", "digits"), ("[NaN]", "NaN"),
     ("[-Infinity]", "Infinity"), ("[1e400]", "out of range")],
)
def test_the_reader_turns_decoder_limits_into_one_line(text: str, fragment: str) -> None:
    from linkscope.topo.common.errors import InputError

    with pytest.raises(InputError, match=fragment):
        read_json(text, "f.json")


def _python_files(*folders: str) -> list[Path]:
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def test_every_command_prints_through_the_safe_console() -> None:
    """`Console(` anywhere but linkscope/render/console.py would bypass the sanitiser."""
    offenders = [str(path.relative_to(ROOT)) for path in _python_files("linkscope")
                 if re.search(r"\bConsole\(", path.read_text()) and path.name != "console.py"]
    assert offenders == []


def test_json_is_written_by_one_writer() -> None:
    """`json.dump(s)` anywhere in the product but topo/common/jsonio.py could write NaN or Infinity."""
    allowed = {"topo/common/jsonio.py", "probes/bench/worker.py", "probes/bench/runner.py"}  # worker <-> spawner messages
    offenders = [str(path.relative_to(ROOT)) for path in _python_files("topo", "linkscope", "tui", "probes")
                 if re.search(r"\bjson\.dumps?\(", path.read_text()) and str(path.relative_to(ROOT)) not in allowed]
    assert offenders == []
