"""Reading many traces in worker processes: the same traces as reading them here, errors as one line, no
worker left behind, and the JSON hand-over exact."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import psutil
import pytest

from linkscope.cli import main
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text, read_json
from linkscope.topo.trace import pool as trace_pool
from linkscope.topo.trace.codec import rank_trace_from_json, rank_trace_to_json
from linkscope.topo.trace.files import read_trace_file
from linkscope.topo.trace.pool import PARALLEL_MIN_BYTES, default_jobs, read_traces
from support.paths import FIXTURES
from support.trace import TraceBuilder

REAL = FIXTURES / "real" / "traces"


def _traces(tmp_path: Path) -> list[str]:
    """The three real GPU traces and two synthetic ranks (one compressed, one with an odd host name)."""
    paths = [str(path) for path in sorted(REAL.glob("*.json.gz"))]
    for rank in range(2):
        builder = TraceBuilder(rank, 2, host="node\x1b[31m-é" if rank else "node-a")
        builder.step(1, 0, 1000)
        builder.compute_kernel(5, 10, 300)
        builder.collective("allreduce", 1 << 20, 20, 320, 200, metadata_on_kernel=bool(rank))
        paths.append(str(builder.write(tmp_path / f"rank{rank}.json", compressed=bool(rank))))
    return paths


def test_workers_read_exactly_what_this_process_reads(tmp_path: Path) -> None:
    paths = _traces(tmp_path)
    counts: list[int] = []
    here = read_traces(paths, jobs=1)
    in_workers = read_traces(paths, jobs=2, on_read=counts.append)
    assert in_workers == here
    assert [trace.name for trace in in_workers] == paths  # in the order given, whatever order they finished in
    assert counts == list(range(1, len(paths) + 1))


def test_codec_round_trip_keeps_types(tmp_path: Path) -> None:
    for path in _traces(tmp_path):
        trace = read_trace_file(path)
        back = rank_trace_from_json(read_json(json_text(rank_trace_to_json(trace), indent=None), "t"))
        assert back == trace
        assert all(type(c.group_ranks) is tuple for c in back.collectives if c.group_ranks is not None)
        assert all(type(ranks) is tuple for ranks in back.groups.values())


def test_a_bad_file_is_its_own_one_line_error_in_workers_too(tmp_path: Path) -> None:
    paths = _traces(tmp_path)
    bad = tmp_path / "cut.json"
    bad.write_text(Path(paths[-2]).read_text()[:-40])
    paths.insert(2, str(bad))
    with pytest.raises(InputError) as here:
        read_traces(paths, jobs=1)
    with pytest.raises(InputError) as in_workers:
        read_traces(paths, jobs=3)
    assert str(in_workers.value) == str(here.value)
    assert str(bad) in str(here.value) and "\n" not in str(here.value)


def test_paths_that_are_awkward_to_pass_reach_the_worker(tmp_path: Path) -> None:
    """A newline in a name, and a name that is not UTF-8 (Linux allows both); the worker opens the same file."""
    source = _traces(tmp_path)[-2]
    odd = [tmp_path / "a\nb.json", Path(os.fsdecode(tmp_path / "x") + os.fsdecode(b"\xff.json"))]
    for path in odd:
        shutil.copy(source, path)
    traces = read_traces([str(path) for path in odd], jobs=2)
    assert [trace.name for trace in traces] == [str(path) for path in odd]
    assert traces[0].collectives == read_trace_file(source).collectives


def test_a_worker_that_dies_is_reported_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def dying_worker() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    monkeypatch.setattr(trace_pool, "_start_worker", dying_worker)
    with pytest.raises(InputError, match=r"worker process reading it ended \(exit status 3: no message\); --jobs 1"):
        read_traces(_traces(tmp_path), jobs=2)


def test_an_interrupt_leaves_no_worker_behind(tmp_path: Path) -> None:
    paths = _traces(tmp_path) * 4

    def interrupt(count: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        read_traces(paths, jobs=2, on_read=interrupt)
    assert not [child for child in psutil.Process().children(recursive=True)
                if "linkscope.topo.trace.pool" in " ".join(child.cmdline())]


def _not_asked() -> int:
    raise AssertionError("the idle CPUs were counted (a tenth of a second) for traces too small for workers")


def test_workers_only_when_the_traces_are_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _traces(tmp_path)
    assert default_jobs(small, _not_asked) == 1
    big = []
    for index in range(3):
        path = tmp_path / f"big{index}.json"
        with path.open("wb") as out:
            out.truncate(PARALLEL_MIN_BYTES // 2)  # sparse: the size counts, nothing is written
        big.append(str(path))
    assert default_jobs(big, lambda: 8) == 3
    assert default_jobs(big, lambda: 2) == 2 and default_jobs(big, lambda: 1) == 1
    assert default_jobs(big[:1], _not_asked) == 1
    assert default_jobs([*big, str(tmp_path / "missing.json")], lambda: 8) >= 1


def test_cli_jobs_gives_the_same_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _traces(tmp_path)[-2:]  # the two ranks of one job
    main(["trace", "--json", "--jobs", "1", *paths])
    one = json.loads(capsys.readouterr().out)
    main(["trace", "--json", "--jobs", "2", *paths])
    two = json.loads(capsys.readouterr().out)
    assert one == two and len(one["collectives"]) > 0


@pytest.mark.parametrize("value", ["0", "-1", "x", "2000"])
def test_cli_jobs_refuses_nonsense(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "--jobs", value, str(REAL)]) == 2
    err = capsys.readouterr().err
    assert "--jobs" in err and len(err.strip().splitlines()) == 1


def test_a_failure_inside_a_worker_is_raised_as_the_bug_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    script = "import sys\nfor line in sys.stdin:\n    print('{\"internal\": \"ValueError: boom\"}', flush=True)\n"

    def failing_worker() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    monkeypatch.setattr(trace_pool, "_start_worker", failing_worker)
    paths = _traces(tmp_path)
    with pytest.raises(RuntimeError, match=r"failed in a worker: ValueError: boom"):
        read_traces(paths, jobs=2)
