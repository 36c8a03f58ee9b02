"""Collectives inside one NVLink domain: how NVLS reaches its peak with size, and rings priced per NCCL protocol."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.cost.collectives import collective_cost, nvls_chunk_bytes, uniform_links
from linkscope.topo.cost.expect import row_expectations
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.layout.placement import Placement
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.samples import load_sample
from support.paths import REAL

NCCL = REAL / "nccl_tests"
GB200_72 = NCCL / "gb200-nvl72-full-rack-72rank-tail-only-last-rank-line-all_reduce.txt"
GB200_8_MNNVL = NCCL / "gb200-nvl72-2node-8gpu-mnnvl-all_reduce-tail.txt"
H100_P5 = NCCL / "h100-p5-awsbatch-mpirun-tag-output-no-rank-list-trailing-pad-all_reduce.txt"
MIB, GIB = 1 << 20, 1 << 30


def _read(path: object) -> Measurements:
    return read_measurements(path.read_text(), str(path))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("size_bytes", "ops", "chunk"),
    [
        # 72 GPUs x 24 channels = 1728 chunks in flight: 64 KiB below 64 x 1728 x 128 KiB = 13.5 GiB,
        # 32 KiB below 8 x 1728 x 64 KiB = 864 MiB
        (512 * MIB, 1728, 32 << 10), (GIB, 1728, 64 << 10), (8 * GIB, 1728, 64 << 10), (16 * GIB, 1728, 128 << 10),
        # 8 GPUs x 24 channels = 192: 128 KiB from 1.5 GiB, 64 KiB from 96 MiB, 32 KiB from 12 MiB, else 16 KiB
        (2 * GIB, 192, 128 << 10), (GIB, 192, 64 << 10), (16 * MIB, 192, 32 << 10), (8 * MIB, 192, 16 << 10),
    ],
)
def test_the_nvls_chunk_is_the_one_nccl_picks(size_bytes: int, ops: int, chunk: int) -> None:
    """src/enqueue.cc (NCCL_ALGO_NVLS): start at NCCL_NVLS_CHUNKSIZE 128 KiB, halve below 64, 8 and 2 rounds."""
    assert nvls_chunk_bytes(size_bytes, ops) == chunk


def test_a_healthy_nvl72_rack_reads_ok_at_every_size() -> None:
    """CoreWeave's example run of a full NVL72 rack (72 ranks, 512 MiB .. 8 GiB, busbw 576.74 .. 846.82, read by hand)
    is healthy: every row is judged and ok, the 512 MiB rows included (NCCL's 32 KiB NVLS chunks there)."""
    rows = row_expectations(_read(GB200_72), load_sample("gb200-nvl72")).all()
    assert len(rows) == 10
    assert all(row.verdict == "ok" for row in rows), [(row.subject, row.ratio) for row in rows]
    assert all(0.85 <= (row.ratio or 0) <= 1.1 for row in rows)


@pytest.mark.parametrize("share", [0.5, 0.6])
def test_the_same_rack_at_a_fraction_of_its_busbw_reads_slow(share: float) -> None:
    """Synthetic: the same rows with busbw scaled down (time scaled up) from 1 GiB are slow or far below."""
    measured = _read(GB200_72)
    slowed = tuple(dataclasses.replace(row, busbw_gbps=row.busbw_gbps * share, algbw_gbps=row.algbw_gbps * share,
                                       time_us=row.time_us / share) if row.size_bytes >= GIB else row
                   for row in measured.collectives)
    rows = row_expectations(dataclasses.replace(measured, collectives=slowed), load_sample("gb200-nvl72")).all()
    large = [row for row in rows if row.size_bytes >= GIB]
    assert len(large) == 8 and all(row.verdict in ("slow", "far below") for row in large)


def test_eight_gb200_gpus_over_mnnvl_read_ok_from_2_mib() -> None:
    """OCI's 2 trays of GB200 in one NVL72 rack (8 ranks, 8 B .. 32 GiB): from 2 MiB to 32 GiB every row is ok, where
    a ring at 1 us a hop and NVLS at its peak from the first byte read 4 MiB .. 64 MiB as slow or far below. (1 MiB
    stays slow: 32 us there, where NCCL's own LL model says 21.5 us; multi-node NVLink's latency is not modelled.)"""
    rows = row_expectations(_read(GB200_8_MNNVL), load_sample("gb200-nvl72")).all()
    judged = [row for row in rows if row.verdict is not None and row.size_bytes >= 2 * MIB]
    assert len(judged) == 2 * 15  # 2 MiB .. 32 GiB, out-of-place and in-place
    assert all(row.verdict == "ok" for row in judged), [(row.subject, row.ratio) for row in judged if row.verdict != "ok"]


def test_eight_h100_on_one_p5_read_ok_at_every_judged_size() -> None:
    """AWS p5 example run (8x H100, 8 B .. 16 GiB, peak 483.35): ok from 1 MiB up, rings then NVLS."""
    rows = row_expectations(_read(H100_P5), load_sample("dgx-h100")).all()
    judged = [row for row in rows if row.verdict is not None]
    assert len(judged) == 2 * 15  # 1 MiB .. 16 GiB
    assert all(row.verdict == "ok" for row in judged), [(row.subject, row.ratio) for row in judged if row.verdict != "ok"]
    assert {row.note.split(";")[0] for row in judged} == {"model: ring", "model: nvls"}


def test_an_nvlink_ring_costs_what_nccls_protocols_cost() -> None:
    """8 H100 (ring 18 x 20.6 = 370.8 GB/s), by hand from tuning.cc: LL 6.6 + 14 x 0.6 = 15 us at min(141, 185.4)
    GB/s busbw; LL128 14 + 14 x 1.9 = 40.6 us at 341.1; Simple 8.4 + 14 x 3.4 = 56 us at 370.8."""
    host = load_sample("dgx-h100").host
    links = GroupPricer(Placement((host,), (0,), (0,) * 8, tuple(range(8)), "block"), CostModel()).links(range(8))
    assert links.nvlink_generation == 4

    def ring_us(size_bytes: int) -> float:
        return collective_cost("all_reduce", links, size_bytes, "ring").time_s * 1e6

    bus = 1.75  # 2(n-1)/n
    assert ring_us(MIB) == pytest.approx(15 + MIB * bus / 141e3, rel=1e-6)
    assert ring_us(16 * MIB) == pytest.approx(40.6 + 16 * MIB * bus / (370.8 * 0.92 * 1e3), rel=1e-6)
    assert ring_us(4 * GIB) == pytest.approx(56 + 4 * GIB * bus / 370.8e3, rel=1e-6)


def test_what_if_links_keep_the_plain_alpha_beta_ring() -> None:
    """--intra/--inter links are not NVLink of a known generation: DOMAIN's worked example stays 6.28 ms."""
    links = uniform_links(8, 1, (1.0, 300.0), (5.0, 12.5))
    assert links.nvlink_generation == 0
    assert round(collective_cost("all_reduce", links, GIB).time_s * 1e3, 2) == 6.28
