"""`linkscope probe`: works on this machine without a GPU, prints the identity table first, writes snapshots."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from linkscope.commands import probe_cmd
from linkscope.topo.common.errors import InputError
from linkscope.topo.model.codec import snapshot_from_json
from linkscope.topo.samples import load_sample
from support.paths import ROOT
from support.probe import probe_fake


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="linkscope")
    probe_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["probe", *argv])
    return int(args.run(args))


@pytest.fixture
def fake_dgx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `probe_host()` probe a fake DGX H100 instead of this machine."""
    snapshot = probe_fake(tmp_path, load_sample("dgx-h100"))
    monkeypatch.setattr("linkscope.probes.host.probe_host", lambda **_: snapshot)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setenv("COLUMNS", "200")


def test_probe_json_on_this_machine_exits_0_and_loads_back(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    snapshot = snapshot_from_json(json.dumps(data["snapshot"]))
    assert snapshot.source == "probe"
    assert snapshot.host.numa_nodes
    assert set(data["identity"]) == {"device_order", "visible_devices", "notes", "rows"}


def test_probe_console_script_json_runs_as_a_process() -> None:
    result = subprocess.run([sys.executable, "-m", "linkscope", "probe", "--json"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    gaps = data["snapshot"]["gaps"]
    notes = [value for name, value in data["snapshot"]["meta"] if name == "note"]
    if not data["snapshot"]["hosts"][0]["gpus"]:
        assert gaps and notes, "a machine without GPUs says why"


def test_output_file_holds_the_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    target = tmp_path / "box.json"
    assert _run(["-o", str(target)]) == 0
    snapshot = snapshot_from_json(target.read_text())
    assert snapshot.source == "probe"
    assert f"snapshot written to {target}" in capsys.readouterr().out


def test_unwritable_output_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write"):
        _run(["-o", str(tmp_path / "missing-dir" / "box.json")])


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "inf"])
def test_budget_must_be_a_positive_number_of_seconds(budget: str, capsys: pytest.CaptureFixture[str]) -> None:
    from linkscope.cli import main

    assert main(["probe", "--budget", budget]) == 2
    assert "--budget" in capsys.readouterr().err


def test_identity_table_comes_first(fake_dgx: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([]) == 0
    out = capsys.readouterr().out
    identity_at = out.index("GPU identity")
    assert identity_at < out.index("GPU0") < out.index("NUMA nodes")
    lines = out[identity_at:].splitlines()
    gpu4 = next(line for line in lines if line.split()[:1] == ["4"])
    assert gpu4.split()[1] == "0", "NVML 4 is cuda:0 under CUDA_VISIBLE_DEVICES=4,5"
    assert "mlx5_4 (PIX)" in gpu4
    assert "CUDA_VISIBLE_DEVICES='4,5'" in out


def test_identity_json_rows(fake_dgx: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    rows = data["identity"]["rows"]
    assert [row["cuda_index"] for row in rows] == [None, None, None, None, 0, 1, None, None]
    assert rows[0]["nearest_nics"] == ["mlx5_0"] and rows[0]["nearest_nic_link"] == "PIX"
    assert data["identity"]["visible_devices"] == "4,5"


def test_help_has_description_and_example() -> None:
    parser = argparse.ArgumentParser(prog="linkscope")
    probe_cmd.register(parser.add_subparsers(dest="command"))
    text = parser._subparsers._group_actions[0].choices["probe"].format_help()  # type: ignore[union-attr,index]
    assert "identity table" in text and "linkscope probe -o box.json" in text
