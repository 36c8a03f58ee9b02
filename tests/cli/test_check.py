"""`linkscope check` on the command line: exit codes, JSON contract, rank-map files, every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.topo.model.codec import measurements_to_json
from linkscope.topo.model.measurements import CollectiveResult, Measurements
from support.layout import assert_one_line_error, run_cli


def test_good_layout_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:dgx-h100", "--tp", "8", "--pp", "4", "--nodes", "8"], capsys)
    assert code == 0
    assert "No findings" in out and "NV18" in out


def test_warning_exits_1_unless_fail_on_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", "sample:a100-pcie-nvbridge-4", "--tp", "4"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 1 and "tp-slow-link" in out
    code, _, _ = run_cli([*argv, "--fail-on", "error"], capsys)
    assert code == 0


def test_info_only_fails_with_fail_on_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rank_map = tmp_path / "map.csv"
    lines = ["rank,host,gpu"] + [f"{rank},n1,{rank}" for rank in range(8)] + [f"{8 + i},n2,{7 - i}" for i in range(8)]
    rank_map.write_text("\n".join(lines) + "\n")
    argv = ["check", "sample:dgx-h100", "--tp", "2", "--rank-map", str(rank_map), "--json"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0
    assert [finding["code"] for finding in json.loads(out)["findings"]] == ["dp-not-rail-aligned"]
    code, _, _ = run_cli([*argv, "--fail-on", "info"], capsys)
    assert code == 1


def test_json_contract_and_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:a100-pcie-nvbridge-4", "--tp", "2", "--visible-devices", "0,2,1,3", "--suggest",
                            "--json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["groups"]["tp"] == [[0, 1], [2, 3]]
    assert data["placement"]["ranks"] == [[0, 0], [0, 2], [0, 1], [0, 3]]
    finding = data["findings"][0]
    assert finding["code"] == "tp-slow-link" and finding["dim"] == "tp" and finding["ranks"] == [0, 1]
    assert data["suggestion"]["env"]["CUDA_VISIBLE_DEVICES"]
    assert data["suggestion"]["speedup"] > 1


def test_mesh_form(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:dgx1-v100", "--mesh", "dp=1,tp=8", "--json"], capsys)
    assert code == 0
    assert json.loads(out)["groups"]["tp"] == [list(range(8))]


def test_error_finding_shows_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:dgx-h100", "--tp", "8", "--nodes", "2", "--order", "dp-tp-pp", "--suggest"], capsys)
    assert code == 1
    assert "tp-crosses-node" in out and "fix:" in out and "--order tp-dp-pp" in out


def test_measurements_calibrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A measured 8-GPU all_reduce at 100 GB/s busbw (a sick box) makes the TP traffic far slower."""
    measured = Measurements("test", collectives=(CollectiveResult("all_reduce", 1 << 30, "bf16", 1.0, 1.0, 100.0, 8),))
    path = tmp_path / "m.json"
    path.write_text(measurements_to_json(measured))
    argv = ["check", "sample:dgx-h100", "--tp", "8", "--json"]
    _, plain, _ = run_cli(argv, capsys)
    _, calibrated, _ = run_cli([*argv, "--measurements", str(path)], capsys)
    assert json.loads(calibrated)["step_time_s"] > 3 * json.loads(plain)["step_time_s"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--tp", "3"], "cannot infer dp"),
        (["--tp", "8", "--dp", "4"], "does not fit the cluster"),
        (["--tp", "2", "--order", "tp-xx"], "unknown dimension 'xx'"),
        (["--tp", "2", "--order", "tp-dp", "--mesh", "dp=4,tp=2"], "give one"),
        (["--mesh", "dp=4,tp"], "not NAME=SIZE"),
        (["--tp", "0"], "--tp"),
        (["--tp", "2", "--visible-devices", "0,x"], "not a GPU index"),
        (["--tp", "2", "--distribution", "random"], "--distribution"),
        (["--tp", "2", "--nodes", "0"], "--nodes"),
        (["--tp", "2", "--model", "9000b"], "unknown preset"),
        (["--tp", "2", "--params", "lots"], "--params"),
        (["--tp", "2", "--dtype", "int3"], "--dtype"),
        (["--tp", "2", "--zero", "7"], "ZeRO stage"),
        (["--tp", "2", "--fail-on", "fatal"], "--fail-on"),
        (["--tp", "2", "--measurements", "/no/such/m.json"], "/no/such/m.json"),
        (["--tp", "2", "--cost-params", "/no/such/p.json"], "/no/such/p.json"),
        (["--tp", "2", "--rank-map", "/no/such/map.csv"], "/no/such/map.csv"),
        (["--tp", "2", "--rank-map", "/no/such/map.csv", "--nodes", "2"], "drop --nodes"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", "sample:dgx-h100", *argv], capsys)
    assert_one_line_error(code, err, fragment)


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("map.csv", "0,n1,0\n1,n1\n", "line 2"),
        ("m.json", "{not json", "m.json"),
        ("p.json", '{"alpha_us": {"QPI": 1}}', "unknown link class"),
    ],
)
def test_bad_files_are_one_line(name: str, content: str, fragment: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_text(content)
    flag = {"map.csv": "--rank-map", "m.json": "--measurements", "p.json": "--cost-params"}[name]
    code, _, err = run_cli(["check", "sample:dgx-h100", "--tp", "2", flag, str(path)], capsys)
    assert_one_line_error(code, err, fragment)


def test_unknown_sample_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", "sample:no-such-box", "--tp", "2"], capsys)
    assert_one_line_error(code, err, "no-such-box")


def test_suggest_says_when_nothing_is_better(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:dgx-h100", "--tp", "8", "--nodes", "2", "--suggest"], capsys)
    assert code == 0 and "Suggestion: none" in out


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(16810.4, "16,810 s"), (427.6, "427.6 s"), (6.277e-3, "6.277 ms"), (15e-6, "15 us"), (None, "-")],
)
def test_durations_read_plainly(seconds: float | None, text: str) -> None:
    from linkscope.topo.common.units import format_seconds

    assert format_seconds(seconds) == text


