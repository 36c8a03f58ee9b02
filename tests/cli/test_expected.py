"""Expected next to measured on the command line: import --attach, show, check --measurements, bench."""

from __future__ import annotations

import argparse
import json
import pathlib

import pytest

from linkscope.probes.bench.results import CollectiveSweep, SweepRow, bench_identity, measurements_from_rows
from linkscope.topo.cost.expect import expectations
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import load_source
from linkscope.topo.samples import load_sample
from support.bench import FIXTURES, cli_main

RTX_NCCL = FIXTURES / "nccl_tests" / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"
RTX_TOPO = FIXTURES / "topo" / "rtx2080ti-2gpu-pix-p2p-not-supported.txt"
A100_SENDRECV = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
NVBANDWIDTH_H100 = FIXTURES / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"


def test_import_attach_prints_expected_ratio_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["import", str(A100_SENDRECV), "--expect", "sample:dgx-a100"]) == 1  # far below: an error
    out = " ".join(capsys.readouterr().out.split())
    assert "expect" in out and "verdict" in out and "far below" in out
    assert "against what the cost model expects on sample:dgx-a100: 8 row(s) judged" in out
    assert cli_main(["import", str(A100_SENDRECV)]) == 0
    assert "verdict" not in capsys.readouterr().out.replace(str(A100_SENDRECV), "")  # the path may hold the word


