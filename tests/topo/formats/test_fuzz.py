"""Every reader of pasted text, on any text: a result or one InputError, never another exception,
and linear time on long adversarial lines."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nccl_tests import looks_like_nccl_tests, read_nccl_tests
from linkscope.topo.formats.nvsmi_topo import read_nvsmi_topo
from linkscope.topo.formats.p2p_matrices import read_nvbandwidth, read_p2p_bandwidth_latency_test
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import parse_source_text

READERS: dict[str, Callable[[str, str], object]] = {
    "nccl-tests": read_nccl_tests,
    "nvbandwidth": read_nvbandwidth,
    "p2pBandwidthLatencyTest": read_p2p_bandwidth_latency_test,
    "nvidia-smi topo -m": read_nvsmi_topo,
    "import (detects)": read_measurements,
    "SOURCE (detects)": parse_source_text,
}

_PIECES = [
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
    "     1048576        262144     float     sum      -1    279.5    3.75    3.75      0    280.2    3.74    3.74      0",
    "           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A",
    "./build/all_gather_perf -b 8 -e 1G -g 2", "mpirun -np 99999999999999999999 ./all_reduce_perf",
    "#  Rank  7 Group  0 Pid  1 on h device  7 [0x01] GPU", "# nThread 1 nGpus 8", "# Collective test concluded: reduce_perf",
    "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1", "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)",
    "P2P=Disabled Latency Matrix (us)", "   D\\D     0      1", "     0 1.0 N/A", "     1 2.0", "   GPU     0      1",
    "P2P Connectivity Matrix", "Device=0 CAN Access Peer Device=1",
    "memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)", "Running device_to_device_memcpy_write_ce.",
    "          0         1", "0       N/A    370.90", "1    1e308       N/A", "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity",
    "GPU0\t X \tNV12\t0-7\t0", "GPU1\tNV12\t X \t0-7\t0", "[1,3]<stdout>:", " 3: ", "  7 ", "> ", "\x1b[4m", "\r", "١٢", "²",
]


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=40)), max_size=25),
       reader=st.sampled_from(sorted(READERS)))
def test_any_text_reads_or_is_one_input_error(lines: list[str], reader: str) -> None:
    text = "\n".join(lines)
    try:
        READERS[reader](text, "fuzz.txt")
    except InputError as error:
        assert "\n" not in str(error)
    looks_like_nccl_tests(text)


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("0123456789 .-#|\t\nsumfloatNCCL INFO[]:<>()GPU=Matrix"), max_size=400))
def test_any_text_of_table_characters_reads_or_is_one_input_error(text: str) -> None:
    for reader in READERS.values():
        with contextlib.suppress(InputError):
            reader(text, "fuzz.txt")


HOSTILE = [
    "1" * 200_000, "1 " * 100_000, "# " * 100_000, "#  size  count  type " * 10_000, "-g" + " " * 200_000 + "x",
    "./all_reduce_perf" + " -g" * 60_000, "GPU(row) -> GPU(column) " * 8_000 + " " * 50_000 + "x",
    "P2P=Enabled Latency " + " " * 200_000, "P2P=Enabled Latency" + " " * 200_000 + "x",
    "Unidirectional P2P=Enabled Bandwidth" + " \t" * 100_000 + "(P2P Reads)" + " " * 100_000 + "x",
    "memcpy CE GPU(row) ->" + " " * 200_000 + "x", "GPU(row) -> GPU(column)" + " " * 200_000 + "x",
    "# Collective test starting:" + " " * 200_000 + "x", "#  Rank" + " " * 200_000 + "x",
    "x -g" + "\t" * 200_000 + "x", "Device=0 CAN Access Peer " * 20_000, "[0] " * 100_000,
    "\tGPU0" * 50_000, "  1 " * 100_000, "NCCL INFO " * 40_000, "# Rank " * 50_000,
]


@pytest.mark.parametrize("reader", sorted(READERS))
def test_long_adversarial_lines_take_linear_time(reader: str) -> None:
    for line in HOSTILE:
        start = time.perf_counter()
        with contextlib.suppress(InputError):
            READERS[reader](line + "\n" + line, "hostile.txt")
        assert time.perf_counter() - start < 2.0, (reader, line[:40])
