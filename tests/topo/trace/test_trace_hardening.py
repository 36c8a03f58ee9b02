"""`trace` refuses evidence that cannot be one job's, reads through read errors and lone surrogates as one
line, hands compact results back from its workers and summarises long step lists (issue 24, causes 4, 5,
10 and 11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import SurrogateCheck, read_json
from linkscope.topo.trace import pool as trace_pool
from linkscope.topo.trace.codec import rank_trace_from_json, rank_trace_to_json
from linkscope.topo.trace.files import read_trace_file
from support.fuzz import run_cli
from support.trace import TraceBuilder


def _trace(tmp_path: Path, rank: int = 0, world_size: int = 2, steps: tuple[int, ...] = (1,),
           host: str = "node-a") -> Path:
    builder = TraceBuilder(rank, world_size, host=host)
    for index, step in enumerate(steps):
        builder.step(step, index * 2000, 1000)
    builder.collective("allreduce", 1024, 10, 20, 100)
    return builder.write(tmp_path / f"rank{rank}-{len(list(tmp_path.iterdir()))}.json")


@pytest.mark.parametrize(("rank", "world_size", "steps", "words"), [
    pytest.param(0, 2, (1, 1), ["ProfilerStep#1 appears twice"], id="step-window-twice"),
    pytest.param(5, 2, (1,), ["distributedInfo.rank 5", "world_size 2"], id="rank-past-world"),
    pytest.param(0, 0, (1,), ["distributedInfo.world_size is 0"], id="world-size-0"),
])
def test_inconsistent_ranks_and_steps_are_refused_naming_the_field(tmp_path: Path, rank: int, world_size: int,
                                                                    steps: tuple[int, ...], words: list[str]) -> None:
    path = _trace(tmp_path, rank, world_size, steps)
    with pytest.raises(InputError) as raised:
        read_trace_file(str(path))
    assert str(raised.value).startswith(str(path)) and all(word in str(raised.value) for word in words)


@pytest.mark.parametrize("text", ['"\\udc80"', '["a\\ud800b"]', '{"k": "\\udfff\\ud800"}'])
def test_lone_surrogates_are_refused_by_the_one_json_reader(text: str) -> None:
    with pytest.raises(InputError, match="lone surrogate"):
        read_json(text, "f.json")


@pytest.mark.parametrize("text", ['"\\ud83d\\ude00"', '"\\\\ud800"', '"\\\\\\\\udc80"'])
def test_pairs_and_escaped_backslashes_are_not_lone_surrogates(text: str) -> None:
    read_json(text, "f.json")


@pytest.mark.parametrize("chunk_chars", [1, 3, 7, 13, 64])
def test_the_streamed_check_agrees_with_the_whole_text_check(chunk_chars: int) -> None:
    for body, refused in (("\\ud800\\udc00", False), ("\\ud800", True), ("x\\udc00", True), ("\\\\ud800", False)):
        text = '["' + "x" * 40 + body + '"]'
        check = SurrogateCheck("s")
        try:
            for start in range(0, len(text), chunk_chars):
                check.feed(text[start:start + chunk_chars])
            check.done()
            assert not refused, body
        except InputError:
            assert refused, body


def test_a_lone_surrogate_in_a_trace_is_one_line(tmp_path: Path) -> None:
    path = _trace(tmp_path, host="node\udc80")
    outcome = run_cli(["trace", str(path)])
    assert outcome.status == 2 and "lone surrogate" in outcome.err and len(outcome.err.strip().splitlines()) == 1


def test_a_read_error_on_the_first_read_is_one_line() -> None:
    outcome = run_cli(["trace", "/proc/self/mem"])
    assert outcome.status == 2, outcome.err
    assert outcome.err.startswith("linkscope: error: /proc/self/mem: ") and "Traceback" not in outcome.err


def test_worker_results_name_each_group_once(tmp_path: Path) -> None:
    builder = TraceBuilder(0, 512)
    builder.step(1, 0, 100000)
    for index in range(50):
        builder.collective("allreduce", 1024, 10 + index * 200, 20 + index * 200, 100)
    trace = read_trace_file(str(builder.write(tmp_path / "rank0.json")))
    document = rank_trace_to_json(trace)
    assert len(document["rank_lists"]) == 1 and len(json.dumps(document)) < 20_000
    assert rank_trace_from_json(json.loads(json.dumps(document))) == trace


def test_many_small_traces_are_read_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers pay only for large files on a machine with CPUs to spare (measured: see PARALLEL_MIN_FILE_BYTES)."""
    small = []
    for index in range(40):
        path = tmp_path / f"small{index}.json"
        path.write_bytes(b" " * (trace_pool.PARALLEL_MIN_BYTES // 20))
        small.append(str(path))
    assert trace_pool.default_jobs(small, lambda: 64) == 1
    large = [str(tmp_path / "large0.json"), str(tmp_path / "large1.json"), str(tmp_path / "large2.json"),
             str(tmp_path / "large3.json")]
    for name in large:
        with open(name, "wb") as stream:
            stream.truncate(trace_pool.PARALLEL_MIN_FILE_BYTES * 2)
    assert trace_pool.default_jobs(large, lambda: 64) == 4
    assert trace_pool.default_jobs(large, lambda: 1) == 1


def test_a_long_step_list_is_summarised_in_text_and_whole_with_all_steps(tmp_path: Path) -> None:
    builder = TraceBuilder(0, 1)
    for step in range(400):
        builder.step(step, step * 2000, 1000 + (500 if step == 321 else 0))
        builder.compute_kernel(step * 2000 + 1, step * 2000 + 5, 900)  # a busy GPU: no idle-step finding
    path = builder.write(tmp_path / "rank0.json")
    summary = run_cli(["trace", str(path)], seconds=30)
    assert summary.status == 0, summary.err
    assert "400 steps" in summary.out and "--all-steps" in summary.out and " 321 " in summary.out
    assert "p99" in summary.out and len(summary.out.splitlines()) < 40
    every = run_cli(["trace", str(path), "--all-steps"], seconds=30)
    assert len(every.out.splitlines()) > 400 and "p99" not in every.out
    assert len(json.loads(run_cli(["trace", str(path), "--json"], seconds=30).out)["steps"]) == 400


def test_a_path_that_is_not_utf8_reaches_the_worker(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/x\xff.json"))
    odd.write_bytes(_trace(tmp_path).read_bytes())
    traces = trace_pool.read_traces([str(odd), str(_trace(tmp_path, rank=1))], jobs=2)
    assert traces[0].name == str(odd)
