"""The NCCL log reader on the variants real logs come in: prefixes, escapes, fused and cut lines, several
communicators, old formats; and its fuzz discipline (InputError or a result, linear time)."""

from __future__ import annotations

import contextlib
import io
import random
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_NCCL_LOG_LINE_BYTES
from linkscope.topo.formats.nccl_log import read_nccl_log_stream, read_nccl_log_text
from linkscope.topo.formats.nccl_log_model import NcclLog
from linkscope.topo.nccl.checks import nccl_findings, rank_hosts, same_host
from linkscope.topo.nccl.placement import place_edges
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "nccl_debug"
REAL_FILES = sorted(REAL.glob("*.txt"))
DGX1 = load_sample("dgx1-v100")

TWO_HOSTS = """\
nodeA:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
nodeA:100:120 [0] NCCL INFO ncclCommInitRank comm 0x11 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xabc - Init START
nodeA:101:121 [1] NCCL INFO ncclCommInitRank comm 0x22 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 20000 commId 0xabc - Init START
nodeB:200:220 [0] NCCL INFO ncclCommInitRank comm 0x33 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xabc - Init START
nodeB:201:221 [1] NCCL INFO ncclCommInitRank comm 0x44 rank 3 nranks 4 cudaDev 1 nvmlDev 1 busId 20000 commId 0xabc - Init START
nodeA:100:120 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
nodeA:100:120 [0] NCCL INFO Channel 00/02 :    0   1   2   3
nodeA:100:130 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
nodeA:101:131 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
nodeB:200:230 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/Socket/0
nodeB:200:230 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/CUMEM/read
nodeB:201:231 [1] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0
nodeB:201:231 [1] misc/socket.cc:50 NCCL WARN socket timeout
"""


def read(text: str) -> NcclLog:
    return read_nccl_log_text(text, "test.log")


def summary(log: NcclLog) -> tuple[object, ...]:
    """What a reading amounts to, independent of line numbers."""
    hosts = rank_hosts(log)
    edges = sorted((edge.comm or "", edge.src, edge.dst or -1, edge.channel, edge.transport, edge.detail,
                    edge.side or "", same_host(edge, hosts)) for edge in log.edges)
    return (log.version, sorted((rank.comm or "", rank.rank, rank.host or "") for rank in log.ranks), edges,
            log.env, sorted(finding.code for finding in nccl_findings(log)))


def test_two_hosts_read_whole() -> None:
    log = read(TWO_HOSTS)
    assert log.version == "2.21.5+cuda12.4"
    assert [(rank.rank, rank.host, rank.bus_id, rank.comm) for rank in log.ranks] == [
        (0, "nodeA", "1b000", "0xabc"), (1, "nodeA", "20000", "0xabc"), (2, "nodeB", "1b000", "0xabc"),
        (3, "nodeB", "20000", "0xabc")]
    hosts = rank_hosts(log)
    assert {(edge.src, edge.dst, edge.transport): same_host(edge, hosts) for edge in log.edges} == {
        (0, 1, "SHM"): True, (1, 2, "NET"): False, (2, 3, "P2P"): True, (3, 0, "NET"): False}
    findings = {finding.code: finding for finding in nccl_findings(log)}
    assert sorted(findings) == ["env-override", "intra-host-shm", "nccl-warn", "net-no-gdr", "net-socket"]
    assert findings["intra-host-shm"].ranks == (0, 1) and "NCCL_P2P_DISABLE" in findings["intra-host-shm"].message
    assert findings["env-override"].severity == "warning"
    assert findings["net-socket"].ranks == (1, 2) and findings["net-no-gdr"].ranks == (0, 3)


PREFIXES = {
    "open-mpi": lambda index: f"[1,{index % 4}]<stdout>:",
    "torchrun": lambda index: f"[default{index % 4}]:",
    "python-logging": lambda index: "2025-11-12 20:42:20,261 - INFO - ",
    "iso-utc": lambda index: "2025-11-12T20:42:20.261234567Z ",
    "kubectl": lambda index: "[pod/trainer-0/main] ",
    "quote": lambda index: "> ",
    "ansi": lambda index: "\x1b[32m",
    "crlf": lambda index: "",
}


