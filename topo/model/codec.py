"""JSON round-trip for the frozen dataclasses of :mod:`topo.model`.

One generic encoder/decoder driven by the dataclass type hints, so adding a field to the
model needs no codec change. Decoding checks types, then meaning (:mod:`topo.model.validate`), and
raises :class:`InputError` naming the file given and the JSON path of the first bad field.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text, read_json, refuse_lone_surrogates
from linkscope.topo.common.limits import MAX_SNAPSHOT_BYTES
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import SCHEMA_VERSION, Snapshot
from linkscope.topo.model.validate import validate_measurements, validate_snapshot

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    """Turn a model object into plain JSON types (dicts, lists, str, numbers, None)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _ENCODERS[kind] = _encoder(kind)
    return encoder(value)


_PLAIN = frozenset({str, int, float, bool, type(None)})
_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def _encoder(kind: type) -> Callable[[Any], Any]:
    """How values of one type become JSON, found once per type (a cluster file holds millions of values)."""
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        names = tuple(f.name for f in dataclasses.fields(kind))
        plain = tuple(_is_plain(hints[name]) for name in names)
        if all(plain):
            return lambda value: {name: getattr(value, name) for name in names}
        return lambda value: {name: getattr(value, name) if is_plain else to_jsonable(getattr(value, name))
                              for name, is_plain in zip(names, plain, strict=True)}
    if issubclass(kind, enum.Enum):
        return lambda value: value.value
    if issubclass(kind, (tuple, list)):
        return lambda value: [to_jsonable(item) for item in value]
    return lambda value: value


def _is_plain(tp: Any) -> bool:
    """True for a type hint whose values are JSON as they are (str, numbers, bool, None, or a union of them)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return all(_is_plain(option) for option in typing.get_args(tp))
    return tp in _PLAIN


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Build an instance of `cls` from plain JSON data, checking every field's type."""
    try:
        return typing.cast(T, _decoder(typing.cast(Any, cls))(data))
    except _BadValue as bad:
        raise InputError(f"{path}{''.join(reversed(bad.where))}: {bad.problem}") from None


