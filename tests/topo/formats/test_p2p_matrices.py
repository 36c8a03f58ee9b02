"""`linkscope import` of nvbandwidth and p2pBandwidthLatencyTest output: every real fixture, cells
checked against values read off the files by hand, malformed matrices rejected with file:line."""

from __future__ import annotations

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.p2p_matrices import (
    looks_like_nvbandwidth,
    looks_like_p2p_bandwidth_latency_test,
    read_nvbandwidth,
    read_p2p_bandwidth_latency_test,
)
from linkscope.topo.model.measurements import Measurements, PeerCopy
from support.bench import FIXTURES, cli_main

P2P = FIXTURES / "p2p"
NVB = P2P / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"
H100_PCIE = P2P / "h100-pcie-2gpu-nvlink-bridge-p2pBandwidthLatencyTest.txt"
RTX = P2P / "rtx2080ti-2gpu-p2pBandwidthLatencyTest-no-p2p.txt"


def _copy(m: Measurements, src: int, dst: int, p2p: bool | None = None) -> PeerCopy:
    found = [c for c in m.peer_copies if c.src == src and c.dst == dst and (p2p is None or c.p2p_enabled == p2p)]
    assert len(found) == 1, found
    return found[0]


def test_every_fixture_is_recognised_by_exactly_one_reader() -> None:
    files = [path for path in sorted(P2P.glob("*.txt")) if "custom-copy" not in path.name]  # a poster's own script
    assert len(files) >= 20
    for path in files:
        text = path.read_text()
        assert looks_like_nvbandwidth(text) != looks_like_p2p_bandwidth_latency_test(text), path.name


def test_nvbandwidth_h100_matrix() -> None:
    m = read_nvbandwidth(NVB.read_text(), NVB.name)
    assert len(m.peer_copies) == 56  # 8 x 8 without the N/A diagonal
    assert _copy(m, 0, 7).unidir_gbps == 371.67   # row 0, column 7: GPU(row) -> GPU(column)
    assert _copy(m, 7, 0).unidir_gbps == 370.51
    assert _copy(m, 2, 4).unidir_gbps == 372.96
    assert _copy(m, 5, 3).unidir_gbps == 372.18
    assert all(c.bidir_gbps is None and c.latency_us is None for c in m.peer_copies)


def test_p2p_test_h100_pcie_nvlink_bridge() -> None:
    m = read_p2p_bandwidth_latency_test(H100_PCIE.read_text(), H100_PCIE.name)
    enabled = _copy(m, 0, 1, p2p=True)
    assert (enabled.unidir_gbps, enabled.bidir_gbps, enabled.latency_us) == (256.62, 509.35, 2.56)
    assert _copy(m, 1, 0, p2p=True).latency_us == 2.52
    disabled = _copy(m, 1, 0, p2p=False)  # the through-host baseline of a pair that has P2P
    assert (disabled.unidir_gbps, disabled.bidir_gbps, disabled.latency_us) == (25.00, 35.23, 16.48)
    assert len(m.peer_copies) == 4


def test_p2p_test_rtx_without_peer_access() -> None:
    m = read_p2p_bandwidth_latency_test(RTX.read_text(), RTX.name)
    assert len(m.peer_copies) == 2  # only the 'Enabled' figures (they fell back); no duplicate baseline
    copy = _copy(m, 1, 0)
    assert (copy.unidir_gbps, copy.bidir_gbps, copy.latency_us, copy.p2p_enabled) == (5.72, 6.10, 13.63, False)
    assert any("no GPU pair can access its peer" in note for note in m.notes)


def test_nvbandwidth_direction_words_and_host_and_bidirectional_tables() -> None:
    text = """Running host_to_device_memcpy_ce.
memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
          0         1
0     55.10     54.90

Running device_to_device_memcpy_write_ce.
memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)
          0         1
0       N/A    100.00
1    200.00       N/A

Running device_to_device_bidirectional_memcpy_read_ce.
memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)
          0         1
0       N/A    300.00
1    310.00       N/A

Running device_to_device_latency_sm.
Device to Device Latency SM GPU(row) <-> GPU(column) (ns)
          0         1
0       N/A    800.00
1    900.00       N/A
"""
    m = read_nvbandwidth(text, "nvb.txt")
    assert [(h.gpu, h.direction, h.gbps) for h in m.host_copies] == [(0, "h2d", 55.10), (1, "h2d", 54.90)]
    forward, back = _copy(m, 1, 0), _copy(m, 0, 1)
    assert forward.unidir_gbps == 100.00 and back.unidir_gbps == 200.00  # `<-`: the column sends
    assert forward.bidir_gbps == back.bidir_gbps == 610.00
    assert (back.latency_us, forward.latency_us) == (0.8, 0.9)


@pytest.mark.parametrize(("text", "message"), [
    ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n   0   1   2\n0  N/A  1.0  1.0\n1  2.0\n2  1.0  1.0  N/A\n",
     "m.txt:4: expected 3 values"),
    ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n   0   1\n0  N/A  x1.0\n1  2.0 N/A\n",
     "m.txt:3: 'x1.0' is not a number"),
    ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\nnothing here\n", "m.txt:2: expected a row of column numbers"),
    ("nvbandwidth Version: v0.4\n", "m.txt: no nvbandwidth matrix"),
])
def test_nvbandwidth_rejects_malformed_matrices(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_nvbandwidth(text, "m.txt")


@pytest.mark.parametrize(("text", "message"), [
    ("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n   D\\D     0      1\n     0 1.0 -2.0\n",
     "m.txt:3: '-2.0' is below the minimum 0"),
    ("P2P=Enabled Latency (P2P Writes) Matrix (us)\n   CPU     0      1\n     0   2.35   2.56\n",
     "expected the GPU latency table"),
    ("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n", "m.txt: no p2pBandwidthLatencyTest matrix"),
])
def test_p2p_test_rejects_malformed_matrices(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_p2p_bandwidth_latency_test(text, "m.txt")


def test_cli_imports_each_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["import", str(RTX), "--json"]) == 0
    assert '"source": "p2pBandwidthLatencyTest' in capsys.readouterr().out
    assert cli_main(["import", str(NVB), "--json"]) == 0
    assert '"unidir_gbps": 371.67' in capsys.readouterr().out


def test_the_p2p_disabled_baseline_never_stands_for_the_link() -> None:
    """H100 PCIe pair over an NVLink bridge: 256.62 GB/s with P2P, 25-26 GB/s staged through the host.
    Calibration and the Links grid must see the first; a pair that cannot use P2P keeps its only figure."""
    m = read_p2p_bandwidth_latency_test(H100_PCIE.read_text(), H100_PCIE.name)
    assert {(c.src, c.dst, c.unidir_gbps) for c in m.link_copies()} == {(0, 1, 256.62), (1, 0, 256.99)}
    rtx = read_p2p_bandwidth_latency_test(RTX.read_text(), RTX.name)
    assert rtx.link_copies() == rtx.peer_copies


def test_calibration_uses_the_p2p_figure_not_the_staged_baseline() -> None:
    from linkscope.topo.cost.calibrate import calibrate
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.samples import load_sample

    host = load_sample("a100-pcie-nvbridge-4").host
    m = read_p2p_bandwidth_latency_test(H100_PCIE.read_text(), H100_PCIE.name)
    fitted = calibrate(CostModel(), m, host)
    assert dict(fitted.pair_gbps)[(0, 1)] == 256.62  # the slower direction of the pair, with P2P
