"""Expected next to measured (topo.cost.expect): the shared verdict, and expectations on real fixtures."""

from __future__ import annotations

import dataclasses
import math

import pytest

from linkscope.probes.bench.p2p_report import copy_findings, pair_cells
from linkscope.topo.cost.collectives import collective_cost
from linkscope.topo.cost.expect import (
    ABOVE_MODEL_FRACTION,
    COPY_JUDGE_MIN_BYTES,
    FAR_BELOW_FRACTION,
    SLOW_FRACTION,
    expect_collective,
    expect_host_copy,
    expectations,
    row_expectations,
    verdict,
)
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import load_source
from linkscope.topo.machine.links import DEGRADED_FRACTION, link_speed, pcie_speed
from linkscope.topo.model.measurements import CollectiveResult, HostCopy, Measurements, PeerCopy
from linkscope.topo.samples import load_sample
from linkscope.tui.link_cells import gpu_cells
from support.bench import FIXTURES

NVBANDWIDTH_H100 = FIXTURES / "p2p" / "h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"
RTX_NCCL = FIXTURES / "nccl_tests" / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"
RTX_TOPO = FIXTURES / "topo" / "rtx2080ti-2gpu-pix-p2p-not-supported.txt"
A100_SENDRECV = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
H200_NCCL = FIXTURES / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"


def _read(path: object) -> Measurements:
    return read_measurements(path.read_text(), str(path))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [(1.3, "faster than model"), (ABOVE_MODEL_FRACTION, "ok"), (1.0, "ok"), (SLOW_FRACTION, "ok"),
     (SLOW_FRACTION - 0.001, "slow"),
     (FAR_BELOW_FRACTION, "slow"), (FAR_BELOW_FRACTION - 0.001, "far below"), (0.0, "far below"), (None, None)],
)
def test_verdict_thresholds(ratio: float | None, expected: str | None) -> None:
    assert verdict(ratio) == expected


def test_one_threshold_for_bench_findings_the_grid_and_the_verdict() -> None:
    """A copy just below the shared threshold is `slow` everywhere; just above it, `ok` everywhere."""
    assert SLOW_FRACTION == DEGRADED_FRACTION
    snapshot = load_sample("dgx-h100")
    host = snapshot.host
    typical = link_speed(host, host.link(0, 1)).typical_gbps
    size = COPY_JUDGE_MIN_BYTES
    for share, slow in ((SLOW_FRACTION - 0.01, True), (SLOW_FRACTION + 0.01, False)):
        copies = (PeerCopy(0, 1, size, unidir_gbps=typical * share),)
        findings = copy_findings(pair_cells(copies, host, list(range(8))), copies, [])
        assert ([f.code for f in findings] == ["copy-slow"]) is slow
        cell = gpu_cells(host, Measurements("t", peer_copies=copies))[0][1]
        assert cell.degraded is slow and cell.verdict == ("slow" if slow else "ok")
        small = gpu_cells(host, Measurements("t", peer_copies=(PeerCopy(0, 1, 1 << 20, unidir_gbps=1.0),)))[0][1]
        assert small.verdict is None and not small.degraded  # too small to judge, as bench p2p does not
        (row,) = expectations(Measurements("t", peer_copies=copies), snapshot)
        assert row.verdict == ("slow" if slow else "ok")


def test_nvbandwidth_h100_on_dgx_h100_every_pair_is_ok_against_its_nvlink() -> None:
    snapshot = load_sample("dgx-h100")
    rows = expectations(_read(NVBANDWIDTH_H100), snapshot)
    assert len(rows) == 56 and {row.kind for row in rows} == {"peer"} and {row.link for row in rows} == {"NV18"}
    typical = link_speed(snapshot.host, snapshot.host.link(0, 1)).typical_gbps
    assert all(row.expected_gbps == pytest.approx(typical) for row in rows)
    assert all(row.verdict == "ok" and 0.9 < (row.ratio or 0) < 1.0 for row in rows)


