"""`linkscope import` of nccl-tests logs: every real fixture, rows checked against values read off
the files by hand, and odd tables rejected with file:line instead of being misread."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nccl_tests import looks_like_nccl_tests, read_nccl_tests
from linkscope.topo.model.codec import measurements_from_json
from linkscope.topo.model.measurements import CollectiveResult, Measurements
from support.bench import FIXTURES, cli_main

NCCL = FIXTURES / "nccl_tests"
RTX = NCCL / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"
A100 = NCCL / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
H200 = NCCL / "h200-2node-16gpu-baremetal-all_reduce.txt"


def _read(path: object) -> Measurements:
    return read_nccl_tests(path.read_text(), str(path))  # type: ignore[attr-defined]


def _row(m: Measurements, op: str, size: int, in_place: bool, nranks: int | None = None) -> CollectiveResult:
    rows = [r for r in m.collectives if r.op == op and r.size_bytes == size and r.in_place == in_place
            and (nranks is None or r.nranks == nranks)]
    assert len(rows) == 1, rows
    return rows[0]


REFUSED = {
    "ib-2process-all_reduce-interleaved-without-prefix.txt":
        r":12: size 8 after 256 \(line 11\) in one table: output of several processes interleaved",
    "gpu2-2020-all_gather-tail-old-algbw-scaled.txt":
        r":5: algbw 1\.98 does not match size/time = 3\.96 GB/s \(nccl-tests before mid-2020 printed all_gather",
    "h100-mpich-rank-prefix-rows-cut-by-nccl-info.txt":
        r":13: an nccl-tests row cut apart by NCCL log lines, and no complete row or column header",
    "rtx4090-8gpu-all_reduce-only-row-half-written.txt":
        r":21: expected 13 columns in an nccl-tests row, found 9 \(the table's only row is half-written\)",
}
"""Real files that must be refused, and the file:line and reason they are refused with."""


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_files_that_cannot_be_read_are_refused_with_file_line_and_why(name: str) -> None:
    """The corpus test checks every real file (tests/topo/formats/test_corpus.py); these say why, word for word."""
    path = NCCL / name
    assert looks_like_nccl_tests(path.read_text()), path.name
    with pytest.raises(InputError, match=re.escape(str(path)) + REFUSED[name]):
        _read(path)


def test_rtx_five_collectives_in_one_log() -> None:
    m = _read(RTX)
    counts = {op: sum(1 for r in m.collectives if r.op == op) for op in
              ("all_reduce", "all_gather", "broadcast", "reduce", "all_to_all")}
    # 28 sizes x (out, in); all_gather and alltoall start with two 0-byte rows that are skipped; reduce ran twice
    assert counts == {"all_reduce": 56, "all_gather": 52, "broadcast": 56, "reduce": 112, "all_to_all": 52}
    row = _row(m, "all_reduce", 1073741824, False)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps, row.wrong, row.nranks) == (268588, 4.00, 4.00, 0, 2)
    assert row.dtype == "float32"
    row = _row(m, "all_gather", 65536, True)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps) == (27.19, 2.41, 1.20)
    row = _row(m, "broadcast", 1048576, True)  # the odd in-place dip in the log
    assert (row.time_us, row.algbw_gbps) == (288.1, 3.64)
    row = _row(m, "all_to_all", 16777216, True)
    assert (row.time_us, row.busbw_gbps, row.wrong) == (1870.3, 4.49, None)  # '#wrong' N/A
    row = _row(m, "all_to_all", 16777216, False)
    assert row.wrong == 0


def test_rtx_single_gpu_reduce_is_flagged_not_trusted() -> None:
    m = _read(RTX)
    degenerate = _row(m, "reduce", 1073741824, True, nranks=1)
    assert (degenerate.time_us, degenerate.algbw_gbps) == (0.19, 5706839.35)
    two_gpu = _row(m, "reduce", 1073741824, False, nranks=2)
    assert (two_gpu.time_us, two_gpu.busbw_gbps) == (96427, 11.14)
    assert any("ONE rank" in note for note in m.notes)
    assert any("0 bytes skipped" in note for note in m.notes)


def test_a100_truncated_sendrecv_takes_ranks_from_the_command() -> None:
    m = _read(A100)
    assert len(m.collectives) == 8
    row = _row(m, "send_recv", 536870912, False)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps, row.wrong, row.nranks) == (2785.4, 192.75, 192.75, 0, 8)
    assert _row(m, "send_recv", 1073741824, True).wrong is None


def test_h200_factor_3_two_nodes() -> None:
    m = _read(H200)
    assert [r.size_bytes for r in m.collectives if not r.in_place] == [1073741824, 3221225472, 9663676416]
    row = _row(m, "all_reduce", 9663676416, False)
    assert (row.time_us, row.algbw_gbps, row.busbw_gbps, row.nranks) == (37069, 260.70, 488.81, 16)
    assert _row(m, "all_reduce", 3221225472, True).busbw_gbps == 471.78


HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
GOOD = "     1048576        262144     float     sum      -1    279.5    3.75    3.75      0    280.2    3.74    3.74      0\n"
PREAMBLE = ("$ ./build/all_reduce_perf -b 1M -e 1M -g 2\n# nThread 1 nGpus 2 minBytes 1048576\n"
            "#  Rank  0 Group  0 Pid  1 on h device  0 [0x01] GPU\n#  Rank  1 Group  0 Pid  1 on h device  1 [0x02] GPU\n")


@pytest.mark.parametrize(("row", "message"), [
    ("     1048576        262144     float     sum      -1    279.5    3.75    3.75      0    280.2    3.74    3.74\n",
     "expected 13 columns"),
    ("     1048576        262144     float     sum      -1    279.5    3.75    abc      0    280.2    3.74    3.74      0\n",
     "busbw 'abc' is not a number"),
    ("     1048576        262144     float     sum      -1    N/A    3.75    3.75      0    280.2    3.74    3.74      0\n",
     "time 'N/A' is not a number"),
    ("     1048576        262144     float     sum      -1    279.5    37.5    37.5      0    280.2    3.74    3.74      0\n",
     "algbw 37.5 does not match"),
    ("     1048576        262144     quad     sum      -1    279.5    3.75    3.75      0    280.2    3.74    3.74      0\n",
     "unknown data type 'quad'"),
])
def test_odd_rows_are_rejected_with_file_and_line(row: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        read_nccl_tests(PREAMBLE + HEADER + row, "log.txt")
    assert str(caught.value).startswith("log.txt:7: ")


def test_nccl_debug_lines_inside_a_table_are_skipped() -> None:
    noise = "host:123:456 [0] NCCL INFO Channel 00/02 :    0   1\n"
    second = "     2097152   524288  float  sum  -1    559.0    3.75    3.75      0    560.4    3.74    3.74      0\n"
    m = read_nccl_tests(PREAMBLE + HEADER + GOOD + noise + second, "log.txt")
    assert [r.size_bytes for r in m.collectives if not r.in_place] == [1048576, 2097152]


def test_a_row_whose_busbw_misses_the_factor_beyond_its_printed_rounding_is_a_note_not_a_refusal() -> None:
    bad = "     1048576        262144     float     sum      -1    279.5    3.75    1.88      0    280.2    3.74    3.74      0\n"
    m = read_nccl_tests(PREAMBLE + HEADER + bad + GOOD.replace("1048576", "2097152").replace("279.5", "559.0")
                        .replace("280.2", "560.4"), "log.txt")
    assert [row.busbw_gbps for row in m.collectives][:2] == [1.88, 3.74]
    assert any("busbw is not algbw x 1 (all_reduce on 2 ranks) even allowing for the printed rounding on line 7:"
               in note for note in m.notes), m.notes


def test_printed_precision_is_allowed_for() -> None:
    """AWS's 16-rank table: at 4096 B algbw 0.0242 prints as 0.02 and busbw 0.0453 as 0.05; 0.02 x 1.875 = 0.0375
    is 0.0125 from 0.05, within 0.005 x 1.875 + 0.005 of the printed rounding: no note."""
    row = "        4096          1024     float     sum      -1    169.2    0.02    0.05      0    168.9    0.02    0.05      0\n"
    big = "  1073741824     268435456     float     sum      -1    13706   78.34  146.89      0    13700   78.38  146.96      0\n"
    m = read_nccl_tests("$ mpirun -np 16 ./all_reduce_perf -b 4K\n" + HEADER + row + big, "aws.txt")
    assert {(r.op, r.nranks) for r in m.collectives} == {("all_reduce", 16)}
    assert not any("busbw is not" in note for note in m.notes), m.notes


def test_a_table_without_its_collective_is_read_from_its_columns() -> None:
    m = read_nccl_tests(HEADER + GOOD, "log.txt")  # sum, root -1, in-place checked: all_reduce (send_recv never checks it)
    assert {(row.op, row.op_source, row.nranks) for row in m.collectives} == {("all_reduce", "inferred", 2)}
    m = read_nccl_tests(HEADER + GOOD, "log.txt", op="all_reduce")
    row = m.collectives[0]  # all_reduce busbw == algbw only on 2 ranks
    assert (row.op_source, row.nranks, row.nranks_source) == ("given", 2, "busbw/algbw")
    m = read_nccl_tests(HEADER + GOOD, "log.txt", op="broadcast")  # factor 1 on any rank count: unknown
    assert m.collectives[0].nranks is None and any("rank count not stated" in note for note in m.notes)
    with pytest.raises(InputError, match="--op 'allreduce' is not a collective"):
        read_nccl_tests(HEADER + GOOD, "log.txt", op="allreduce")


def test_new_style_collective_starting_line_and_out_of_place_only_table() -> None:
    text = ("# Collective test starting: all_gather_perf\n# nThread 1 nGpus 4 minBytes 8\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
            "     4194304        262144     float    none      -1    100.0   41.94   31.46      0\n")
    m = read_nccl_tests(text, "new.log")
    row = m.collectives[0]
    assert (row.op, row.nranks, row.algbw_gbps, row.busbw_gbps, row.in_place) == ("all_gather", 4, 41.94, 31.46, False)


def test_cli_import_json_and_output_file(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"  # type: ignore[operator]
    assert cli_main(["import", str(H200), "--json", "-o", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["measurements"]["collectives"][0]["busbw_gbps"] == 458.65
    written = measurements_from_json(out.read_text(), "m.json")
    assert written == dataclasses.replace(_read(H200), identity=written.identity)
    assert written.identity is not None and written.identity.gpu_model == "NVIDIA H200"


def test_cli_import_table() -> None:
    import subprocess
    import sys

    from support.bench import ROOT

    result = subprocess.run([sys.executable, "-m", "linkscope", "import", str(A100)],
                            capture_output=True, text=True, env={"COLUMNS": "120", "PATH": ""}, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "send_recv" in result.stdout and "195.10" in result.stdout


@pytest.mark.parametrize(("content", "message"), [("", "empty input"), ("hello\n", "not output of nccl-tests")])
def test_cli_import_rejects_other_text(tmp_path: object, content: str, message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.txt"  # type: ignore[operator]
    path.write_text(content)
    assert cli_main(["import", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(("command", "nranks"), [
    ("./build/all_reduce_perf -b 4M -e 4M -g 8 -n 50", 8),        # -n after the binary is iterations, not ranks
    ("./build/all_reduce_perf -b 4M -e 4M -t 8 -g 1", 8),         # 8 threads of one GPU each
    ("./build/all_reduce_perf -b 4M -e 4M --nthreads=2 --ngpus=4", 8),
    ("mpirun -np 4 -H a:2,b:2 ./build/all_reduce_perf -b 4M -e 4M -g 2", 8),
    ("srun -N 2 --ntasks=8 ./build/all_reduce_perf -b 4M -e 4M", 8),
    ("srun -c 8 -n 8 ./build/all_reduce_perf -b 4M -e 4M", 8),             # srun -c is CPUs per task
    ("srun -N 2 --ntasks-per-node=4 ./build/all_reduce_perf -b 4M -e 4M", 8),
    ("taskset -c 0-7 ./build/all_reduce_perf -b 4M -e 4M -g 8", 8),       # not launchers: one process
    ("nice -n 10 ./build/all_reduce_perf -b 4M -e 4M -g 8", 8),
    ("/usr/bin/mpirun --np 2 -x NCCL_DEBUG=INFO all_reduce_perf -b 4M -e 4M -g 4", 8),
])
def test_rank_count_from_the_launcher_and_the_nccl_tests_flags(command: str, nranks: int) -> None:
    """all_reduce on 8 ranks: busbw = algbw x 2 x 7/8 (4.00 x 1.75 = 7.00)."""
    text = (command + "\n#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            "     4194304     1048576   float   sum   -1   1048.6   4.00   7.00   0   1048.6   4.00   7.00   0\n")
    rows = read_nccl_tests(text, "log.txt").collectives
    assert [row.nranks for row in rows] == [nranks, nranks]


@pytest.mark.parametrize("command", ["mpirun -N 8 --host a:8,b:8 ./build/all_reduce_perf -b 4M -e 4M",
                                     "srun --nodes=2 ./build/all_reduce_perf -b 4M -e 4M"])
def test_a_launcher_that_does_not_say_how_many_processes_leaves_the_ratio_to_tell(command: str) -> None:
    """busbw/algbw = 7/4 = 2(n-1)/n only for n = 8; the printed busbw is what the count is read from."""
    text = (command + "\n#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            "     4194304     1048576   float   sum   -1   1048.6   4.00   7.00   0   1048.6   4.00   7.00   0\n")
    measured = read_nccl_tests(text, "log.txt")
    assert [(row.nranks, row.nranks_source, row.op_source) for row in measured.collectives] == \
        [(8, "busbw/algbw", "command")] * 2
    small = text.replace("4194304     1048576", "4096     1024").replace("1048.6   4.00   7.00", "1048.6   0.00   0.00")
    measured = read_nccl_tests(small, "log.txt")  # bandwidths too small to read a ratio from
    assert [row.nranks for row in measured.collectives] == [None, None]
    assert "all_reduce table (line 2): rank count not stated in the log" in measured.notes


def test_the_starting_line_under_a_command_keeps_its_launcher_and_a_loader_warning_is_not_a_command() -> None:
    """Current nccl-tests print `# Collective test starting:` right under the command; a loader
    warning names the binary too. Neither may drop `mpirun -np 16` (16 ranks, busbw = algbw x 30/16)."""
    text = ("mpirun -np 16 ./build/all_reduce_perf -b 4M -e 4M -g 1\n"
            "./build/all_reduce_perf: /usr/lib/libnl-3.so.200: no version information available\n"
            "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 4194304\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            "     4194304     1048576   float   sum   -1   1048.6   4.00   7.50   0   1048.6   4.00   7.50   0\n")
    assert [row.nranks for row in read_nccl_tests(text, "log.txt").collectives] == [16, 16]


def test_import_output_says_what_it_wrote(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"
    out = tmp_path / "m.json"
    assert cli_main(["import", str(log), "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert out.exists() and f"measurements written to {out}" in captured.err
    assert captured.out.startswith("{")
