"""The `nvidia-smi topo -m` reader on the real outputs in tests/fixtures/real/topo/.

Expected matrices, NIC names and affinities below were written by hand from the files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.topo.formats.nvsmi_matrix import LINK_TOKENS
from linkscope.topo.formats.nvsmi_topo import looks_like_nvsmi_topo, read_nvsmi_topo
from linkscope.topo.formats.source import load_source
from linkscope.topo.model.codec import snapshot_from_json, snapshot_to_json
from linkscope.topo.model.host import LinkKind, P2PStatus, parse_link_token
from linkscope.topo.model.snapshot import Snapshot
from support.paths import FIXTURES

REAL = FIXTURES / "real"
ONLY_P2P_STATUS = frozenset({"h100-8gpu-topo-p2p-r-only-all-ok-short-legend-no-dr.txt",
                             "l4-2gpu-topo-p2p-r-cns-chipset-not-supported-no-legend.txt"})
"""Real `nvidia-smi topo -p2p r` texts without a `topo -m` matrix: refused (the corpus test checks the line)."""
REAL_TOPO = sorted(path for path in (REAL / "topo").glob("*.txt") if path.name not in ONLY_P2P_STATUS)


def read(file_name: str) -> Snapshot:
    path = REAL / "topo" / file_name
    return read_nvsmi_topo(path.read_text(), str(path))


def rows(text: str) -> list[list[str]]:
    """A hand-written matrix: one line per row, tokens separated by spaces."""
    return [line.split() for line in text.strip().splitlines()]


def test_the_real_files_are_there() -> None:
    """Guards the parametrized tests below against an empty glob."""
    assert len(REAL_TOPO) >= 39


@pytest.mark.parametrize("path", REAL_TOPO, ids=lambda p: p.stem)
def test_real_file_structure(path: Path) -> None:
    """Every real file: symmetric matrix with X on the diagonal, valid tokens, one affinity set per GPU."""
    snapshot = read_nvsmi_topo(path.read_text(), str(path))
    host = snapshot.host
    matrix = host.matrix_tokens()
    count = len(host.gpus)
    assert count >= 1
    assert [gpu.index for gpu in host.gpus] == list(range(count))
    assert len(host.links) == count * (count - 1) // 2
    for i in range(count):
        assert matrix[i][i] == "X"
        for j in range(count):
            assert matrix[i][j] == matrix[j][i]
            if i != j:
                kind, _ = parse_link_token(matrix[i][j])
                assert kind is not LinkKind.SELF
    assert len(host.gpu_nic) == count
    for nic_row in host.gpu_nic:
        assert len(nic_row) == len(host.nics)
        for token in nic_row:
            assert parse_link_token(token)[0].is_pcie
    for gpu in host.gpus:
        assert gpu.cpu_affinity is None or gpu.cpu_affinity[0].isdigit()  # None: N/A, blank or no such column
        assert gpu.name == ""
    assert snapshot.source == str(path)
    assert {"GPU names", "GPU UUIDs", "GPU PCI bus ids", "NVLink generation"} <= {gap.subject for gap in snapshot.gaps}


@pytest.mark.parametrize("path", REAL_TOPO, ids=lambda p: p.stem)
def test_real_file_detected_and_loaded_as_source(path: Path) -> None:
    """Content detection says yes, and load_source gives the same matrix as the reader."""
    assert looks_like_nvsmi_topo(path.read_text())
    loaded = load_source(str(path))
    assert loaded.host.matrix_tokens() == read_nvsmi_topo(path.read_text(), str(path)).host.matrix_tokens()


@pytest.mark.parametrize("path", REAL_TOPO, ids=lambda p: p.stem)
def test_real_file_snapshot_round_trips_through_json(path: Path) -> None:
    """What the reader returns is a valid snapshot: JSON out and back gives the same object."""
    snapshot = read_nvsmi_topo(path.read_text(), str(path))
    assert snapshot_from_json(snapshot_to_json(snapshot)) == snapshot


@pytest.mark.parametrize("path", sorted(p for p in REAL.glob("*/*.txt") if p.parent.name != "topo"), ids=lambda p: p.stem)
def test_other_tools_output_is_not_detected(path: Path) -> None:
    """NCCL logs, nccl-tests tables and peer-copy benchmarks are not topo -m text."""
    assert not looks_like_nvsmi_topo(path.read_text())


def test_v100_hybrid_cube_mesh() -> None:
    """Old column set (CPU Affinity only), NIC column named mlx5_0 directly, NV1/NV2 cube mesh."""
    snapshot = read("v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt")
    host = snapshot.host
    assert host.matrix_tokens() == rows(
        """
        X   NV1 NV1 NV2 NV2 SYS SYS SYS
        NV1 X   NV2 NV1 SYS NV2 SYS SYS
        NV1 NV2 X   NV2 SYS SYS NV1 SYS
        NV2 NV1 NV2 X   SYS SYS SYS NV1
        NV2 SYS SYS SYS X   NV1 NV1 NV2
        SYS NV2 SYS SYS NV1 X   NV2 NV1
        SYS SYS NV1 SYS NV1 NV2 X   NV2
        SYS SYS SYS NV1 NV2 NV1 NV2 X
        """
    )
    assert [nic.name for nic in host.nics] == ["mlx5_0"]
    assert host.gpu_nic == (("NODE",), ("NODE",), ("PIX",), ("PIX",), ("SYS",), ("SYS",), ("SYS",), ("SYS",))
    assert [gpu.cpu_affinity for gpu in host.gpus] == ["0-11,24-35"] * 4 + ["12-23,36-47"] * 4
    assert all(gpu.numa_affinity is None and gpu.numa_node is None and gpu.gpu_numa_id is None for gpu in host.gpus)
    link = host.link(0, 3)
    assert (link.kind, link.nvlink_count, link.nvlink_gen, link.p2p) == (LinkKind.NVLINK, 2, None, None)
    assert host.hostname == ""
    assert "NIC device names" not in {gap.subject for gap in snapshot.gaps}


def test_a100_nv12_pairs_four_numa_nodes() -> None:
    """NVLink bridges in pairs, SYS elsewhere; a different NUMA node per GPU; no NICs."""
    host = read("a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt").host
    assert host.matrix_tokens() == rows(
        """
        X    NV12 SYS  SYS
        NV12 X    SYS  SYS
        SYS  SYS  X    NV12
        SYS  SYS  NV12 X
        """
    )
    assert host.nics == ()
    assert host.gpu_nic == ((), (), (), ())
    assert [(g.cpu_affinity, g.numa_affinity, g.numa_node, g.gpu_numa_id) for g in host.gpus] == [
        ("0-23", "0", 0, None),
        ("24-47", "1", 1, None),
        ("48-71", "2", 2, None),
        ("72-95", "3", 3, None),
    ]
    assert host.link(2, 3).nvlink_count == 12


def test_h100_thirteen_named_nics() -> None:
    """NV18 everywhere; 13 NICs from the NIC Legend (two-digit NIC10..NIC12); PIX/PXB pairs per switch."""
    snapshot = read("h100-8gpu-nv18-13nic-named-ib-eth.txt")
    host = snapshot.host
    assert host.matrix_tokens() == [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    assert [nic.name for nic in host.nics] == [f"mlx5_ib{k}" for k in range(8)] + [f"mlx5_eth{k}" for k in range(5)]
    assert [list(row) for row in host.gpu_nic] == rows(
        """
        PIX  PXB  NODE NODE SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS
        PXB  PIX  NODE NODE SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS
        NODE NODE PIX  PXB  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS
        NODE NODE PXB  PIX  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS
        SYS  SYS  SYS  SYS  PIX  PXB  NODE NODE NODE NODE NODE NODE NODE
        SYS  SYS  SYS  SYS  PXB  PIX  NODE NODE NODE NODE NODE NODE NODE
        SYS  SYS  SYS  SYS  NODE NODE PIX  PXB  NODE NODE NODE NODE NODE
        SYS  SYS  SYS  SYS  NODE NODE PXB  PIX  NODE NODE NODE NODE NODE
        """
    )
    assert [g.cpu_affinity for g in host.gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert [g.numa_node for g in host.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g.numa_affinity for g in host.gpus] == ["0"] * 4 + ["1"] * 4
    assert all(g.gpu_numa_id is None for g in host.gpus)


def test_rtx4090_tab_separated_with_empty_field() -> None:
    """Tabs, all-SYS GPUs, NIC0/NIC1 without a legend, and the empty field before GPU NUMA ID's N/A."""
    snapshot = read("rtx4090-8gpu-all-sys-tabs.txt")
    host = snapshot.host
    assert host.matrix_tokens() == [["X" if i == j else "SYS" for j in range(8)] for i in range(8)]
    assert [nic.name for nic in host.nics] == ["NIC0", "NIC1"]
    expected_gpu_nic = [("SYS", "SYS")] * 6 + [("PHB", "PHB"), ("SYS", "SYS")]
    assert list(host.gpu_nic) == expected_gpu_nic
    assert [(g.cpu_affinity, g.numa_affinity, g.numa_node, g.gpu_numa_id) for g in host.gpus] == [
        ("0-55,112-167", "0", 0, None)
    ] * 4 + [("56-111,168-223", "1", 1, None)] * 4
    gap = next(gap for gap in snapshot.gaps if gap.subject == "NIC device names")
    assert "NIC0, NIC1" in gap.reason


