"""The trace reader's two decoders read alike: whole chunks of events decoded at once into records (msgspec), and
the standard library's decoder one event at a time (what a chunk msgspec refuses goes through). Real traces from
fixtures/real/traces, as written, re-indented and compacted, with values only the standard decoder reads, in chunks
small and large."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import linkscope.topo.formats.trace_stream as trace_stream
from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.trace import read_rank_trace
from linkscope.topo.formats.trace_events import RankTrace
from support.paths import FIXTURES

REAL_FILES = sorted((FIXTURES / "real" / "traces").glob("*.json.gz"))
SMALL_BYTES = 2_000_000
"""Traces up to this size are reshaped and read in many ways; the larger ones are read as written."""


def text_of(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8")


SMALL = {path.name: text for path in REAL_FILES if len(text := text_of(path)) <= SMALL_BYTES}


def reading(text: str, name: str) -> RankTrace | str:
    try:
        return read_rank_trace(io.StringIO(text), name)
    except InputError as exc:
        return str(exc)


def event_by_event(text: str, name: str, monkeypatch: pytest.MonkeyPatch) -> RankTrace | str:
    """The reading with the chunk decoder switched off: the standard decoder reads every event."""
    with monkeypatch.context() as patch:
        patch.setattr(trace_stream, "_decode_whole_events", lambda reader, on_events: None)
        return reading(text, name)


def reshaped(text: str, seed: int, shape: str) -> str:
    """`text` re-written: indented, compacted, or with a few events carrying a value msgspec refuses (`NaN`) in a
    field no reader looks at."""
    if shape == "as written":
        return text
    document = json.loads(text)
    if shape == "indented":
        return json.dumps(document, indent=random.Random(seed).choice([1, 2, 4]))
    if shape == "compact":
        return json.dumps(document, separators=(",", ":"))
    events = document["traceEvents"] if isinstance(document, dict) else document
    chooser = random.Random(seed)
    for event in chooser.sample(events, min(3, len(events))):
        if isinstance(event, dict):
            event["unread"] = float("nan")
    return json.dumps(document)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(SMALL)), seed=st.integers(min_value=0, max_value=2**32),
       shape=st.sampled_from(["as written", "indented", "compact", "NaN"]), chunk_chars=st.sampled_from([97, 4096, 1 << 20]))
def test_chunk_decoder_and_event_decoder_read_real_traces_alike(name: str, seed: int, shape: str, chunk_chars: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    text = reshaped(SMALL[name], seed, shape)
    with monkeypatch.context() as patch:
        patch.setattr(trace_stream, "_CHUNK_CHARS", chunk_chars)
        fast = reading(text, name)
        assert fast == event_by_event(text, name, monkeypatch)
    assert not isinstance(fast, str) or "NaN" in shape  # every real trace reads


@pytest.mark.parametrize("path", [path for path in REAL_FILES if path.name not in SMALL], ids=lambda path: path.name)
def test_large_real_traces_read_alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = text_of(path)
    assert reading(text, path.name) == event_by_event(text, path.name, monkeypatch)


def test_a_string_holding_an_event_end_is_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """`},` inside a string is no boundary between events: the events around it read whole."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
               "ts": step * 100.0, "dur": 90.0, "args": {"Collective name": '{"a": 1}, {"b": 2}, ' * step}}
              for step in range(1, 30)]
    text = json.dumps({"traceEvents": events})
    monkeypatch.setattr(trace_stream, "_CHUNK_CHARS", 64)
    seen: list[trace_stream.TraceEvent] = []
    trace_stream.read_trace_events(io.StringIO(text), "t.json", seen.extend)
    assert [trace_stream.args_dict(event.args) for event in seen] == [event["args"] for event in events]


