"""The classes of misreading issue 28 names, each on a real file (or a real file cut or stripped the way pastes are):
numbers compared within their printed precision, the collective taken from wherever the paste states it, a
sendrecv told by its unchecked in-place half, topology texts cut after the GPU rows, NCCL's NVLS and 2.4-era lines,
host names from nccl-tests' rank lines, and trace calls counted from the op that launched them."""

from __future__ import annotations

import gzip
import io
import re
from collections import Counter

import pytest

from linkscope.topo.formats.nccl_log import read_nccl_log_text
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import parse_source_text
from linkscope.topo.formats.trace import read_rank_trace
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.nccl.checks import rank_hosts, same_host
from support.paths import REAL

NCCL_TESTS = REAL / "nccl_tests"


def _read(name: str) -> Measurements:
    path = NCCL_TESTS / name
    return read_measurements(path.read_text(), path.name)


def test_busbw_is_checked_within_the_printed_precision_of_both_numbers() -> None:
    """AWS p4de, 16 ranks: at 4096 B algbw 0.0242 prints as 0.02 and busbw 0.0453 as 0.05 (0.02 x 1.875 = 0.0375):
    within half a unit of each printed figure, so the whole table reads, with no row to distrust."""
    m = _read("a100-p4de-2node-16gpu-efa-srun-label-prefix-all_reduce.txt")
    assert len(m.collectives) == 58 and {(r.op, r.nranks) for r in m.collectives} == {("all_reduce", 16)}
    row = next(r for r in m.collectives if r.size_bytes == 4096 and not r.in_place)
    assert (row.algbw_gbps, row.busbw_gbps) == (0.02, 0.05)
    assert not any("busbw is not" in note for note in m.notes)


@pytest.mark.parametrize(("name", "op", "word"), [
    ("b200-gcp-a4-gke-dranet-kubectl-exec-run-nccl-tests-t-all_gather-16rank-ssh-banner-version-after-ranks.txt",
     "all_gather", "-t all_gather"),
    ("h100-gcp-a3high-2node-16rank-dstack-tcpx-wrapper-script-run-allgather.txt", "all_gather", "run-allgather.sh"),
    ("h100-gcp-a3mega-gke-kubectl-exec-allgather-sh-wrapper-16rank-misaligned-rows.txt", "all_gather", "allgather.sh"),
    ("h200-gke-mpi-operator-dranet-2rank-kubectl-logs-set-x-mpirun-bash-c-openmpi-openib-warnings-all_reduce.txt",
     "all_reduce", "bash -c '... all_reduce_perf'"),
    ("h100-gcp-a3mega-2node-16rank-dstack-tcpxo-yaml-command-all_gather.txt", "all_gather", "$MPIRUN ./all_gather_perf"),
])
def test_the_collective_is_taken_from_the_command_line_however_it_is_written(name: str, op: str, word: str) -> None:
    rows = _read(name).collectives
    assert {(row.op, row.op_source) for row in rows} == {(op, "command")}, word