def test_health_findings_of_the_gpus_a_layout_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """GPU3 of the degraded box has 16 of 18 NVLinks and a x8 link: check names the rank on it and its TP group."""
    code, out, _ = run_cli(["check", "sample:dgx-h100-degraded", "--tp", "8", "--json"], capsys)
    findings = {finding["code"]: finding for finding in json.loads(out)["findings"]}
    assert code == 1
    assert set(findings) == {"nvlink-fewer-links", "pcie-width-reduced"}
    assert findings["nvlink-fewer-links"]["ranks"] == [3] and findings["nvlink-fewer-links"]["dim"] == "tp"
    assert "tensor parallel group [0, 1, 2, 3, 4, 5, 6, 7]" in findings["nvlink-fewer-links"]["message"]
    # the ring's slowest hop is NV16 instead of NV18: with the links up, TP time drops to about 16/18
    links = findings["nvlink-fewer-links"]
    ratio = links["best_cost_s"] / links["cost_s"]
    assert 0.85 < ratio < 0.92, "about 16/18 (latency terms keep it a little above)"
    assert f"{(1 - ratio) * 100:.0f}% less time per step" in links["message"]
    code, out, _ = run_cli(["check", "sample:dgx-h100-degraded", "--tp", "8"], capsys)
    assert "No findings" not in out and "nvlink-fewer-links" in out


def test_health_findings_of_gpus_the_layout_leaves_out_are_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "sample:dgx-h100-degraded", "--tp", "4", "--visible-devices", "0,1,2,4", "--json"],
                           capsys)
    assert code == 0 and json.loads(out)["findings"] == []
