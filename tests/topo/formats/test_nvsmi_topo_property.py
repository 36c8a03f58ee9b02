"""Property: any symmetric matrix, printed with any mix of separators (even none), reads back unchanged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo
from support.nvsmi_topo import AFFINITY_COLUMNS, SyntheticTopo, render_topo

GPU_TOKENS = [f"NV{n}" for n in (1, 2, 4, 6, 8, 12, 18)] + ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
PCIE_TOKENS = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
SEPARATORS = ["\t", " ", "    ", "\t\t", " \t "]


@st.composite
def machines(draw: st.DrawFn) -> tuple[SyntheticTopo, int]:
    """A random machine (1-8 GPUs, 0-5 NICs, symmetric tokens) and how many affinity columns it prints."""
    gpu_count = draw(st.integers(1, 8))
    nic_count = draw(st.integers(0, 5))
    labels = tuple([f"GPU{i}" for i in range(gpu_count)] + [f"NIC{k}" for k in range(nic_count)])
    size = len(labels)
    grid = [["X"] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1, size):
            choices = GPU_TOKENS if j < gpu_count else PCIE_TOKENS
            grid[i][j] = grid[j][i] = draw(st.sampled_from(choices))
    cpulists = st.sampled_from(["0-7", "0-55,112-167", "N/A", "3", "8-15,24-31"])
    numa = st.sampled_from(["0", "1", "0-1", "N/A"])
    gpu_numa_id = st.sampled_from(["N/A", "2", "17"])
    values = tuple((draw(cpulists), draw(numa), draw(gpu_numa_id)) for _ in range(gpu_count))
    topo = SyntheticTopo(labels, tuple(tuple(row) for row in grid), values, tuple(f"mlx5_{k}" for k in range(nic_count)))
    return topo, draw(st.sampled_from([0, 1, 3]))


@settings(max_examples=150, deadline=None)
@given(machine=machines(), data=st.data())
def test_render_then_read_gives_the_same_tokens(machine: tuple[SyntheticTopo, int], data: st.DataObject) -> None:
    """Tokens, NIC names and affinities survive tabs, spaces and fused cells (`SYSSYS`, `GPU0GPU1`)."""
    topo, value_count = machine
    device_count = len(topo.labels)
    gaps = data.draw(st.lists(st.sampled_from(["", *SEPARATORS]), min_size=(device_count + 1) * (device_count + 3)))
    width = device_count + 3

    def separator(row: int, column: int) -> str:
        gap = gaps[(row + 1) * width + column]
        fusable = column < device_count
        return gap if gap or fusable else "\t"

    text = render_topo(topo, separator, AFFINITY_COLUMNS[:value_count])
    host = read_nvsmi_topo(text, "random.txt").host

    def modern(token: str) -> str:
        return "SYS" if token == "SOC" else token

    assert host.matrix_tokens() == [[modern(t) for t in row] for row in topo.gpu_matrix()]
    assert [list(row) for row in host.gpu_nic] == [[modern(t) for t in row] for row in topo.gpu_nic()]
    assert [nic.name for nic in host.nics] == list(topo.nic_names)
    expected_values = [
        [None if v == "N/A" else v for v in row[:value_count]] + [None] * (3 - value_count) for row in topo.gpu_values
    ]
    assert [[g.cpu_affinity, g.numa_affinity, None if g.gpu_numa_id is None else str(g.gpu_numa_id)] for g in host.gpus] == (
        expected_values
    )
