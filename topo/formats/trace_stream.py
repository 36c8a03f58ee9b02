"""Stream the events of a Chrome-trace JSON file (as `torch.profiler` writes it) without loading it whole.

A profiler trace of a few steps is often hundreds of MB; `json.load` would hold all of it as
Python objects at once. This reader walks the top-level object and decodes `traceEvents` a chunk at a
time, so memory stays bounded by the chunk and the largest single value. A bare array of events (also
valid Chrome-trace JSON) works too.

The whole events in a chunk are decoded at once by msgspec into :class:`TraceEvent` records that hold only the
fields the readers use, and of `args` only the keys they read (:class:`EventArgs`; the rest of each event is skipped,
never built): several times faster than the standard library's decoder on the same bytes, measured by
benchmarks/bench_trace.py. A chunk msgspec refuses (a value only
Python's decoder reads, such as `NaN`, or an entry that is no object) goes through the standard decoder one event at
a time, which also says what is wrong with a malformed file.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from typing import Annotated, Any, TextIO

import msgspec

from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import SurrogateCheck, json_text
from linkscope.topo.common.limits import MAX_TRACE_CHARS, MAX_TRACE_VALUE_CHARS

_CHUNK_CHARS = 1 << 18
"""Characters read and decoded at a time. The records msgspec makes of a chunk's events take several times the text's
size, and are walked again right after (TraceEvents.add_all): a quarter of a MiB of text keeps them in a core's L2
cache, which read a 10 MB trace about a fifth faster than 1 MiB chunks (benchmarks/bench_trace.py's traces)."""
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_BOUNDARY_TRIES = 8
"""How many `},` from the end of a chunk are tried as the end of a whole event before the chunk goes event by event
(a `},` inside a string or a nested object is no boundary, and msgspec refuses the cut there)."""


LARGEST_US = 1e300
"""Times at or beyond this many microseconds are no times (an overflowed or garbage value)."""
_START_US = Annotated[float, msgspec.Meta(gt=-LARGEST_US, lt=LARGEST_US)]
_DURATION_US = Annotated[float, msgspec.Meta(ge=0, lt=LARGEST_US)]
_ABSENT = msgspec.Raw()
"""An `Input Dims` or `Input type` the event lacks (no JSON value is empty text)."""


class EventArgs(msgspec.Struct, gc=False):
    """The keys of an event's `args` that the readers use, under their names in the trace; every other key is
    skipped while decoding. Each holds whatever JSON value the event gives, UNSET where it gives none. An op's tensor
    shapes and types (`Input Dims`, `Input type`: lists of lists on every CPU op, read only on the few comm ops) stay
    JSON text until :func:`args_dict` reads them: building them for every op took a third of the decoding."""

    correlation: Any = msgspec.UNSET
    device: Any = msgspec.UNSET
    collective_name: Any = msgspec.field(default=msgspec.UNSET, name="Collective name")
    in_msg_nelems: Any = msgspec.field(default=msgspec.UNSET, name="In msg nelems")
    out_msg_nelems: Any = msgspec.field(default=msgspec.UNSET, name="Out msg nelems")
    dtype: Any = msgspec.UNSET
    group_size: Any = msgspec.field(default=msgspec.UNSET, name="Group size")
    group_name: Any = msgspec.field(default=msgspec.UNSET, name="Process Group Name")
    group_ranks: Any = msgspec.field(default=msgspec.UNSET, name="Process Group Ranks")
    input_dims: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input type")


_ARG_KEYS = tuple(zip(EventArgs.__struct_fields__, EventArgs.__struct_encode_fields__, strict=True))
"""(attribute, key in the trace) of each field of EventArgs."""
_ARG_VALUES = operator.attrgetter(*EventArgs.__struct_fields__)
_TEXT_FIELDS = ("input_dims", "input_type")
"""The fields EventArgs keeps as JSON text, and their keys in the trace."""
_TEXT_KEYS = tuple(key for attribute, key in _ARG_KEYS if attribute in _TEXT_FIELDS)


class TraceEvent(msgspec.Struct, gc=False):
    """The fields of one trace event that the readers use; whatever else an event holds is skipped while decoding.
    Each is None when the event lacks it or gives it in a form no reader uses: name, phase and category are text,
    start and duration finite numbers (a JSON integer read as a float; a duration not negative) below LARGEST_US,
    checked while decoding, in C; `pid` and `tid` hold whatever JSON value the event gives, `args` the keys of it
    the readers use (None when it is no JSON object).

    Not tracked by the garbage collector (`gc=False`): a record decoded from JSON refers to no object that refers
    back to it, so it can be in no reference cycle, and hundreds of thousands of them would otherwise set off
    collections that cost more than the decoding."""

    name: str | None = None
    ph: str | None = None
    cat: str | None = None
    ts: _START_US | None = None
    """Start, in microseconds."""
    dur: _DURATION_US | None = None
    """Duration, in microseconds."""
    pid: Any = None
    tid: Any = None
    args: EventArgs | None = None


_EVENTS = msgspec.json.Decoder(list[TraceEvent])


def event_of(value: dict[str, Any]) -> TraceEvent:
    """The record of an event the standard decoder read (a chunk msgspec refused): each field as msgspec would give
    it, None where the event gives a value of another kind or out of range."""
    start, duration = _number(value.get("ts")), _number(value.get("dur"))
    args = value.get("args")
    return TraceEvent(name=str_or_none(value.get("name")), ph=str_or_none(value.get("ph")),
                      cat=str_or_none(value.get("cat")),
                      ts=start if start is not None and -LARGEST_US < start < LARGEST_US else None,
                      dur=duration if duration is not None and 0 <= duration < LARGEST_US else None,
                      pid=value.get("pid"), tid=value.get("tid"), args=_event_args(args) if isinstance(args, dict) else None)


def _event_args(args: dict[str, Any]) -> EventArgs:
    """The EventArgs of an `args` object the standard decoder read: the tensor fields back as JSON text (a `NaN` in
    them as null: no reader takes either for a size or a type)."""
    fields = {attribute: args[key] for attribute, key in _ARG_KEYS if key in args}
    for attribute in _TEXT_FIELDS:
        if attribute in fields:
            fields[attribute] = msgspec.Raw(json_text(fields[attribute], compact=True).encode())
    return EventArgs(**fields)


def args_dict(args: EventArgs | None) -> dict[str, Any]:
    """An event's args as the readers look them up: key in the trace -> value, for the keys the event gives."""
    if args is None:
        return {}
    found = {key: value for (_, key), value in zip(_ARG_KEYS, _ARG_VALUES(args), strict=True)
             if value is not msgspec.UNSET}
    for key in _TEXT_KEYS:
        if len(found[key]):
            found[key] = _json_value(found[key])
        else:
            del found[key]
    return found


def _json_value(text: msgspec.Raw) -> Any:
    """The value JSON text holds, as the chunk's decoder reads it, or, for what it refuses (a number past a float's
    range, which it skips but does not build), as the standard decoder does."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(bytes(text))


def str_or_none(value: object) -> str | None:
    """`value` when it is text; None (unknown) for any other JSON value."""
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    """A JSON number as a float; None for any other value, and for an integer past a float's range (no time)."""
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


class _Reader:
    """A window over the stream: `buffer[position:]` is what has not been consumed yet."""

    def __init__(self, stream: TextIO, name: str, max_chars: int) -> None:
        self.stream, self.name, self.max_chars = stream, name, max_chars
        self.buffer = ""
        self.position = 0
        self.read_chars = 0
        self.at_end = False
        self.surrogates = SurrogateCheck(name)

    def fill(self, at_least: int = 0) -> None:
        if self.at_end:
            return
        try:
            chunk = self.stream.read(max(at_least, _CHUNK_CHARS))
        except UnicodeDecodeError:
            raise InputError(f"{self.name}: not a profiler trace (neither JSON text in UTF-8 nor gzip holding it)") from None
        except (OSError, EOFError, ValueError) as exc:
            raise InputError(f"{self.name}: cannot read the trace ({_reason(exc)})") from None
        if not chunk:
            self.at_end = True
            self.surrogates.done()
            return
        self.surrogates.feed(chunk)
        self.read_chars += len(chunk)
        if self.read_chars > self.max_chars:
            raise InputError(f"{self.name}: trace is larger than the {self.max_chars >> 20} MiB limit")
        self.buffer = self.buffer[self.position:] + chunk
        self.position = 0

    def skip_whitespace(self) -> None:
        while True:
            self.position = _WHITESPACE.match(self.buffer, self.position).end()  # type: ignore[union-attr]
            if self.position < len(self.buffer) or self.at_end:
                return
            self.fill()

    def peek(self) -> str:
        self.skip_whitespace()
        return self.buffer[self.position] if self.position < len(self.buffer) else ""

    def expect(self, char: str, what: str) -> None:
        found = self.peek()
        if found == "":
            raise InputError(f"{self.name}: the trace is cut short (it ends where {what} should be)")
        if found != char:
            raise InputError(f"{self.name}: not a profiler trace (expected {what}, found {found!r})")
        self.position += 1

    def value(self) -> Any:
        """Decode the next JSON value, reading more of the stream until it is whole."""
        self.skip_whitespace()
        wanted = _CHUNK_CHARS
        while True:
            try:
                decoded, end = _DECODER.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError as exc:
                needs_more = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buffer) - 1
                if self.at_end or not needs_more:
                    raise InputError(f"{self.name}: the trace is cut short or not JSON ({exc.msg} "
                                     f"near character {self.read_chars - len(self.buffer) + exc.pos})") from None
                if len(self.buffer) - self.position > MAX_TRACE_VALUE_CHARS:
                    raise InputError(f"{self.name}: one value of the trace is larger than "
                                     f"{MAX_TRACE_VALUE_CHARS >> 20} MiB") from None
                self.fill(wanted)
                wanted *= 2
                continue
            except RecursionError:
                raise InputError(f"{self.name}: the trace nests too deeply to be a profiler trace") from None
            except ValueError as exc:  # integers past Python's digit limit
                raise InputError(f"{self.name}: not a profiler trace ({_reason(exc)})") from None
            if end >= len(self.buffer) and not self.at_end and not isinstance(decoded, (dict, list, str)):
                self.fill()  # a number cut by the chunk boundary could read as a shorter number
                continue
            self.position = end
            return decoded