class _BadValue(Exception):
    """A value that does not fit its type; containers add their step of the JSON path on the way up."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where: list[str] = []
        """Path steps, innermost first (`[3]`, `.gpus`)."""

    def at(self, step: str) -> _BadValue:
        self.where.append(step)
        return self


Decoder = Callable[[Any], Any]
"""Checks one JSON value against a type and builds it; raises _BadValue."""


@cache
def _decoder(tp: Any) -> Decoder:
    """The decoder of type `tp`, built once per type so a large snapshot decodes without re-reading hints."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(typing.get_args(tp))
    if origin is tuple:
        return _tuple_decoder(typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_decoder(tp)
    if tp is float:
        return _decode_float
    if tp is int:
        return _decode_int
    if tp in (str, bool):
        return _exact_decoder(tp)
    raise TypeError(f"codec cannot decode type {tp!r}")  # a model bug, not bad input


def _union_decoder(options: tuple[Any, ...]) -> Decoder:
    nullable = type(None) in options
    decoders = [_decoder(option) for option in options if option is not type(None)]
    if nullable and len(decoders) == 1:
        (only,) = decoders

        def decode_optional(data: Any) -> Any:
            return None if data is None else only(data)

        return decode_optional

    def decode(data: Any) -> Any:
        if data is None and nullable:
            return None
        first: _BadValue | None = None
        for decoder in decoders:
            try:
                return decoder(data)
            except _BadValue as bad:
                first = first or bad
        raise first or _BadValue("unexpected null")

    return decode


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item_decoder = _decoder(args[0])

        def decode_items(data: Any) -> Any:
            if not isinstance(data, list):
                raise _BadValue(f"expected a list, got {_kind(data)}")
            try:
                return tuple([item_decoder(item) for item in data])
            except _BadValue as bad:
                raise bad.at(f"[{_failed_index(item_decoder, data)}]") from None

        return decode_items
    decoders = [_decoder(arg) for arg in args]

    def decode_fixed(data: Any) -> Any:
        if not isinstance(data, list):
            raise _BadValue(f"expected a list, got {_kind(data)}")
        if len(decoders) != len(data):
            raise _BadValue(f"expected {len(decoders)} items, got {len(data)}")
        values = []
        for index, (decoder, item) in enumerate(zip(decoders, data, strict=True)):
            try:
                values.append(decoder(item))
            except _BadValue as bad:
                raise bad.at(f"[{index}]") from None
        return tuple(values)

    return decode_fixed


def _failed_index(decoder: Decoder, items: list[Any]) -> int:
    """The position of the first item `decoder` rejects (only looked up after a failure)."""
    for index, item in enumerate(items):
        try:
            decoder(item)
        except _BadValue:
            return index
    return 0


def _dataclass_decoder(tp: type) -> Decoder:
    hints = typing.get_type_hints(tp)
    init_fields = [f for f in dataclasses.fields(tp) if f.init]
    fields = {f.name: _decoder(hints[f.name]) for f in init_fields}
    defaults = {f.name: f.default for f in init_fields if f.default is not dataclasses.MISSING}
    factories = {f.name: f.default_factory for f in init_fields if f.default_factory is not dataclasses.MISSING}
    required = [f.name for f in init_fields if f.name not in defaults and f.name not in factories]
    # A plain dataclass (no __post_init__, no slots, every field an init field) is filled in place: what
    # its generated __init__ does, at a third of the cost, which counts when a thousand snapshots load.
    plain = (not hasattr(tp, "__post_init__") and "__slots__" not in vars(tp)
             and len(init_fields) == len(dataclasses.fields(tp)))

    def decode(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _BadValue(f"expected an object, got {_kind(data)}")
        values = {}
        for name, value in data.items():
            decoder = fields.get(name)
            if decoder is None:
                unknown = sorted(set(data) - set(fields))
                raise _BadValue(f"unknown field {unknown[0]!r}")
            try:
                values[name] = decoder(value)
            except _BadValue as bad:
                raise bad.at(f".{name}") from None
        if not plain:
            try:
                return tp(**values)
            except TypeError as exc:
                raise _BadValue(str(exc)) from None
        for name in required:
            if name not in values:
                raise _BadValue(f"missing field {name!r}")
        instance: Any = object.__new__(tp)
        state = instance.__dict__
        state.update(defaults)
        for name, factory in factories.items():
            if name not in values:
                state[name] = factory()
        state.update(values)
        return instance

    return decode


def _enum_decoder(tp: type[enum.Enum]) -> Decoder:
    def decode(data: Any) -> Any:
        try:
            return tp(data)
        except ValueError:
            raise _BadValue(f"{data!r} is not one of {[m.value for m in tp]}") from None

    return decode


def _decode_float(data: Any) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise _BadValue(f"expected a number, got {_kind(data)}")
    return float(data)


def _decode_int(data: Any) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise _BadValue(f"expected an integer, got {_kind(data)}")
    return data


def _exact_decoder(tp: type) -> Decoder:
    def decode(data: Any) -> Any:
        if not isinstance(data, tp):
            raise _BadValue(f"expected {tp.__name__}, got {_kind(data)}")
        return data

    return decode


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(data), "a number")


TYPED_FROM_BYTES = 512 * 1024
"""From how much JSON read in one process the typed way in and out (:mod:`topo.model.typed`) pays for its start-up:
importing msgspec and building the model's mirror take about 20 ms, what the generic decoder needs for half a
megabyte. Below it (a sample, one host's file) the generic codec is done first."""
TYPED_FROM_HOSTS = 16
"""A snapshot of this many hosts is written the typed way whatever was read before."""
_read_bytes = [0]
"""JSON bytes this process has decoded as snapshots so far."""


def _typed_pays(size_bytes: int) -> bool:
    _read_bytes[0] += size_bytes
    return _read_bytes[0] >= TYPED_FROM_BYTES


def snapshot_to_json(snapshot: Snapshot, indent: int | None = 2) -> str:
    """Serialise a snapshot to JSON text."""
    if _typed_pays(0) or len(snapshot.hosts) >= TYPED_FROM_HOSTS:
        from linkscope.topo.model.typed import snapshot_text

        text = snapshot_text(snapshot, indent)
        if text is not None:
            return text
    return json_text(to_jsonable(snapshot), indent=indent)


def snapshot_from_json(text: str, name: str = "<json>") -> Snapshot:
    """Parse snapshot JSON text; raise InputError naming `name` and the problem.

    Once the typed decoder pays (:data:`TYPED_FROM_BYTES`), a well-formed file is decoded by
    :func:`~topo.model.typed.decode_snapshot` (in C); any other text the generic way, which reads
    `linkscope probe --json` output too and says what is wrong with the rest."""
    _refuse_oversized(text, name)
    refuse_lone_surrogates(text, name)
    typed = None
    if _typed_pays(len(text)):
        from linkscope.topo.model.typed import decode_snapshot

        typed = decode_snapshot(text)
    data, path = (None, "$") if typed is not None else _snapshot_object(text, name)
    try:
        snapshot = typed if typed is not None else from_jsonable(Snapshot, data, path)
        validate_snapshot(snapshot, path)
        return snapshot
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def _snapshot_object(text: str, name: str) -> tuple[dict[str, Any], str]:
    """The snapshot's JSON object in `text` and its JSON path; InputError (already naming `name`) when there
    is none of this schema."""
    data = _load_json_object(text, name)
    path = "$"
    if "schema" not in data and isinstance(data.get("snapshot"), dict):
        data, path = data["snapshot"], "$.snapshot"  # the output of `linkscope probe --json` wraps the snapshot
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise InputError(f"{name}: unsupported snapshot schema {schema!r} (this linkscope reads schema {SCHEMA_VERSION})")
    return data, path


def measurements_to_json(measurements: Measurements, indent: int | None = 2) -> str:
    """Serialise measurements to JSON text (with the schema version)."""
    return json_text({"schema": SCHEMA_VERSION, "measurements": to_jsonable(measurements)}, indent=indent)


def measurements_from_json(text: str, name: str = "<json>") -> Measurements:
    """Parse measurements JSON (as written by `measurements_to_json`, or a snapshot that carries them)."""
    data = _load_json_object(text, name)
    if data.get("schema") != SCHEMA_VERSION:
        raise InputError(f"{name}: unsupported measurements schema {data.get('schema')!r}")
    payload = data.get("measurements")
    if payload is None:
        raise InputError(f"{name}: no measurements in this file")
    try:
        measurements = from_jsonable(Measurements, payload, "$.measurements")
        validate_measurements(measurements, "$.measurements")
        return measurements
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def _refuse_oversized(text: str, name: str) -> None:
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise InputError(f"{name}: file is larger than {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB")


def _load_json_object(text: str, name: str) -> dict[str, Any]:
    _refuse_oversized(text, name)
    data = read_json(text, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object at the top level")
    return data
