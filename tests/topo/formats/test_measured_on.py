"""What measurements were measured on: read from the tools' device lines, kept in files, and checked
against the machine they are attached to (a different kind is refused unless --force)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from linkscope.topo.formats.measured_on import measured_on
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.model.codec import measurements_from_json, measurements_to_json, snapshot_from_json, to_jsonable
from linkscope.topo.model.measurements import MeasuredOn, Measurements, PeerCopy
from linkscope.topo.model.provenance import DIFFERENT, OTHER_HOST, SAME, UNKNOWN, check_identity, same_gpu_model
from linkscope.topo.samples import load_sample
from support.bench import FIXTURES, cli_main

H200 = FIXTURES / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"
RTX_NCCL = FIXTURES / "nccl_tests" / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"
A100_SENDRECV = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
NVBANDWIDTH_H100 = FIXTURES / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"
P2P_H100_PCIE = FIXTURES / "p2p" / "h100-pcie-2gpu-nvlink-bridge-p2pBandwidthLatencyTest.txt"


def _identity(path: pathlib.Path) -> MeasuredOn:
    identity = read_measurements(path.read_text(), str(path)).identity
    assert identity is not None
    return identity


def test_nccl_tests_rank_lines_give_model_count_hosts_and_bus_ids() -> None:
    identity = _identity(H200)
    assert (identity.gpu_model, identity.gpu_count, identity.hosts, identity.tool) == (
        "NVIDIA H200", 8, ("fs-207", "fs-208"), "nccl-tests")
    assert identity.pci_bus_ids[:2] == ("0x18", "0x2a") and len(identity.pci_bus_ids) == 8
    rtx = _identity(RTX_NCCL)
    assert rtx.gpu_model == "NVIDIA GeForce RTX 2080 Ti" and rtx.pci_bus_ids == ("0000:b4:00", "0000:b5:00")


def test_nvbandwidth_and_p2p_test_device_lists() -> None:
    nvb = _identity(NVBANDWIDTH_H100)
    assert (nvb.gpu_model, nvb.gpu_count, nvb.tool, nvb.tool_version, nvb.hosts) == (
        "NVIDIA H100 80GB HBM3", 8, "nvbandwidth", "v0.4", ())
    p2p = _identity(P2P_H100_PCIE)
    assert (p2p.gpu_model, p2p.gpu_count, p2p.pci_bus_ids) == ("NVIDIA H100 PCIe", 2, ("0000:c2:00", "0000:d5:00"))


def test_a_log_without_device_lines_says_only_its_tool() -> None:
    assert _identity(A100_SENDRECV) == MeasuredOn(tool="nccl-tests")


def test_newer_tool_lines_version_and_bus_ids() -> None:
    text = ("# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105\n"
            "#  Rank  0 Group  0 Pid  11 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n")
    assert measured_on(text, "nccl-tests").tool_version == "2.13.9"
    nvb = measured_on("nvbandwidth Version: v0.7\nDevice 0: NVIDIA B200 (00000000:1b:00)\n", "nvbandwidth")
    assert (nvb.gpu_model, nvb.pci_bus_ids, nvb.tool_version) == ("NVIDIA B200", ("00000000:1b:00",), "v0.7")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [("NVIDIA H100 80GB HBM3", "nvidia h100 80GB  HBM3", True), ("NVIDIA H100", "NVIDIA H100 80GB HBM3", True),
     ("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", False), ("NVIDIA H200", "NVIDIA H100 80GB HBM3", False),
     ("Tesla V100-SXM2-16GB", "NVIDIA Tesla V100-SXM2-16GB", True), ("", "NVIDIA H100", False)],
)
def test_same_gpu_model(a: str, b: str, same: bool) -> None:
    assert same_gpu_model(a, b) is same


def test_identity_relations() -> None:
    h100 = load_sample("dgx-h100")
    assert check_identity(_identity(NVBANDWIDTH_H100), h100).relation == SAME
    assert check_identity(_identity(NVBANDWIDTH_H100), load_sample("consumer-2gpu")).relation == DIFFERENT
    other = dataclasses.replace(_identity(NVBANDWIDTH_H100), hosts=("gpu-node-17",))
    verdict = check_identity(other, h100)
    assert verdict.relation == OTHER_HOST and "gpu-node-17" in verdict.message and not verdict.refused
    assert check_identity(None, h100).relation == UNKNOWN
    more_gpus = dataclasses.replace(_identity(NVBANDWIDTH_H100), gpu_count=16)
    assert check_identity(more_gpus, h100).refused


def test_old_measurements_file_without_identity_still_reads() -> None:
    measurements = Measurements("old", peer_copies=(PeerCopy(0, 1, 1 << 20, 300.0),))
    data = json.loads(measurements_to_json(measurements))
    del data["measurements"]["identity"]
    assert measurements_from_json(json.dumps(data), "old.json") == measurements
    sample = to_jsonable(load_sample("consumer-2gpu"))
    snapshot = snapshot_from_json(json.dumps({**sample, "measurements": data["measurements"]}))
    assert snapshot.measurements is not None and snapshot.measurements.identity is None


def test_import_attach_refuses_h100_measurements_on_a_consumer_box(tmp_path: pathlib.Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "box.json"
    status = cli_main(["import", str(NVBANDWIDTH_H100), "--attach", "sample:consumer-2gpu", "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and not out.exists()
    assert err.count("\n") == 1 and "--attach" in err and "NVIDIA H100 80GB HBM3" in err and "RTX 4090" in err
    assert "--force" in err
    # forced, the H100 rows are judged against the RTX box (--attach implies --expect): off the model, exit 1
    assert cli_main(["import", str(NVBANDWIDTH_H100), "--attach", "sample:consumer-2gpu", "-o", str(out), "--force"]) == 1
    assert "note:" in capsys.readouterr().err and out.exists()


def test_other_host_of_the_same_kind_is_a_note(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    measured = tmp_path / "m.json"
    identity = MeasuredOn("NVIDIA H100 80GB HBM3", 8, ("gpu-node-17",), tool="nvbandwidth")
    measured.write_text(measurements_to_json(Measurements("t", peer_copies=(PeerCopy(0, 1, 1 << 28, 370.0),),
                                                          identity=identity)))
    assert cli_main(["check", "sample:dgx-h100", "--tp", "8", "--measurements", str(measured)]) == 0
    err = capsys.readouterr().err
    assert "note:" in err and "gpu-node-17" in err and "another host of the same kind" in err


def test_check_open_and_show_refuse_a_different_kind(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["check", "sample:consumer-2gpu", "--tp", "2", "--measurements", str(NVBANDWIDTH_H100)],
                 ["open", "sample:consumer-2gpu", "--measurements", str(NVBANDWIDTH_H100)],
                 ["show", "sample:consumer-2gpu", "--measurements", str(NVBANDWIDTH_H100)]):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--measurements" in err and "different kind of machine" in err
    assert cli_main(["show", "sample:consumer-2gpu", "--measurements", str(NVBANDWIDTH_H100), "--force", "--json"]) == 0


def test_unknown_identity_is_a_note_not_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["show", "sample:dgx-a100", "--measurements", str(A100_SENDRECV), "--json"]) == 0
    captured = capsys.readouterr()
    assert "note:" in captured.err and "do not say" in captured.err
    shown = json.loads(captured.out)["measurements"]
    assert shown["identity"]["gpu_model"] is None and len(shown["expected"]) == 8
