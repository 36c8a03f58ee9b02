"""Numbers in `nvidia-smi topo -m` text and profiler traces go through the one bounded parser; nothing
recurses over the input's length (issue 24, cause 3)."""

from __future__ import annotations

import io
import json

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo
from linkscope.topo.formats.trace import read_rank_trace
from support.trace import TraceBuilder

HUGE = "9" * 5000
BASE = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV18\tPIX\t0-55\t0\n"
        "GPU1\tNV18\t X \tSYS\t0-55\t0\n"
        "NIC0\tPIX\tSYS\t X \n")


@pytest.mark.parametrize(("text", "words"), [
    pytest.param(BASE.replace("GPU1", f"GPU{HUGE}"), ["line 1", "device label", "not an integer"], id="gpu-label"),
    pytest.param(BASE.replace("NV18", f"NV{HUGE}"), ["line 2", "GPU0 to GPU1", "NVLink count"], id="nv-count"),
    pytest.param(BASE.replace("0-55\t0\n", f"0-55\t{HUGE}\n", 1), ["line 2", "GPU0 NUMA Affinity"], id="numa-affinity"),
    pytest.param(BASE.replace("NV18", "NV65"), ["NVLink count", "above the maximum 64"], id="nv-count-past-cap"),
])
def test_huge_numbers_in_topology_text_are_one_line(text: str, words: list[str]) -> None:
    with pytest.raises(InputError) as raised:
        read_nvsmi_topo(text, "topo.txt")
    message = str(raised.value)
    assert message.startswith("topo.txt: ") and "\n" not in message and len(message) < 300
    assert all(word in message for word in words), message


def test_a_plain_numa_node_is_read_and_a_node_list_kept_as_text() -> None:
    snapshot = read_nvsmi_topo(BASE.replace("0-55\t0\n", "0-55\t0-1\n", 1), "topo.txt")
    gpus = snapshot.hosts[0].gpus
    assert (gpus[0].numa_node, gpus[0].numa_affinity) == (None, "0-1")
    assert gpus[1].numa_node == 0


def test_fifteen_hundred_fused_header_labels_do_not_recurse() -> None:
    text = BASE.replace("\tNIC0\t", "\t" + "mlx5_0" * 1500 + "\t").replace("NIC0\t", "mlx5_0\t")
    with pytest.raises(InputError, match="line 1: duplicate column mlx5_0"):
        read_nvsmi_topo(text, "topo.txt")


def test_fused_header_labels_still_split_when_the_split_is_unique() -> None:
    text = ("\tGPU0\tGPU1\tmlx5_0mlx5_1\tCPU Affinity\n"
            "GPU0\t X \tNV18\tPIX\tSYS\t0-55\n"
            "GPU1\tNV18\t X \tSYS\tPIX\t0-55\n"
            "mlx5_0\tPIX\tSYS\t X \tSYS\n"
            "mlx5_1\tSYS\tPIX\tSYS\t X \n")
    host = read_nvsmi_topo(text, "topo.txt").hosts[0]
    assert [nic.name for nic in host.nics] == ["mlx5_0", "mlx5_1"]


def test_a_five_thousand_digit_rank_in_a_trace_is_an_unknown_group() -> None:
    builder = TraceBuilder(0, 2)
    builder.step(1, 0, 1000)
    builder.collective("allreduce", 1024, 10, 20, 100)
    document = builder.document()
    for event in document["traceEvents"]:
        if "Process Group Ranks" in event.get("args", {}):
            event["args"]["Process Group Ranks"] = f"[0, {HUGE}]"
    trace = read_rank_trace(io.StringIO(json.dumps(document)), "rank0.json")
    assert [call.group_ranks for call in trace.collectives] == [(0, 1)]  # from pg_config, not the damaged string
