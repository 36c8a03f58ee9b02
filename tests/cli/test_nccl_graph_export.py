"""`linkscope nccl-graph` and `linkscope export nccl-topo` on the command line: JSON contracts, exit statuses, one-line
errors, and an NCCL topology file as a SOURCE for show and doctor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.layout import assert_one_line_error, run_cli
from support.paths import FIXTURES


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor reads this process's environment: start without NCCL or CUDA settings."""
    import os

    for name in list(os.environ):
        if name.startswith(("NCCL_", "CUDA_")) or name == "LOCAL_RANK":
            monkeypatch.delenv(name)


GRAPHS = FIXTURES / "real" / "nccl_graph_xml"
TOPOS = FIXTURES / "real" / "nccl_topo_xml"
NC48_GRAPH = GRAPHS / "azure-nc48ads-a100-v4-2gpu-vendor-graph-file-3-graphs.xml"
NC48_TOPO = TOPOS / "azure-nc48ads-a100-v4-2gpu-vm-nvlink-pair-empty-link-speed-eth0.xml"


def test_graph_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """rtx3090 dump (read by hand): ring and tree with one channel `net 0, GPUs 0..7, net 0`, 4 GB/s, SYS/SYS."""
    code, out, _ = run_cli(["nccl-graph", str(GRAPHS / "rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml"),
                            "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    ring = data["graphs"][0]
    assert set(ring) >= {"pattern", "nchannels", "speed_intra_gbps", "speed_inter_gbps", "type_intra", "type_inter",
                         "channels"}
    assert (ring["pattern"], ring["nchannels"], ring["speed_intra_gbps"], ring["type_intra"]) == ("ring", 1, 4.0, "SYS")
    assert ring["channels"] == [["net0", 0, 1, 2, 3, 4, 5, 6, 7, "net0"]]
    assert [graph["pattern"] for graph in data["graphs"]] == ["ring", "tree", "CollNet chain", "NVLS"]
    assert data["findings"] == []


def test_nvlinked_pair_planned_as_sys_is_a_finding_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    """Azure's NC48 graph file plans SYS at 12 GB/s while its topology file NVLinks the pair (count 12)."""
    code, out, _ = run_cli(["nccl-graph", str(NC48_GRAPH), "--snapshot", str(NC48_TOPO), "--json"], capsys)
    assert code == 1
    codes = {(finding["code"], finding["graph"]) for finding in json.loads(out)["findings"]}
    assert ("nccl-graph-path-worse", "ring") in codes and ("nccl-graph-plans-low", "ring") in codes
    code, text, _ = run_cli(["nccl-graph", str(NC48_GRAPH), "--snapshot", str(NC48_TOPO)], capsys)
    assert code == 1 and "nccl-graph-path-worse" in text and "ring channel 0: 0 1" in text


def test_graphs_from_a_log_name_gpus_by_rank(capsys: pytest.CaptureFixture[str]) -> None:
    log = next((FIXTURES / "real" / "nccl_debug").glob("a100-pcie-1host-2rank-cross-socket-p2p-ipc-topology-dump-*.txt"))
    code, out, _ = run_cli(["nccl-graph", str(log), "--json"], capsys)
    assert code == 0
    ring = json.loads(out)["graphs"][0]
    assert (ring["pattern_code"], ring["nchannels"], ring["type_intra"], ring["type_inter"]) == (4, 2, "SYS", "PIX")


@pytest.mark.parametrize(("args", "says"), [
    (["nccl-graph", str(TOPOS / "rtx3090-8gpu-2-plx-switches-fdr-nic-gdr0-dump.xml")], "not NCCL's graph dump"),
    (["nccl-graph", "/no/such/graph.xml"], "no such file"),
    (["export", "nccl-topo", "sample:dgx-h100"], "-o"),
    (["export", "nccl-topo", "sample:dgx-h100", "-o", "/no/such/dir/x.xml"], "/no/such/dir"),
    (["doctor", "sample:dgx-h100", "--nccl-topo", str(GRAPHS / "rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml")],
     "NCCL"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, says)


def test_export_writes_a_file_show_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "topo.xml"
    code, out, _ = run_cli(["export", "nccl-topo", str(TOPOS / "azure-ndv5-h100-8gpu-vendor-topo-2numa-8-virtual-"
                                                               "switches-pcie-gen5.xml"), "-o", str(out_file), "--json"], capsys)
    assert code == 0 and json.loads(out) == {"output": str(out_file), "gpus": 8, "nics": 8, "cpus": 2, "notes": []}
    code, out, _ = run_cli(["show", str(out_file), "--json"], capsys)
    shown = json.loads(out)
    assert code == 0 and len(shown["gpus"]) == 8 and shown["gpu_nic"][0][0] == "PIX"


def test_export_to_stdout_with_notes_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["export", "nccl-topo", "sample:dgx-h100", "-o", "-"], capsys)
    assert code == 0 and out.startswith('<system version="1">') and "linkscope: note:" in err


def test_doctor_on_an_nccl_topology_file_alone_uses_it_as_nccls_view(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["doctor", str(NC48_TOPO), "--json"], capsys)
    codes = {finding["code"] for finding in json.loads(out)["findings"]}
    assert code == 1 and "nccl-pcie-speed-unknown" in codes