@pytest.mark.parametrize("field, value", [
    ("cat", ["kernel"]), ("cat", {"a": 1}), ("name", 7), ("ph", ["X"]), ("ts", "100"), ("ts", True), ("dur", None),
    ("dur", "5"), ("ts", 10**400), ("name", None),
])
def test_an_event_field_of_another_kind_skips_the_event(field: str, value: object) -> None:
    """A kernel whose name, phase, category, start or duration is of another JSON kind (a list where text should be,
    text where a number should be) is no kernel, on the fast path and on the standard decoder's path alike."""
    odd = {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "ts": 100, "dur": 50, "pid": 0, "tid": 7,
           "args": {"correlation": 1}} | {field: value}
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1000, "pid": 1, "tid": 1}
    text = json.dumps({"traceEvents": [step, odd]})
    trace = read_rank_trace(io.StringIO(text), "odd.json")
    assert trace.steps[0].compute_us == 0
    normal = json.dumps({"traceEvents": [step, odd | {field: {"cat": "kernel", "name": "g", "ph": "X", "ts": 100,
                                                              "dur": 50}[field]}]})
    assert read_rank_trace(io.StringIO(normal), "ok.json").steps[0].compute_us == 50


def records(text: str, chunk_chars: int, monkeypatch: pytest.MonkeyPatch) -> list[trace_stream.TraceEvent]:
    seen: list[trace_stream.TraceEvent] = []
    with monkeypatch.context() as patch:
        patch.setattr(trace_stream, "_CHUNK_CHARS", chunk_chars)
        trace_stream.read_trace_events(io.StringIO(text), "t.json", seen.extend)
    return seen


@pytest.mark.parametrize("unread", [1, float("nan")], ids=["chunk decoder", "standard decoder"])
def test_an_events_args_hold_only_the_keys_readers_use(unread: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Of `args`, the keys no reader looks at are skipped while decoding, and an op's tensor shapes stay JSON text
    (never built for the many ops that are no collective) until looked up; both decoders give the same."""
    args = {"External id": 3, "Input Dims": [[512], [64, 512]], "Input type": ["float", "c10::BFloat16"],
            "Collective name": "allreduce", "correlation": 9, "dtype": None, "Sequence number": unread}
    text = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "args": args}] * 2})
    for event in records(text, 1 << 20, monkeypatch):
        assert event.args is not None and isinstance(event.args.input_dims, msgspec.Raw)
        assert trace_stream.args_dict(event.args) == {key: value for key, value in args.items()
                                                      if key not in ("External id", "Sequence number")}


def test_an_event_with_no_args_object_has_no_args(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps({"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "X", "name": "b", "args": None},
                                       {"ph": "X", "name": "c", "args": [1]}]})
    assert [(event.name, event.args) for event in records(text, 1 << 20, monkeypatch)] == [("a", None), ("b", None),
                                                                                             ("c", None)]


@pytest.mark.parametrize("ts, dur", [(-1e301, 5), (1e300, 5), (100, -0.5), (100, 1e300), (100, 10**400)])
@pytest.mark.parametrize("chunk_chars", [97, 1 << 20])
def test_a_time_out_of_range_is_no_time_in_the_record(ts: float, dur: float, chunk_chars: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A start or duration no trace can hold (a negative duration, one past 1e300 us) reads as None, as an absent one,
    from both decoders: the reader then needs no range test of its own for each event."""
    good = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 5}
    text = json.dumps({"traceEvents": [good] * 3 + [good | {"ts": ts, "dur": dur}] + [good] * 3})
    times = [(event.ts, event.dur) for event in records(text, chunk_chars, monkeypatch)]
    odd = (None if abs(ts) >= 1e300 else float(ts), None if not 0 <= dur < 1e300 else float(dur))
    assert times == [(10.0, 5.0)] * 3 + [odd] + [(10.0, 5.0)] * 3


def test_tensor_shapes_the_standard_decoder_read_are_kept_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op whose chunk msgspec refused (a `NaN` in it) keeps its tensor shapes and types as the chunk decoder
    would, a non-finite number in them as null, a large one whole."""
    args = {"Input Dims": [[2**70], [4, float("nan")]], "Input type": ["float", "c10::Half"], "Unread": float("nan")}
    text = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "args": args}]})
    [event] = records(text, 1 << 20, monkeypatch)
    assert trace_stream.args_dict(event.args) == {"Input Dims": [[2**70], [4, None]], "Input type": ["float", "c10::Half"]}