def test_the_pairs_own_link_sets_the_expectation_nv16_below_nv18() -> None:
    """On the degraded sample GPU 3's pairs are NV16: they are expected 16/18 of the NV18 pairs."""
    rows = expectations(_read(NVBANDWIDTH_H100), load_sample("dgx-h100-degraded"))
    nv16 = [row for row in rows if row.link == "NV16"]
    nv18 = [row for row in rows if row.link == "NV18"]
    assert len(nv16) == 14 and all("GPU3" in row.subject for row in nv16)
    assert nv16[0].expected_gbps == pytest.approx(nv18[0].expected_gbps * 16 / 18)  # type: ignore[operator]


def test_nccl_tests_without_p2p_on_its_own_pcie_box_is_far_below_and_says_why() -> None:
    """The RTX 2080 Ti box has no P2P (its topo -p2p says NS): all_reduce reaches ~4 GB/s of a PIX path."""
    snapshot = load_source(str(RTX_TOPO))
    measured = _read(RTX_NCCL)
    expected = row_expectations(measured, snapshot).collectives
    assert len(expected) == len(measured.collectives)
    pairs = list(zip(measured.collectives, expected, strict=True))
    large = [each for result, each in pairs if result.op == "all_reduce" and result.size_bytes >= 64 << 20]
    assert large and all(each is not None and each.verdict == "far below" for each in large)
    assert all(each is not None and "no P2P" in each.note and each.link == "PIX" for each in large)
    small = [each for result, each in pairs if result.size_bytes < 1 << 20 and each is not None]
    assert small and all(each.verdict is None and each.ratio is not None for each in small)
    # the one-GPU reduce table (ranks 1) cannot be placed as a group: no expectation, never a guess
    assert all(each is None for result, each in pairs if (result.nranks or 0) < 2)


def test_collective_expectation_is_the_cost_model_on_the_groups_links() -> None:
    """The expected busbw is what GroupPricer + collective_cost give for those ranks on that machine."""
    from linkscope.topo.layout.placement import Placement

    snapshot = load_sample("dgx-a100")
    measured = _read(A100_SENDRECV)
    for result in measured.collectives:
        row = expect_collective(result, snapshot)
        assert row is not None
        placement = Placement((snapshot.host,), (0,), (0,) * 8, tuple(range(8)), "t")
        links = GroupPricer(placement, CostModel()).links(range(8))
        cost = collective_cost("send_recv", links, result.size_bytes)
        assert row.expected_gbps == pytest.approx(cost.busbw_gbps)
        assert row.expected_time_us == pytest.approx(cost.time_s * 1e6)
        assert row.ratio == pytest.approx(result.busbw_gbps / cost.busbw_gbps)
    expected = [expect_collective(result, snapshot) for result in measured.collectives]
    ratios = [row.ratio for row in expected if row is not None and row.ratio is not None]
    assert len(ratios) == len(measured.collectives)
    assert ratios[0] < ratios[-1]  # 128 MiB reaches a smaller share than 1 GiB


def test_two_node_run_is_priced_on_two_nodes_of_the_measured_width() -> None:
    """16 ranks measured 8 per host are priced as 2 nodes of 8 (the network joins them)."""
    snapshot = load_sample("dgx-h100")
    measured = _read(H200_NCCL)
    result = measured.collectives[-1]
    row = expect_collective(result, snapshot, gpus_per_host=measured.identity.gpu_count)  # type: ignore[union-attr]
    one_node = expect_collective(dataclasses.replace(result, nranks=8), snapshot)
    assert row is not None and one_node is not None and row.subject.startswith("all_reduce 9 GiB x16")
    assert row.expected_time_us != pytest.approx(one_node.expected_time_us)


def test_host_copies_use_the_gpus_pcie_generation_and_width() -> None:
    snapshot = load_sample("dgx-h100-degraded")
    host = snapshot.host
    narrow = expect_host_copy(HostCopy(3, "h2d", 0, 1 << 28, 20.0, local=True), host)
    full = expect_host_copy(HostCopy(0, "h2d", 0, 1 << 28, 20.0, local=True), host)
    assert full.expected_gbps == pytest.approx(pcie_speed(host.gpus[0]).typical_gbps)
    assert narrow.expected_gbps == pytest.approx(full.expected_gbps / 2)  # type: ignore[operator]
    assert "x8" in narrow.link and "x16" in full.link
    remote = expect_host_copy(HostCopy(0, "h2d", 1, 1 << 28, 5.0, local=False), host)
    assert remote.verdict is None and remote.ratio is not None