@pytest.mark.parametrize("style", sorted(PREFIXES))
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda path: path.name)
def test_every_prefix_style_reads_like_the_clean_file(path: Path, style: str) -> None:
    text = path.read_text()
    prefixed = "\n".join(PREFIXES[style](index) + line + ("\r" if style == "crlf" else "")
                         for index, line in enumerate(text.split("\n")))
    if style == "kubectl" and not any(re.search(r"[\w.-]+:\d+:\d+ \[\d+\] NCCL", line) for line in text.split("\n")):
        # NCCL's own prefix lost its host in this paste, so the pod name is the host of every printing rank
        assert {rank.host for rank in read(prefixed).ranks} - {None} == {"trainer-0"}
        return
    assert summary(read(prefixed)) == summary(read(text))


def test_host_from_a_launcher_prefix_when_nccl_prints_none() -> None:
    text = ("[pod/worker-3/main] [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
            "[pod/worker-3/main] [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct\n")
    log = read(text)
    assert {rank.rank: rank.host for rank in log.ranks} == {0: "worker-3", 1: "worker-3"}
    assert [finding.code for finding in nccl_findings(log)] == ["intra-host-shm"]


def test_fused_and_cut_lines_are_skipped_and_counted_never_guessed() -> None:
    fused = ("nodeA:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2PnodeA:2:2 [1] NCCL INFO Channel 00/0 : "
             "1[1] -> 0[0] via P2P/IPC")
    cut = "nodeA:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1["
    glued = "training step 5 loss=2.1nodeA:1:1 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/IPC"
    log = read("\n".join(["nodeA:1:1 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/IPC", fused, cut, glued,
                          "nodeA:1:1 [0] NCCL"]))
    assert [(edge.channel, edge.detail) for edge in log.edges] == [(3, "P2P/IPC")]
    assert log.skipped_count == 4 and log.skipped_lines == (2, 3, 4, 5)


def test_framework_nccl_errors_are_kept() -> None:
    log = read("h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
               "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"
               "h:1:1 [0] NCCL INFO transport/net_ib.cc:818 -> 2\n")
    assert [(error.text[:34], error.line) for error in log.errors] == [
        ("torch.distributed.DistBackendError", 2), ("transport/net_ib.cc:818 -> 2", 3)]


def test_a_transport_nccl_does_not_print_is_skipped_not_guessed() -> None:
    log = read("h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
               "h:1:1 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via WORMHOLE/0\n"
               "h:1:1 [0] NCCL INFO CollNet 00 : 0 [send] via MAGIC/0\n")
    assert [edge.transport for edge in log.edges] == ["P2P"] and log.skipped_lines == (2, 3)


def test_comm_split_lines_give_their_comm_id_and_a_cut_init_line_is_skipped() -> None:
    log = read("h:1:1 [0] NCCL INFO ncclCommSplit comm 0x55 rank 1 nranks 2 cudaDev 3 nvmlDev 3 busId 3d000 "
               "parent 0x44 color 1 key 1 commId 0xabc - Init COMPLETE\n"
               "h:1:2 [1] NCCL INFO comm 0x66 rank 0 nranks 2 cudaDev 1 nvmlDev\n")
    assert [(rank.comm, rank.rank, rank.bus_id, rank.cuda_dev) for rank in log.ranks] == [("0xabc", 1, "3d000", 3)]
    assert log.skipped_lines == (2,)


