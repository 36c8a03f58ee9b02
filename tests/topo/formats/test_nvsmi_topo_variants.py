"""The `nvidia-smi topo -m` reader on the layout variants real machines produce.

Files come from tests/fixtures/topo_variants/ (synthetic, written by hand) or are built inline.
"""

from __future__ import annotations

import pytest

from linkscope.topo.formats.nvsmi_topo import looks_like_nvsmi_topo, read_nvsmi_topo
from linkscope.topo.model.host import LinkKind, P2PStatus
from linkscope.topo.model.snapshot import Snapshot
from support.nvsmi_topo import dgx_like, render_topo
from support.paths import FIXTURES

VARIANTS = FIXTURES / "topo_variants"
REAL_TOPO = FIXTURES / "real" / "topo"


def read(file_name: str) -> Snapshot:
    return read_nvsmi_topo((VARIANTS / file_name).read_text(), file_name)


def subjects(snapshot: Snapshot) -> set[str]:
    return {gap.subject for gap in snapshot.gaps}


@pytest.mark.parametrize("separator", ["\t", "    ", " ", "\t  "], ids=["tab", "four-spaces", "one-space", "tab-spaces"])
def test_separators_do_not_matter(separator: str) -> None:
    """The same machine printed with tabs or runs of spaces reads back to the same matrix."""
    topo = dgx_like(4, 2, gpu_token="NV12")
    host = read_nvsmi_topo(render_topo(topo, separator), "sep.txt").host
    assert host.matrix_tokens() == topo.gpu_matrix()
    assert [list(row) for row in host.gpu_nic] == topo.gpu_nic()
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_1"]


def test_caption_prompt_fence_and_blank_lines_around_the_matrix() -> None:
    """Caption, code fence, prompt, blank lines and legends around a tab matrix; hostname from the prompt."""
    snapshot = read("prompt-caption-blank-lines.txt")
    host = snapshot.host
    assert host.hostname == "fs-207"
    assert host.matrix_tokens() == [["X" if i == j else "NV12" for j in range(4)] for i in range(4)]
    assert host.gpu_nic == (("PXB", "SYS"), ("PXB", "SYS"), ("SYS", "PXB"), ("SYS", "PXB"))
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_1"]
    assert [g.cpu_affinity for g in host.gpus] == ["0-31,64-95", "0-31,64-95", "32-63,96-127", "32-63,96-127"]
    assert [g.gpu_numa_id for g in host.gpus] == [None] * 4
    assert "hostname" not in subjects(snapshot)


def test_nic_columns_out_of_order_are_put_in_nic_order() -> None:
    """Header `NIC1 NIC0`: NICs come back as NIC0, NIC1 with their gpu_nic columns swapped to match."""
    host = read("nic-columns-out-of-order.txt").host
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_3"]
    assert host.gpu_nic == (("PIX", "SYS"), ("SYS", "PIX"))
    assert host.matrix_tokens() == [["X", "NV4"], ["NV4", "X"]]


def test_non_contiguous_nic_legend() -> None:
    """NIC0, NIC2, NIC3 (no NIC1): names come from the legend, by label, not by position."""
    snapshot = read("nic-legend-non-contiguous.txt")
    host = snapshot.host
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_2", "bnxt_re0"]
    assert host.gpu_nic == (("PIX", "NODE", "SYS"), ("PHB", "NODE", "SYS"))
    assert host.link(0, 1).kind is LinkKind.PHB
    assert "NIC device names" not in subjects(snapshot)


def test_old_driver_soc_reads_as_sys() -> None:
    """Old drivers: `SOC` for SYS, the old legend wording, an mlx4 NIC column and a RHEL-style prompt."""
    host = read("old-driver-soc-legend.txt").host
    assert host.hostname == "k80-node03"
    assert host.matrix_tokens() == [
        ["X", "PIX", "SYS", "SYS"],
        ["PIX", "X", "SYS", "SYS"],
        ["SYS", "SYS", "X", "PIX"],
        ["SYS", "SYS", "PIX", "X"],
    ]
    assert host.link(0, 2).kind is LinkKind.SYS
    assert [nic.name for nic in host.nics] == ["mlx4_0"]
    assert host.gpu_nic == (("SYS",), ("SYS",), ("PHB",), ("PHB",))
    assert [g.cpu_affinity for g in host.gpus] == ["0-7,16-23", "0-7,16-23", "8-15,24-31", "8-15,24-31"]
    assert all(g.numa_affinity is None and g.gpu_numa_id is None for g in host.gpus)


def test_na_values_are_none() -> None:
    """A VM prints N/A for every affinity; a conda prompt still gives the hostname."""
    host = read("na-values-vm.txt").host
    assert host.hostname == "vm-gpu-07"
    assert [(g.cpu_affinity, g.numa_affinity, g.numa_node, g.gpu_numa_id) for g in host.gpus] == [(None, None, None, None)] * 2