def test_import_attach_json_has_expected_rows(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "box.json"
    assert cli_main(["import", str(NVBANDWIDTH_H100), "--attach", "sample:dgx-h100", "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["expected_on"] == "sample:dgx-h100" and len(data["expected"]) == 56
    row = data["expected"][0]
    assert set(row) >= {"kind", "subject", "link", "measured_gbps", "expected_gbps", "ratio", "verdict"}
    assert row["link"] == "NV18" and row["verdict"] == "ok"
    assert data["measurements"]["identity"]["gpu_model"] == "NVIDIA H100 80GB HBM3"


def test_show_of_a_snapshot_carrying_measurements(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    box = tmp_path / "box.json"
    assert cli_main(["import", str(NVBANDWIDTH_H100), "--attach", "sample:dgx-h100-degraded", "-o", str(box)]) == 0
    capsys.readouterr()
    assert cli_main(["show", str(box)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "measured against expected" in out and "NV16" in out and "56 row(s) judged: 56 ok" in out
    assert cli_main(["show", str(box), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {row["link"] for row in shown["measurements"]["expected"]} == {"NV16", "NV18"}
    assert shown["measurements"]["judged"]["judged"] == 56  # the 8 x 7 pairs of the nvbandwidth matrix, by hand
    assert shown["measurements"]["placement"] == []  # peer copies: no ranks to place
    assert cli_main(["show", "sample:dgx-h100", "--json"]) == 0
    assert "measurements" not in json.loads(capsys.readouterr().out)


def test_check_measurements_says_what_calibration_changed(capsys: pytest.CaptureFixture[str]) -> None:
    """The 2-GPU PCIe box's all_reduce measured ~4 GB/s busbw: check says so next to the model's figure."""
    argv = ["check", str(RTX_TOPO), "--tp", "2", "--measurements", str(RTX_NCCL)]
    assert cli_main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "calibration: all_reduce 1 GiB x2 over PIX measured 4 GB/s busbw, model" in out
    assert cli_main([*argv, "--json"]) == 0
    calibration = json.loads(capsys.readouterr().out)["calibration"]
    (row,) = [each for each in calibration if each["subject"].startswith("all_reduce")]
    assert row["measured_gbps"] == 4.0 and row["model_gbps"] > 10 and row["calibrated_gbps"] == pytest.approx(4.0, rel=0.02)


def test_check_peer_copy_calibration_per_link_kind(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    # exit 1: GPU3's missing NVLinks are a health finding of the TP group (calibration does not change that)
    assert cli_main(["check", "sample:dgx-h100-degraded", "--tp", "8", "--measurements", str(NVBANDWIDTH_H100),
                     "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {finding["code"] for finding in report["findings"]} == {"nvlink-fewer-links", "pcie-width-reduced"}
    calibration = {row["link"]: row for row in report["calibration"]}
    assert set(calibration) == {"NV16", "NV18"}
    assert calibration["NV16"]["model_gbps"] < calibration["NV18"]["model_gbps"]
    assert calibration["NV16"]["calibrated_gbps"] == pytest.approx(calibration["NV16"]["measured_gbps"], rel=0.01)


def _rows() -> list[SweepRow]:
    """Worker rows as `bench collectives` gets them from NCCL workers: the sendrecv fixture's numbers."""
    measured = read_measurements(A100_SENDRECV.read_text(), "a100")
    return [SweepRow(r.op, r.size_bytes, r.dtype, r.time_us, r.algbw_gbps, r.busbw_gbps, 0, "world", "world",
                     tuple(range(8)), 8, r.in_place, "nccl") for r in measured.collectives]


def test_bench_collectives_report_has_expected_fields(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    from linkscope.commands.bench_collectives import report_collectives

    rows = _rows()
    measurements = measurements_from_rows(rows, [], [], identity=bench_identity("linkscope bench collectives nccl",
                                                                                processes=8))
    args = argparse.Namespace(expect="sample:dgx-a100", json=True, output=None, attached=None, force=False, fail_on="warning")
    assert report_collectives(args, measurements, CollectiveSweep(tuple(rows))) == 1  # far below rows: an error
    payload = json.loads(capsys.readouterr().out)
    printed = payload["rows"]
    # the fixture's 8 rows (read by hand: 4 sizes of 128 MiB to 1 GiB, out of and in place) are all large enough to
    # judge; the 8 processes of one host are placed on its 8 GPUs
    assert (payload["judged"]["judged"], payload["judged"]["not_judged"]) == (8, 0) and payload["judged"]["far below"]
    assert payload["placement"][0].startswith("8 ranks: 1 host x 8 GPUs")
    assert {row["limited_by"] for row in printed} == {"nvlink"}
    expected = expectations(measurements, load_sample("dgx-a100"))
    assert [row["expected_busbw_gbps"] for row in printed] == pytest.approx([row.expected_gbps for row in expected])
    assert printed[0]["verdict"] == "far below" and printed[-1]["verdict"] == "ok" and printed[0]["link"] == "NV12"
    args.json = False
    report_collectives(args, measurements, CollectiveSweep(tuple(rows)))
    text = " ".join(capsys.readouterr().out.split())
    assert "far below" in text and "placed: 8 ranks: 1 host x 8 GPUs" in text and "8 row(s) judged" in text


def test_bench_attach_refuses_another_kind_after_the_run(tmp_path: pathlib.Path) -> None:
    from linkscope.commands.bench_run import write_output
    from linkscope.topo.common.errors import InputError

    out = tmp_path / "box.json"
    measurements = read_measurements(NVBANDWIDTH_H100.read_text(), "nvb")
    args = argparse.Namespace(output=str(out), attached=load_source("sample:consumer-2gpu"), force=False)
    with pytest.raises(InputError, match="--attach: measured on 8x NVIDIA H100"):
        write_output(args, measurements)
    assert not out.exists()


KVM_2NODE = FIXTURES / "nccl_tests" / "h200-2node-16gpu-kvm-vm-degraded-all_reduce.txt"
BARE_2NODE = FIXTURES / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"


def test_import_fail_on_judged_and_the_network_path(capsys: pytest.CaptureFixture[str]) -> None:
    """The KVM 2-node run (~55 GB/s of ~500, read by hand): exit 1, JSON `judged` counts, `placement`, and every row
    `limited_by` network with its path; the bare-metal twin exits 0 with the same placement."""
    argv = ["import", str(KVM_2NODE), "--expect", "sample:dgx-h100", "--force", "--json"]
    assert cli_main(argv) == 1
    payload = json.loads(capsys.readouterr().out)
    # sizes 32 MiB, 96 MiB, 288 MiB, 864 MiB, 2.53 GiB, 7.59 GiB in and out of place (read by hand): the 8 rows
    # from 256 MiB are judged, the 4 below are not (across nodes they are protocol- and latency-bound)
    assert payload["judged"]["judged"] == 8 and payload["judged"]["far below"] == 8
    assert payload["judged"]["not_judged"] == 4
    assert payload["placement"] == ["16 ranks: 2 hosts x 8 GPUs from the rank lines"]
    assert {row["limited_by"] for row in payload["expected"]} == {"network"}
    assert all(row["path"][-1].startswith("NET 8x") for row in payload["expected"])
    assert cli_main([*argv[:-1], "--fail-on", "error"]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "placed: 16 ranks: 2 hosts x 8 GPUs from the rank lines" in text
    assert "limited by network" in text and "about one NIC's worth" in text
    assert "far below: all_reduce 7.59 GiB" in text  # the decisive rows are the largest
    assert cli_main(["import", str(BARE_2NODE), "--expect", "sample:dgx-h100", "--force"]) == 0


def test_import_that_judges_nothing_says_so_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """16 ranks on 2 hosts x 8 against a real 3-GPU workstation's topology: not placed, so nothing is judged; the
    text says NOTHING JUDGED, `judged` counts 0, and the exit status is 1 (a warning) even at --fail-on warning."""
    topo = FIXTURES / "topo" / "rtx-a6000-3gpu-nv4-pair-phb-2nic.txt"
    argv = ["import", str(BARE_2NODE), "--expect", str(topo), "--force"]
    assert cli_main([*argv, "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["judged"]["judged"] == 0 and payload["judged"]["not_judged"] == 6
    assert cli_main(argv) == 1
    assert "NOTHING JUDGED" in " ".join(capsys.readouterr().out.split())
    assert cli_main([*argv, "--fail-on", "error"]) == 0


def test_check_measurements_says_where_their_ranks_were_placed_and_what_was_judged(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The 2080 Ti file (read by hand): six tables swept from 8 B to 1 GiB by x2, out of and in place, five of them
    on 2 ranks of one host (`# Rank 0/1 ... device 0/1`) and one on a single GPU. Rows of 1 MiB and more on 2 ranks
    are judged: 5 tables x 11 sizes x 2 = 110. check says so as import --expect does: the placement line, the counts
    (`judged`, `measured_placement` in JSON) and no `measurements-not-judged` finding."""
    argv = ["check", str(RTX_TOPO), "--tp", "2", "--measurements", str(RTX_NCCL)]
    cli_main([*argv, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["judged"]["judged"] == 110
    assert report["measured_placement"] == ["2 ranks: 1 host x 2 GPUs from the rank lines"]
    assert "measurements-not-judged" not in {finding["code"] for finding in report["findings"]}
    cli_main(argv)
    text = " ".join(capsys.readouterr().out.split())
    assert "placed: 2 ranks: 1 host x 2 GPUs from the rank lines" in text and "110 row(s) judged" in text