def read_trace_events(stream: TextIO, name: str, on_events: Callable[[list[TraceEvent]], None],
                      max_chars: int = MAX_TRACE_CHARS) -> dict[str, Any]:
    """Call `on_events` with the events of the trace in `stream`, in order, a list at a time; return the other
    top-level keys.

    Raises InputError (one line naming `name`) for anything that is not a Chrome-trace JSON
    document: another JSON shape, a cut-short file, a file over the size limit.
    """
    # Decoding makes hundreds of thousands of small objects and no reference cycles: the cyclic collector would
    # rescan the live ones again and again (a third of the time), so it rests while this trace is read.
    with collector_paused():
        return _read_trace_events(stream, name, on_events, max_chars)


def _read_trace_events(stream: TextIO, name: str, on_events: Callable[[list[TraceEvent]], None],
                       max_chars: int) -> dict[str, Any]:
    reader = _Reader(stream, name, max_chars)
    reader.fill()
    first = reader.peek()
    if first == "[":
        _read_events(reader, on_events)
        return {}
    reader.expect("{", "a JSON object with traceEvents")
    metadata: dict[str, Any] = {}
    seen_events = False
    if reader.peek() == "}":
        reader.position += 1
    else:
        while True:
            key = reader.value()
            if not isinstance(key, str):
                raise InputError(f"{name}: not a profiler trace (a key that is not a string)")
            reader.expect(":", "':' after a key")
            if key == "traceEvents":
                if reader.peek() != "[":
                    raise InputError(f"{name}: not a profiler trace (traceEvents is not a list)")
                _read_events(reader, on_events)
                seen_events = True
            else:
                metadata[key] = reader.value()
            if reader.peek() == ",":
                reader.position += 1
                continue
            reader.expect("}", "',' or '}'")
            break
    if reader.peek():
        raise InputError(f"{name}: not a profiler trace (text after the end of the JSON document)")
    if not seen_events:
        raise InputError(f"{name}: not a profiler trace (no traceEvents list)")
    return metadata


