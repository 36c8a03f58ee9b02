"""`linkscope nccl-log` on the command line: JSON contract, exit statuses, stdin, bad input, --snapshot."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from support.layout import assert_one_line_error, run_cli
from support.nccl_log import H100_SHM
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "nccl_debug"
A100 = str(REAL / "a100-4node-2gpu-collnet-fallback-p2p-net.txt")
CONSUMER = str(REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt")

V100_RING = "\n".join(
    [f"v100box:5:5 [{rank}] NCCL INFO comm 0x{rank + 1} rank {rank} nranks 8 cudaDev {rank} - Init COMPLETE"
     for rank in range(8)] + ["v100box:5:5 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7"]) + "\n"


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["nccl-log", A100, "--json"], capsys)
    assert code == 1 and err == ""
    data = json.loads(out)
    assert {"ranks", "edges", "findings"} <= set(data)
    for rank in data["ranks"]:
        assert {"rank", "host", "cuda_dev", "bus_id"} <= set(rank)
    assert data["ranks"][0] | {} == data["ranks"][0] and data["ranks"][0]["host"] == "gpu34"
    for edge in data["edges"]:
        assert {"src", "dst", "channel", "transport", "detail", "same_host"} <= set(edge)
        assert edge["transport"] in ("P2P", "SHM", "NET", "NVLS", "COLLNET")
    assert {"src": 0, "dst": 1, "channel": 0, "transport": "P2P", "detail": "P2P/CUMEM/read", "same_host": True}.items() \
        <= next(edge for edge in data["edges"] if edge["src"] == 0 and edge["dst"] == 1 and edge["channel"] == 0).items()
    for finding in data["findings"]:
        assert {"code", "severity", "message", "ranks"} <= set(finding)
    assert [finding["code"] for finding in data["findings"]] == ["env-override", "nccl-warn", "nccl-warn"]
    assert data["version"] == "2.23.4+cuda12.4"


def test_exit_status_follows_fail_on(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["nccl-log", CONSUMER], capsys)[0] == 1
    assert run_cli(["nccl-log", CONSUMER, "--fail-on", "error"], capsys)[0] == 0
    env_only = str(REAL / "nccl-892-h800-8gpu-direct-pointer-algo-env.txt")
    assert run_cli(["nccl-log", env_only], capsys)[0] == 0
    assert run_cli(["nccl-log", env_only, "--fail-on", "info"], capsys)[0] == 1


def test_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["nccl-log", CONSUMER], capsys)
    assert code == 1
    assert "NCCL 2.27.5+cuda12.9" in out and "husein-MS-7D31" in out
    assert "SHM/direct/direct" in out and "intra-host-shm" in out


def test_untrusted_host_names_cannot_drive_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "evil.log"
    log.write_text("evil\x1b]0;owned\x07host:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/\x1b[2Jx\n"
                   "h:1:1 [0] x.cc:1 NCCL WARN \x9b31mred\n")
    code, out, _ = run_cli(["nccl-log", str(log)], capsys)
    assert code == 1
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(CONSUMER).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = run_cli(["nccl-log", "-", "--json"], capsys)
    assert code == 1 and json.loads(out)["source"] == "<stdin>"


@pytest.mark.parametrize(("content", "fragments"), [
    (b"epoch 1\nepoch 2\n", ("no NCCL_DEBUG=INFO lines",)),
    (b"h:1:1 [0] NCCL INFO x\n\x00\x01\x02\n", (":2: binary data",)),
    (b"", ("no NCCL_DEBUG=INFO lines",)),
])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                                  fragments: tuple[str, ...]) -> None:
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    code, _, err = run_cli(["nccl-log", str(path)], capsys)
    assert_one_line_error(code, err, str(path), *fragments)


def test_missing_file_and_bad_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["nccl-log", "/nonexistent/x.log"], capsys)
    assert_one_line_error(code, err, "/nonexistent/x.log", "no such file")
    code, _, err = run_cli(["nccl-log", CONSUMER, "--snapshot", "sample:nope"], capsys)
    assert code == 2 and "Traceback" not in err


def test_snapshot_places_shm_on_an_nvlink_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "h100.log"
    log.write_text(H100_SHM)
    code, out, _ = run_cli(["nccl-log", str(log), "--snapshot", "sample:dgx-h100", "--json"], capsys)
    data = json.loads(out)
    assert code == 1
    placed = {(edge["src"], edge["dst"]): (edge["gpu_src"], edge["gpu_dst"], edge["link"], edge["transport"])
              for edge in data["placement"]["edges"]}
    assert placed == {(0, 1): (0, 1, "NV18", "SHM"), (1, 2): (1, 2, "NV18", "P2P")}
    assert {item["matched_by"] for item in data["placement"]["ranks"]} == {"bus_id"}
    codes = [finding["code"] for finding in data["findings"]]
    assert "shm-over-nvlink" in codes and "intra-host-shm" in codes
    shm = next(finding for finding in data["findings"] if finding["code"] == "shm-over-nvlink")
    assert shm["severity"] == "error" and shm["ranks"] == [0, 1]


def test_snapshot_flags_a_ring_hop_over_sys_when_an_nvlink_ring_exists(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "v100.log"
    log.write_text(V100_RING)
    code, out, _ = run_cli(["nccl-log", str(log), "--snapshot", "sample:dgx1-v100", "--json"], capsys)
    data = json.loads(out)
    hops = sorted(tuple(finding["ranks"]) for finding in data["findings"] if finding["code"] == "ring-hop-sys")
    assert code == 1 and hops == [(3, 4), (7, 0)]
    assert any("cudaDev" in note for note in data["placement"]["notes"])
    code, out, _ = run_cli(["nccl-log", str(log), "--snapshot", "sample:dgx-h100", "--json"], capsys)
    assert [finding["code"] for finding in json.loads(out)["findings"]] == [] and code == 0


def test_snapshot_text_shows_links(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["nccl-log", CONSUMER, "--snapshot", "sample:consumer-2gpu"], capsys)
    assert code == 0 and "PHB" in out  # SHM is all this box can do: info and "links ridden inside a host" in out


def test_snapshot_that_matches_nothing_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(REAL / "nccl-385-16gpu-old-ring-busid-p2p-ib.txt")
    code, out, _ = run_cli(["nccl-log", log, "--snapshot", "sample:h100-cluster-mixed"], capsys)
    assert code == 1 and "could be placed" in out and "snapshot-not-matched" in out  # nothing judged is never clean
    code, out, _ = run_cli(["nccl-log", log, "--snapshot", "sample:h100-cluster-mixed", "--json"], capsys)
    judged = json.loads(out)["judged"]
    assert judged["placed_on_snapshot"] == 0 and judged["connections"] > 0


A100_SHM = REAL / "a100-sxm4-4gpu-shm-fallback-transport.txt"
A100_TOPO = FIXTURES / "real" / "topo" / "a100-sxm4-4gpu-nvlink-pairs-nv12-nv10.txt"


def test_shm_between_ranks_of_a_log_without_hosts_is_a_finding(capsys: pytest.CaptureFixture[str]) -> None:
    """The 4-GPU A100 log has no host prefixes; its ring hops 1->2 and 3->0 say `via SHM/direct/direct` (read by
    hand). SHM proves the ranks share a host: `intra-host-shm`, exit 1, with or without the snapshot."""
    code, out, _ = run_cli(["nccl-log", str(A100_SHM), "--json"], capsys)
    data = json.loads(out)
    assert code == 1 and [f["code"] for f in data["findings"]] == ["intra-host-shm"]
    assert data["judged"]["hosts_unknown"] == 0 and data["judged"]["connections"] == 16
    assert all(edge["same_host"] is True for edge in data["edges"])


def test_one_host_log_on_one_host_snapshot_places_by_device_number(capsys: pytest.CaptureFixture[str]) -> None:
    """The same log on the same box's `nvidia-smi topo -m` (NV12 0-1, NV10 2-3, NODE otherwise, read by hand): the
    SHM hops are placed on the NODE pairs, the P2P hops on the NVLink pairs."""
    code, out, _ = run_cli(["nccl-log", str(A100_SHM), "--snapshot", str(A100_TOPO), "--json"], capsys)
    data = json.loads(out)
    assert code == 1 and data["judged"]["placed_on_snapshot"] == 16
    links = {(edge["transport"], edge["link"]) for edge in data["placement"]["edges"]}
    assert links == {("P2P", "NV12"), ("P2P", "NV10"), ("SHM", "NODE")}
    assert any("names no host" in note for note in data["placement"]["notes"])