def test_gh200_single_gpu_numeric_gpu_numa_id() -> None:
    """One GPU, four NICs from the legend, GPU NUMA ID printed as a number."""
    host = read("gh200-1gpu-bluefield3-4nic.txt").host
    assert host.matrix_tokens() == [["X"]]
    assert host.links == ()
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert host.gpu_nic == (("NODE", "NODE", "NODE", "NODE"),)
    gpu = host.gpus[0]
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.numa_node, gpu.gpu_numa_id) == ("0-71", "0", 0, 1)


def test_l40s_node_sys_single_nic_without_legend() -> None:
    """PCIe-only NODE/SYS split by socket; the one NIC is SYS to every GPU."""
    host = read("l40s-8gpu-pcie-node-sys-1nic-pass-case.txt").host
    matrix = host.matrix_tokens()
    for i in range(8):
        for j in range(8):
            expected = "X" if i == j else ("NODE" if i // 4 == j // 4 else "SYS")
            assert matrix[i][j] == expected, (i, j)
    assert [nic.name for nic in host.nics] == ["NIC0"]
    assert host.gpu_nic == (("SYS",),) * 8
    assert [g.cpu_affinity for g in host.gpus] == ["0-89"] * 4 + ["90-179"] * 4


def test_rtx2080ti_prompt_and_p2p_block() -> None:
    """Hostname from the prompt; the `-p2p p` block (NS) fills read/write of the PIX pair."""
    snapshot = read("rtx2080ti-2gpu-pix-p2p-not-supported.txt")
    host = snapshot.host
    assert host.hostname == "autodl-container-xxxxx"
    assert host.matrix_tokens() == [["X", "PIX"], ["PIX", "X"]]
    link = host.link(0, 1)
    assert link.p2p == P2PStatus(read="NS", write="NS", nvlink=None, atomics=None)
    assert link.p2p is not None and not link.p2p.any_ok
    assert [(g.cpu_affinity, g.numa_node) for g in host.gpus] == [("24-47,72-95", 1)] * 2
    subjects = {gap.subject for gap in snapshot.gaps}
    assert "P2P status (read, write, nvlink, atomics)" in subjects
    assert "P2P status" not in subjects
    assert "hostname" not in subjects


def test_link_vocabulary_matches_model() -> None:
    """Every token the lexer accepts (bar the old SOC) is one the model parses."""
    for token in ("X", "NV1", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"):
        assert LINK_TOKENS.token.fullmatch(token)
        parse_link_token(token)