def _read_events(reader: _Reader, on_events: Callable[[list[TraceEvent]], None]) -> None:
    reader.expect("[", "'['")
    if reader.peek() == "]":
        reader.position += 1
        return
    decode = _DECODER.raw_decode
    while True:
        _decode_whole_events(reader, on_events)
        # Event by event while whole events and separators are in the buffer (what msgspec refused).
        buffer, position = reader.buffer, reader.position
        limit = len(buffer) - 1
        try:
            while position < limit:
                event, end = decode(buffer, position)
                separator = _SEPARATOR.match(buffer, end)
                if separator is None or separator.end() > limit:
                    break
                if isinstance(event, dict):
                    on_events([event_of(event)])
                if separator.group(1) == "]":
                    reader.position = separator.end()
                    return
                position = separator.end()
        except (json.JSONDecodeError, RecursionError, ValueError):
            pass
        reader.position = position
        # Slow path: one event through the general reader (reads more of the stream, reports errors).
        event = reader.value()
        if isinstance(event, dict):
            on_events([event_of(event)])
        nxt = reader.peek()
        if nxt == ",":
            reader.position += 1
            reader.skip_whitespace()
            continue
        reader.expect("]", "',' or ']' in traceEvents")
        return


def _decode_whole_events(reader: _Reader, on_events: Callable[[list[TraceEvent]], None]) -> None:
    """Decode the run of whole events from `reader.position` (the start of an event) to the last `},` of the
    buffer in one call, reading on chunk after chunk; stops where no such run decodes (the end of the list, an
    event larger than what is buffered, or something msgspec refuses), leaving the position at an event's start."""
    while True:
        buffer, start = reader.buffer, reader.position
        end = len(buffer)
        events: list[TraceEvent] | None = None
        for _ in range(_BOUNDARY_TRIES):
            end = buffer.rfind("},", start, end)
            if end < 0:
                break
            try:
                events = _EVENTS.decode(f"[{buffer[start:end + 1]}]")  # one copy of the slice, not two
                break
            except (msgspec.DecodeError, RecursionError):
                continue
        if events is None:
            return
        on_events(events)
        reader.position = end + 2
        reader.fill()  # the next chunk behind what is left of this one
        reader.skip_whitespace()


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120]