def test_old_formats() -> None:
    log = read("host1:9:9 [0] NCCL INFO Ring 00 :  0 1 2 3\n"
               "host1:9:9 [3] NCCL INFO Ring 00 : 3[3] -> 0[0] via P2P/IPC\n"
               "host1:9:9 [0] NCCL INFO Ring 01 : 3 -> 0 -> 1\n"
               "host1:9:9 [0] NCCL INFO Ring 00 : 0 -> 1 [receive] via NET/IB/0/GDRDMA\n")
    assert log.communicators[0].rings == ((0, (0, 1, 2, 3)),)
    assert [(edge.src, edge.dst, edge.transport, edge.side) for edge in log.edges] == [
        (0, 1, "NET", "receive"), (3, 0, "P2P", None)]
    assert log.skipped_count == 0


def test_collnet_and_nvls() -> None:
    log = read("h:1:1 [0] NCCL INFO comm 0x1 rank 4 nranks 8 cudaDev 0 busId 1b000 commId 0xc0 - Init START\n"
               "h:1:1 [0] NCCL INFO CollNet 00/0 : 4 [receive] via COLLNET/SHARP/0/GDRDMA\n"
               "h:1:1 [0] NCCL INFO Coll 01 : 4 [receive] via COLLNET/SHARP/1\n"
               "h:1:1 [0] NCCL INFO 24 coll channels, 16 collnet channels, 16 nvls channels, 32 p2p channels, "
               "2 p2p channels per peer\n")
    assert sorted((edge.transport, edge.src, edge.dst, edge.channel) for edge in log.edges) == [
        ("COLLNET", 4, None, 0), ("COLLNET", 4, None, 1)]
    assert [comm.channels for comm in log.communicators] == [(24, 16, 16)]


def test_two_communicators_keep_their_own_rank_numbers() -> None:
    """A world communicator and a 2-rank subgroup in one process: rank 0 of each is a different GPU."""
    text = ("h:1:1 [0] NCCL INFO comm 0x10 rank 0 nranks 4 cudaDev 0 busId 1b000 commId 0xaaa - Init START\n"
            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "h:2:2 [2] NCCL INFO comm 0x20 rank 0 nranks 2 cudaDev 2 busId 3d000 commId 0xbbb - Init START\n"
            "h:2:2 [2] NCCL INFO Channel 00/0 : 0[2] -> 1[3] via SHM/direct/direct\n")
    log = read(text)
    assert sorted((rank.comm, rank.rank, rank.bus_id) for rank in log.ranks) == [
        ("0xaaa", 0, "1b000"), ("0xaaa", 1, None), ("0xbbb", 0, "3d000"), ("0xbbb", 1, None)]
    assert sorted((edge.comm, edge.transport) for edge in log.edges) == [("0xaaa", "P2P"), ("0xbbb", "SHM")]


def test_no_nccl_line_is_one_error_line() -> None:
    with pytest.raises(InputError, match=r"^test.log: no NCCL_DEBUG=INFO lines"):
        read("epoch 1 loss 2.0\nepoch 2 loss 1.5\n")


def test_binary_input_names_its_line() -> None:
    with pytest.raises(InputError, match=r"^x.log:2: binary data"):
        read_nccl_log_stream(io.BytesIO(b"h:1:1 [0] NCCL INFO x\nabc\x00def\n"), "x.log")


def test_undecodable_and_overlong_lines_are_skipped() -> None:
    data = (b"h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n" + b"\xff\xfe NCCL INFO\n"
            + b"x" * (MAX_NCCL_LOG_LINE_BYTES * 3) + b"\nh:1:1 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via P2P/IPC\n")
    log = read_nccl_log_stream(io.BytesIO(data), "x.log")
    assert log.skipped_lines == (2, 3) and len(log.edges) == 2 and log.lines == 4


def test_connections_past_the_cap_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("linkscope.topo.formats.nccl_log_reader.MAX_EDGES", 3)
    log = read("".join(f"h:1:1 [0] NCCL INFO Channel {channel:02d} : 0[0] -> 1[1] via P2P/IPC\n" for channel in range(5)))
    assert [edge.channel for edge in log.edges] == [0, 1, 2] and log.edges_dropped == 2