def test_rows_not_on_the_snapshot_are_not_judged() -> None:
    rows = expectations(Measurements("t", peer_copies=(PeerCopy(0, 9, 1 << 28, unidir_gbps=1.0),),
                                     collectives=(CollectiveResult("gather", 1 << 28, "float32", 1.0, 1.0, 1.0, 8),)),
                        load_sample("dgx-h100"))
    assert len(rows) == 1 and rows[0].verdict is None and rows[0].expected_gbps is None


def test_a_layout_group_is_priced_on_the_nodes_its_ranks_ran_on() -> None:
    """A dp group of ranks 0 and 8 (one per node, 8 GPUs each) crosses the network; ranks 2 and 3 do not."""
    snapshot = load_sample("dgx-h100")
    across = CollectiveResult("all_reduce", 1 << 28, "float32", 1.0, 1.0, 1.0, 2, ranks=(0, 8), group="dp0")
    inside = dataclasses.replace(across, ranks=(2, 3), group="tp1")
    far, near = expect_collective(across, snapshot), expect_collective(inside, snapshot)
    assert far is not None and near is not None and far.subject.endswith("dp0")
    assert "mlx5" in far.link and near.link == "NV18"
    assert far.expected_gbps < near.expected_gbps  # type: ignore[operator]


def test_copies_with_p2p_off_are_judged_as_host_staged() -> None:
    """p2pBandwidthLatencyTest's P2P=Disabled rows stage through host memory: expected from the slower GPU's
    PCIe link at the staged share, never from the NVLink bridge the pair also has."""
    from linkscope.topo.cost.expect import expect_peer_copy
    from linkscope.topo.cost.params import HOST_PATH_FRACTION
    from linkscope.topo.machine.links import gpu_pcie_speed
    from linkscope.topo.model.measurements import PeerCopy
    from linkscope.topo.samples import load_sample

    host = load_sample("a100-pcie-nvbridge-4").host
    off = expect_peer_copy(PeerCopy(0, 1, 1 << 30, 20.0, p2p_enabled=False), host)
    on = expect_peer_copy(PeerCopy(0, 1, 1 << 30, 200.0, p2p_enabled=True), host)
    assert off is not None and on is not None
    assert off.expected_gbps == pytest.approx(gpu_pcie_speed(host, 0).typical_gbps * HOST_PATH_FRACTION)
    assert off.link.startswith("host-staged PCIe") and on.link.startswith("NV")


def test_one_ratio_and_one_verdict_for_every_measurement() -> None:
    """speed_ratio and verdict serve the command line, bench p2p's cells and the app's cells alike."""
    from linkscope.probes.bench.p2p_report import PairCell
    from linkscope.topo.cost.expect import copy_judged, speed_ratio, verdict
    from linkscope.topo.machine.links import LinkSpeed
    from linkscope.tui.link_cells import GridCell

    assert speed_ratio(300.0, 400.0) == 0.75
    assert speed_ratio(None, 400.0) is None and speed_ratio(300.0, None) is None
    assert speed_ratio(300.0, 0.0) is None and speed_ratio(300.0, math.inf) is None
    assert [verdict(ratio) for ratio in (1.2, 0.75, 0.7, 0.49, None, math.nan)] == ["ok", "ok", "slow", "far below", None, None]
    assert copy_judged(None) and copy_judged(32 << 20) and not copy_judged(1 << 20)
    speed = LinkSpeed(450.0, 390.0, "NV18")
    pair = PairCell(0, 1, 195.0, speed, "NV18")
    assert (pair.ratio, pair.verdict) == (0.5, "slow")
    small = GridCell(0, 1, "NV18", None, speed, measured_gbps=195.0, measured_size_bytes=1 << 20)
    large = dataclasses.replace(small, measured_size_bytes=None)
    assert (small.ratio, small.verdict) == (0.5, None) and (large.ratio, large.verdict) == (0.5, "slow")