def test_numa_affinity_range_has_no_single_node() -> None:
    """NUMA Affinity `0-1` is kept as printed; numa_node is only set for a single number."""
    host = read("numa-affinity-range.txt").host
    assert [(g.numa_affinity, g.numa_node) for g in host.gpus] == [("0-1", None), ("0-1", None)]


def test_no_affinity_columns_at_all() -> None:
    """Only device columns: every affinity is None, and nothing is reported missing."""
    text = "        GPU0    GPU1\nGPU0     X      NV2\nGPU1    NV2      X\n"
    snapshot = read_nvsmi_topo(text, "bare.txt")
    assert snapshot.host.matrix_tokens() == [["X", "NV2"], ["NV2", "X"]]
    assert all(g.cpu_affinity is None and g.numa_affinity is None for g in snapshot.host.gpus)
    assert not any(gap.subject.startswith("GPU0 ") for gap in snapshot.gaps)


def test_missing_trailing_value_becomes_a_gap() -> None:
    """A GPU row that prints fewer values than columns: the rest are None and recorded as gaps."""
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t0-7\t0\nGPU1\tPIX\t X \t0-7\n"
    snapshot = read_nvsmi_topo(text, "short.txt")
    assert [(g.cpu_affinity, g.numa_affinity) for g in snapshot.host.gpus] == [("0-7", "0"), ("0-7", None)]
    gap = next(gap for gap in snapshot.gaps if gap.subject == "GPU1 NUMA Affinity")
    assert "line 3" in gap.reason


def test_single_gpu_minimal() -> None:
    """One GPU and nothing else."""
    snapshot = read_nvsmi_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n", "one.txt")
    assert snapshot.host.matrix_tokens() == [["X"]]
    assert snapshot.host.gpus[0].numa_node == 0
    assert snapshot.host.nics == ()