def test_stdin_limit() -> None:
    with pytest.raises(InputError, match="larger than"):
        read_nccl_log_stream(io.BytesIO(b"h:1:1 [0] NCCL INFO x\n" * 100), "<stdin>", max_bytes=1024)


@pytest.mark.parametrize("line", [
    "h:1:1 [0] NCCL INFO Channel 00 : " + "0 " * 200_000,
    "h:1:1 [0] NCCL INFO Trees" + " [0] 1/2/3->4->5" * 30_000 + " [x",
    "[" * 60_000 + " NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P",
    "h:1:1 [0] NCCL INFO Channel 00 : " + "1[" * 30_000,
    "a:" * 30_000 + "1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1",
    "h:1:1 [0] NCCL INFO NCCL_X set to " + "a." * 30_000,
])
def test_adversarial_long_lines_read_in_linear_time(line: str) -> None:
    start = time.perf_counter()
    with contextlib.suppress(InputError):
        read(line + "\nh:1:1 [0] NCCL INFO ok\n")
    assert time.perf_counter() - start < 1.0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("NCL INFOWARhostvia:[]/0123456789->\n\r\x1b\t |P2SHMET.x")), max_size=400))
def test_arbitrary_text_gives_a_result_or_input_error(text: str) -> None:
    try:
        log = read(text)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    nccl_findings(log)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL_FILES), st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=40))
def test_mutated_real_logs_give_a_result_or_input_error(path: Path, seed: int, edits: int) -> None:
    chars = list(path.read_text())
    rng = random.Random(seed)
    for _ in range(edits):
        position = rng.randrange(len(chars))
        action = rng.randrange(3)
        if action == 0:
            del chars[position]
        elif action == 1:
            chars.insert(position, rng.choice("[]:/->\n 0123456789x\x1bNCCL INFO"))
        else:
            chars[position] = rng.choice("[]:/-> 09\n")
    try:
        log = read("".join(chars))
    except InputError:
        return
    nccl_findings(log)
    place_edges(log, DGX1)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda path: path.name)
def test_every_connection_is_judged_on_one_host_or_not_as_each_alone_is(path: Path) -> None:
    """The answer for all connections at once, with every end's host known, some unknown or none: each
    connection's own :func:`same_host`."""
    from linkscope.topo.nccl.checks import edges_on_one_host, implied_hosts

    log = read_nccl_log_text(path.read_text(encoding="utf-8"), path.name)
    everywhere = {(edge.comm, end): "h" for edge in log.edges for end in (edge.src, edge.dst) if end is not None}
    for hosts in (implied_hosts(log), rank_hosts(log), everywhere, {}):
        assert edges_on_one_host(log, hosts) == tuple(same_host(edge, hosts) for edge in log.edges)


@pytest.mark.parametrize("rank_word", ["GPU/1C", "GPU/1c", "GPU/a"])
def test_a_graph_channel_line_with_a_rank_not_in_decimal_is_no_channel_line(rank_word: str) -> None:
    """A graph's channel line names GPUs by decimal rank (before NCCL 2.19) or by bus id after a dash: `GPU/1C` is
    neither, and the line is read as no channel of the graph instead of failing (found by the mutation test above
    on a real 2-node log)."""
    from linkscope.topo.formats.nccl_graph import hops_of_channel_line

    real = FIXTURES / "real" / "nccl_debug" / ("a100-pcie-2node-2rank-ib-without-gdrdma-phb-nic-default-gdr-level-"
                                                "nccl-2.16-with-all_reduce-table.txt")
    text = real.read_text()
    assert " 0 : NET/0 GPU/1 NET/0" in text and hops_of_channel_line(" 0 : NET/0 GPU/1 NET/0") is not None
    assert hops_of_channel_line(f" 0 : NET/0 {rank_word} NET/0") is None
    mutated = read(text.replace(" 0 : NET/0 GPU/1 NET/0", f" 0 : NET/0 {rank_word} NET/0"))
    assert mutated.ranks == read(text).ranks