def test_nccl_tests_own_collective_lines_name_each_of_five_tables() -> None:
    m = _read("h100-10node-80rank-five-collectives-one-file-collective-test-lines.txt")
    ops = list(dict.fromkeys((row.op, row.op_source) for row in m.collectives))
    assert ops == [(op, "header") for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")]


def test_a_sum_table_whose_in_place_half_is_unchecked_is_sendrecv() -> None:
    """A 2-rank sendrecv over IB (thomaslie210/NCCL_Test_Results) with its `# Collective test` lines taken away: sum,
    root -1, factor 1 on 2 ranks fit all_reduce too, but only sendrecv prints N/A for its in-place check."""
    text = (NCCL_TESTS / "a100-pcie-2node-1gpu-each-ib-gdrdma-shared-nccl-info-interleaved-linear-step-sendrecv.txt").read_text()
    anonymous = "\n".join(line for line in text.split("\n") if "Collective test" not in line and "sendrecv" not in line)
    rows = read_measurements(anonymous, "cut.txt").collectives
    assert {(row.op, row.op_source, row.nranks) for row in rows} == {("send_recv", "inferred", 2)}
    assert all(row.wrong is None for row in rows if row.in_place) and all(row.wrong == 0 for row in rows if not row.in_place)


def test_an_alltoall_named_nowhere_is_told_from_all_gather_by_its_unchecked_in_place_half() -> None:
    rows = _read("a100-alcf-polaris-2node-8rank-slingshot-alltoall-inplace-wrong-na.txt").collectives
    assert {(row.op, row.op_source, row.nranks) for row in rows} == {("all_to_all", "inferred", 8)}


def test_rank_lines_that_contradict_the_ratio_yield_to_it_and_say_so() -> None:
    m = _read("gb200-nvl72-coreweave-2rack-slurm-tail-rank-143-line-vs-128rank-ratio-all_reduce.txt")
    assert {(row.nranks, row.nranks_source) for row in m.collectives} == {(128, "busbw/algbw")}
    assert any("rank lines say 144 ranks, but busbw/algbw of its rows says 128" in note for note in m.notes)


@pytest.mark.parametrize("name", ["b200-8gpu-gcp-a4-vm-8nic-pix-pairs-numa-gpu-numa-id-collapsed-spacing.txt",
                                  "h100-8gpu-nv18-13nic-named-ib-eth.txt",
                                  "dgx1-p100-8gpu-nv1-soc-4nic-fused-header-no-separators.txt",
                                  "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt"])
@pytest.mark.parametrize("keep", ["first NIC row", "no NIC row", "half the first NIC row"])
def test_a_topology_cut_after_its_gpu_rows_reads_whole_and_says_what_is_missing(name: str, keep: str) -> None:
    lines = (REAL / "topo" / name).read_text().split("\n")
    header = next(index for index, line in enumerate(lines) if re.match(r"\s*GPU0\b", line))
    first_nic = next(index for index, line in enumerate(lines) if index > header and not line.strip().startswith("GPU"))
    cut = {"first NIC row": lines[:first_nic + 1], "no NIC row": lines[:first_nic],
           "half the first NIC row": [*lines[:first_nic], lines[first_nic][:20]]}[keep]
    whole, cut_reading = parse_source_text("\n".join(lines), name), parse_source_text("\n".join(cut), name)
    assert cut_reading.host.matrix_tokens() == whole.host.matrix_tokens()
    assert cut_reading.host.gpu_nic == whole.host.gpu_nic
    gaps = [gap for gap in cut_reading.gaps if gap.subject.startswith("NIC rows")]
    kept_nic_rows = 1 if keep == "first NIC row" else 0
    if kept_nic_rows == len(whole.host.nics):
        assert not gaps  # nothing was lost (one NIC, its row kept)
    else:
        assert len(gaps) == 1 and "a paste cut short" in gaps[0].reason


def test_nvls_set_ups_are_read() -> None:
    """AWS p5 EKS, NCCL 2.20.3: 16 `NVLS comm ... headRank h nHeads 8` lines, `Connected NVLS tree`, 16 nvls channels."""
    path = REAL / "nccl_debug" / "h100-aws-p5-eks-mpijob-2node-16rank-openmpi-tagged-nccl-2.20.3-ofi-tuner-nvls-with-table.txt"
    log = read_nccl_log_text(path.read_text(), path.name)
    assert log.nvls.used and log.nvls.tree and log.nvls.channels == 16
    assert len(log.nvls.setups) == 16 and {setup.nheads for setup in log.nvls.setups} == {8}
    assert sorted(setup.rank for setup in log.nvls.setups if setup.rank is not None) == list(range(16))
    assert {setup.head_rank for setup in log.nvls.setups if setup.rank is not None and setup.rank < 8} == set(range(8))


def test_hosts_named_by_nccl_tests_rank_lines_place_the_connections() -> None:
    """nccl-tests #311 (8 ranks on 4 nodes) as a poster who cut NCCL's `host:pid:tid` prefix leaves it: only the
    `# Rank N ... on HOST device D` lines say where each rank runs, and they decide same_host."""
    path = REAL / "nccl_debug" / "a100-4node-2gpu-collnet-fallback-p2p-net.txt"
    text = re.sub(r"^[\w.-]+:\d+:\d+ (\[\d+\] NCCL)", r"\1", path.read_text(), flags=re.M)
    log = read_nccl_log_text(text, path.name)
    hosts = rank_hosts(log)
    decided = Counter(same_host(edge, hosts) for edge in log.edges if edge.dst is not None)
    assert decided[None] == 0 and decided[True] > 0 and decided[False] > 0
    assert len(log.hosts) == 4


def test_nccl_2_4_ring_lines_keep_every_rank() -> None:
    """NCCL 2.4: `Ring 00 : 15 -> 0 [send] via NET/Socket/0` names rank 0 without a bracket: all 15 ranks of the
    excerpt are ranks of the log, not 13."""
    path = REAL / "nccl_debug" / "v100-aws-2node-16gpu-old-nccl24-ring-lines-p2p-ipc-net-socket-excerpt.txt"
    log = read_nccl_log_text(path.read_text(), path.name)
    assert len({rank.rank for rank in log.ranks}) == 15
    assert Counter(edge.transport for edge in log.edges) == {"P2P": 15, "NET": 2}


def test_an_all_to_all_run_as_grouped_send_recv_counts_its_calls_from_the_launching_op() -> None:
    """HTA rank 0 of 16: 55 nccl:all_to_all calls, 45 of them launching a SendRecv kernel inside them, 10 none that
    the trace caught; 5 SendRecv kernels were launched before the trace began."""
    path = REAL / "traces" / "hta-rank0-of-16-a100-80gb-5-steps-all_to_all-as-sendrecv-kernels.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        trace = read_rank_trace(io.StringIO(stream.read()), path.name)
    calls = Counter(call.op for call in trace.collectives)
    assert calls == {"all_to_all": 55, "all_reduce": 10, "all_gather": 10, "reduce_scatter": 10}
    to_all = [call for call in trace.collectives if call.op == "all_to_all"]
    assert sum(call.on_device for call in to_all) == 45 and sum(call.launch_only for call in to_all) == 10
    assert any("5 NCCL kernel(s) launched before the trace began" in note for note in trace.notes)
