"""Inconsistent `nvidia-smi topo -m` text is reported in one line naming file and line, never guessed."""

from __future__ import annotations

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo

HEADER = "        GPU0    GPU1    GPU2    CPU Affinity\n"
GOOD_ROWS = ["GPU0     X      NV2     SYS     0-7", "GPU1    NV2      X      SYS     0-7", "GPU2    SYS     SYS      X      8-15"]


def with_row(index: int, row: str) -> str:
    rows = list(GOOD_ROWS)
    rows[index] = row
    return HEADER + "\n".join(rows) + "\n"


CASES = [
    pytest.param(
        with_row(2, "GPU2    SYS     NV2      X      8-15"),
        4,
        ["not symmetric", "GPU1->GPU2 is SYS", "GPU2->GPU1 is NV2"],
        id="asymmetric-gpu-pair",
    ),
    pytest.param(with_row(1, "GPU1    NV2      X      0-7"), 3, ["GPU1", "2 link tokens for 3 columns"], id="row-too-short"),
    pytest.param(with_row(1, "GPU1    NV2      X      SYS   SYS  0-7"), 3, ["more link tokens"], id="row-too-long"),
    pytest.param(with_row(1, "GPU1    NV2      X      SYSSYS  0-7"), 3, ["more link tokens", "SYSSYS"], id="fused-overrun"),
    pytest.param(
        with_row(0, "GPU0     X      NVL     SYS     0-7"), 2, ["unknown link token 'NVL'", "column GPU1"], id="unknown-token"
    ),
    pytest.param(with_row(0, "GPU0     X      NV2     SYS     0-7  0  1"), 2, ["3 values", "1 columns"], id="too-many-values"),
    pytest.param(with_row(0, "GPU0     X      NV2     SYS     zero"), 2, ["unreadable value 'zero'"], id="bad-value"),
    pytest.param(HEADER + "\n".join(GOOD_ROWS[:2]) + "\n", 3, ["truncated", "no row for GPU2"], id="truncated"),
    pytest.param(HEADER + "\n".join(GOOD_ROWS[:2]) + "\nLegend:\n", 3, ["truncated"], id="truncated-before-legend"),
    pytest.param(
        "        GPU0    GPU1    GPU1\n" + "\n".join(GOOD_ROWS) + "\n", 1, ["duplicate column GPU1"], id="duplicate-column"
    ),
    pytest.param(HEADER + "\n".join([*GOOD_ROWS, GOOD_ROWS[1]]) + "\n", 5, ["second row GPU1", "line 3"], id="duplicate-row"),
    pytest.param(
        HEADER + "\n".join([*GOOD_ROWS, "GPU7    SYS     SYS     SYS      X"]) + "\n", 5, ["GPU7"], id="row-without-column"
    ),
    pytest.param(with_row(1, "GPU1    NV2     NV2     SYS     0-7"), 3, ["GPU1 against itself is 'NV2'"], id="diagonal-not-x"),
    pytest.param(
        with_row(2, "GPU2     X      SYS      X      8-15"), 4, ["X (self) between different devices"], id="x-off-diagonal"
    ),
    pytest.param(
        "        GPU0    GPU1    GPU2    CPU Affinity\n"
        "GPU0     X      NV12    SYS     0-23\nGPU1    NV12     X      NV120-23\nGPU2    SYS     NV12     X      24-47\n",
        3,
        ["'NV120-23' that reads as NV1 + 20-23 or NV12 + 0-23"],
        id="fused-nv-ambiguous",
    ),
    pytest.param("        GPU0    GPU1\n\nGPU0  X  PIX\n", 1, ["not followed by any row"], id="header-without-rows"),
    pytest.param(
        "        GPU0    NIC0\nGPU0     X      PIX\nNIC0    PIX      X\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n",
        8,
        ["NIC Legend entry NIC1", "no column"],
        id="legend-entry-without-column",
    ),
    pytest.param(
        "        GPU0    NIC0    NIC1\nGPU0     X      PIX     SYS\nNIC0    PIX      X      SYS\nNIC1    SYS     SYS      X\n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n",
        1,
        ["column NIC1 is missing from the NIC Legend"],
        id="column-missing-from-legend",
    ),
    pytest.param(
        "        GPU0    NIC0\nGPU0     X      PIX\nNIC0    PIX      X\n\n  NIC0: mlx5_0\n  NIC0: mlx5_9\n",
        6,
        ["NIC0", "'mlx5_9'", "line 5"],
        id="legend-contradiction",
    ),
    pytest.param(
        "        GPU0    NIC0\nGPU0     X      PIX\nNIC0    SYS      X\n",
        3,
        ["GPU0->NIC0 is PIX", "NIC0->GPU0 is SYS"],
        id="asymmetric-gpu-nic",
    ),
    pytest.param(
        "$ nvidia-smi topo -m\n        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n\n"
        "$ nvidia-smi topo -p2p r\n        GPU0    GPU1\n GPU0   X       OK\n GPU1   NS      X\n",
        9,
        ["not symmetric", "GPU0->GPU1 is OK", "GPU1->GPU0 is NS"],
        id="asymmetric-p2p",
    ),
    pytest.param(
        "$ nvidia-smi topo -m\n        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n\n"
        "$ nvidia-smi topo -p2p r\n        GPU0\n GPU0   X\n",
        7,
        ["-p2p r` matrix has columns GPU0", "GPUs GPU0 GPU1"],
        id="p2p-other-gpus",
    ),
    pytest.param(
        "$ nvidia-smi topo -m\n        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n\n"
        "$ nvidia-smi topo -p2p r\n        GPU0    GPU1\n GPU0   X       PIX\n GPU1   PIX     X\n",
        7,
        ["second `nvidia-smi topo -m` matrix"],
        id="p2p-command-with-link-tokens",
    ),
    pytest.param(
        "        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n\n        GPU0\nGPU0     X\n",
        5,
        ["second `nvidia-smi topo -m` matrix", "line 1"],
        id="two-matrices",
    ),
]


@pytest.mark.parametrize(("text", "line", "fragments"), CASES)
def test_bad_input_is_one_line_naming_file_and_line(text: str, line: int, fragments: list[str]) -> None:
    """Each inconsistency raises InputError: one line, the file name, the line number, what is wrong."""
    with pytest.raises(InputError) as caught:
        read_nvsmi_topo(text, "box.txt")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"box.txt: line {line}: "), message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    "text",
    ["", "no matrix here\njust words\n", "GPU0     X      PIX\nGPU1    PIX      X\n"],
    ids=["empty", "prose", "rows-without-header"],
)
def test_no_matrix_at_all(text: str) -> None:
    """Text without a header line is reported as having no matrix."""
    with pytest.raises(InputError, match=r"^box\.txt: no `nvidia-smi topo -m` matrix"):
        read_nvsmi_topo(text, "box.txt")


def test_only_p2p_matrix() -> None:
    """A -p2p matrix alone is not a topology."""
    text = "$ nvidia-smi topo -p2p r\n        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      X\n"
    with pytest.raises(InputError, match=r"only `nvidia-smi topo -p2p` matrices"):
        read_nvsmi_topo(text, "box.txt")


def test_gpu_numa_id_must_be_a_number() -> None:
    """GPU NUMA ID is one node id or N/A, never a range."""
    text = "        GPU0    CPU Affinity    NUMA Affinity   GPU NUMA ID\nGPU0     X      0-7     0               2-3\n"
    with pytest.raises(InputError, match=r"^box\.txt: line 2: GPU0 GPU NUMA ID '2-3'"):
        read_nvsmi_topo(text, "box.txt")