def test_fused_separators_read_like_the_clean_twin() -> None:
    """`SYSSYS`, `NODEPIX`, `SYSPIX`, `NV18NV18` and `NIC7NIC8` (header) split back into the clean file's host."""
    fused_text = (VARIANTS / "fused-separators.txt").read_text()
    for glued in ("SYSSYS", "NODEPIX", "SYSPIX", "NV18NV18", "NIC7NIC8"):
        assert glued in fused_text
    fused = read_nvsmi_topo(fused_text, "fused.txt").host
    clean = read("fused-separators-clean.txt").host
    assert fused == clean
    assert fused.matrix_tokens() == [["X" if i == j else "NV18" for j in range(4)] for i in range(4)]
    assert [nic.name for nic in fused.nics] == [f"mlx5_{k}" for k in range(9)]
    assert fused.gpu_nic[0] == ("PIX", "NODE", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS")
    assert fused.gpu_nic[2] == ("SYS", "SYS", "SYS", "SYS", "SYS", "PIX", "NODE", "NODE", "NODE")


@pytest.mark.parametrize(
    ("row", "token", "expected_cpu"),
    [
        ("GPU1\tPIX\t X \tSYS0-7", "SYS", "0-7"),
        ("GPU1\tPIX\t X \tNV20-7", "NV2", "0-7"),
        ("GPU1\tPIX\t XNV2N/A", "NV2", None),
    ],
    ids=["sys-then-cpulist", "nv-digits-split-uniquely", "x-nv-then-na"],
)
def test_token_fused_with_first_value(row: str, token: str, expected_cpu: str | None) -> None:
    """A token glued to the CPU Affinity splits when only one reading gives a valid value."""
    text = f"\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tPIX\tSYS\t0-7\n{row}\nGPU2\tSYS\t{token}\t X \t8-15\n"
    host = read_nvsmi_topo(text, "glued.txt").host
    assert host.matrix_tokens()[1] == ["PIX", "X", token]
    assert host.gpus[1].cpu_affinity == expected_cpu


def test_nic_columns_named_by_device_fused_in_header() -> None:
    """`mlx5_0mlx5_1` in the header splits into the two row labels."""
    text = "\tGPU0\tmlx5_0mlx5_1\tCPU Affinity\nGPU0\t X \tPIX\tSYS\t0-7\nmlx5_0\tPIX\t X \tSYS\nmlx5_1\tSYS\tSYS\t X \n"
    host = read_nvsmi_topo(text, "named.txt").host
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_1"]
    assert host.gpu_nic == (("PIX", "SYS"),)


def test_crlf_and_trailing_whitespace() -> None:
    """Windows line endings and trailing blanks on every line change nothing."""
    path = REAL_TOPO / "h100-8gpu-nv18-13nic-named-ib-eth.txt"
    text = path.read_text()
    mangled = "\r\n".join(line + " \t " for line in text.split("\n"))
    assert read_nvsmi_topo(mangled, "crlf.txt").host == read_nvsmi_topo(text, "lf.txt").host


def test_44_columns_8_gpus_32_nics() -> None:
    """8 GPUs + 32 NICs + 3 affinity columns (44 with the row label), NIC10..NIC31 two-digit names."""
    topo = dgx_like(8, 32)
    text = render_topo(topo)
    assert len(text.split("\n")[1].split("\t")) == 1 + 8 + 32 + 3
    snapshot = read_nvsmi_topo(text, "wide.txt")
    host = snapshot.host
    assert host.matrix_tokens() == topo.gpu_matrix()
    assert [list(row) for row in host.gpu_nic] == topo.gpu_nic()
    assert [nic.name for nic in host.nics] == [f"mlx5_{k}" for k in range(32)]
    assert [g.numa_node for g in host.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_p2p_blocks_fill_every_field() -> None:
    """r/w/n/a/p blocks after their prompts: each fills its own field; r and w win over p."""
    snapshot = read("p2p-all-modes.txt")
    host = snapshot.host
    assert host.hostname == "gpu-node-01"
    assert host.link(0, 1).p2p == P2PStatus(read="OK", write="OK", nvlink="OK", atomics="OK")
    assert host.link(0, 2).p2p == P2PStatus(read="CNS", write="TNS", nvlink="NS", atomics="GNS")
    assert host.link(2, 3).p2p == P2PStatus(read="OK", write="OK", nvlink="OK", atomics="OK")
    assert not any(gap.subject.startswith("P2P") for gap in snapshot.gaps)


def test_p2p_p_block_stands_in_for_read_write_only_off_nvlink() -> None:
    """`-p2p p` (PCIe) fills read/write of PCIe pairs; an NVLink pair's read/write stay unknown."""
    text = (
        "$ nvidia-smi topo -m\n        GPU0    GPU1    GPU2\n"
        "GPU0     X      NV4     PHB\nGPU1    NV4      X      PHB\nGPU2    PHB     PHB      X\n\n"
        "$ nvidia-smi topo -p2p p\n        GPU0    GPU1    GPU2\n"
        " GPU0   X       OK      OK\n GPU1   OK      X       NS\n GPU2   OK      NS      X\n"
    )
    host = read_nvsmi_topo(text, "p.txt").host
    assert host.link(0, 1).p2p is None
    assert host.link(0, 2).p2p == P2PStatus(read="OK", write="OK")
    assert host.link(1, 2).p2p == P2PStatus(read="NS", write="NS")


def test_p2p_block_without_command_is_ignored_with_a_gap() -> None:
    """A P2P matrix whose capability no command line names is not guessed: it becomes a gap."""
    text = (
        "        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n\n"
        "        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      X\n"
    )
    snapshot = read_nvsmi_topo(text, "anon.txt")
    assert snapshot.host.link(0, 1).p2p is None
    assert "P2P matrix at line 5" in subjects(snapshot)
    assert "P2P status" in subjects(snapshot)


def test_command_quoted_in_a_caption_does_not_relabel_the_matrix() -> None:
    """The tokens decide whether a block is a link or a P2P matrix; a quoted command only names the P2P kind."""
    text = "# also ran `nvidia-smi topo -p2p r`, see below\n        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4      X\n"
    snapshot = read_nvsmi_topo(text, "quoted.txt")
    assert snapshot.host.matrix_tokens() == [["X", "NV4"], ["NV4", "X"]]
    assert snapshot.host.link(0, 1).p2p is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("        GPU0    GPU1\nGPU0     X      PIX\n", True),
        ("\tGPU0GPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-3\n", True),
        ('{"schema": 1, "hosts": []}', False),
        ("GPU0 is hot and GPU1 is fine\n", False),
        ("GPU0     X      PIX\nGPU1    PIX      X\n", False),
        ("", False),
    ],
    ids=["header", "fused-header", "json", "prose", "rows-without-header", "empty"],
)
def test_looks_like(text: str, expected: bool) -> None:
    """Detection needs a header line that starts with a GPU0 column."""
    assert looks_like_nvsmi_topo(text) is expected


def test_variant_files_all_read() -> None:
    """Every synthetic variant file is detected and reads to a symmetric matrix."""
    files = sorted(VARIANTS.glob("*.txt"))
    assert len(files) >= 8
    for path in files:
        text = path.read_text()
        assert looks_like_nvsmi_topo(text), path.name
        matrix = read_nvsmi_topo(text, path.name).host.matrix_tokens()
        assert all(matrix[i][j] == matrix[j][i] for i in range(len(matrix)) for j in range(len(matrix))), path.name
