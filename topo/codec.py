"""JSON round-trip for the frozen dataclasses of :mod:`topo.model`.

One generic encoder/decoder driven by the dataclass type hints, so adding a field to the
model needs no codec change. Decoding validates types and raises :class:`InputError`
with the JSON path of the first bad field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from topo.errors import InputError
from topo.model import SCHEMA_VERSION, Measurements, Snapshot

T = TypeVar("T")

MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
"""Largest snapshot file the loader accepts."""

MAX_SHARED_VALUES = 65536
"""Distinct small values (NVLink ports, P2P states) the decoder remembers per type, to share them."""


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
        hints = _hints(kind)
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


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Build an instance of `cls` from plain JSON data, checking every field's type."""
    return typing.cast(T, _decoder(typing.cast(Any, cls))(data, path))


def _decode(tp: Any, data: Any, path: str) -> Any:
    return _decoder(tp)(data, path)


Decoder = Callable[[Any, str], Any]


@cache
def _decoder(tp: Any) -> Decoder:
    """A function that decodes JSON data into `tp`, built once per type (a cluster of a thousand hosts
    decodes a million values; walking the type hints for each one would take seconds)."""
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
        return _scalar_decoder(tp)
    raise TypeError(f"codec cannot decode type {tp!r}")  # a model bug, not bad input


def _union_decoder(options: tuple[Any, ...]) -> Decoder:
    nullable = type(None) in options
    decoders = [_decoder(option) for option in options if option is not type(None)]

    def decode(data: Any, path: str) -> Any:
        if data is None and nullable:
            return None
        errors = []
        for option in decoders:
            try:
                return option(data, path)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if errors else f"{path}: unexpected null")

    return decode


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item_decoder = _decoder(args[0])

        def decode_items(data: Any, path: str) -> Any:
            if not isinstance(data, list):
                raise InputError(f"{path}: expected a list, got {_kind(data)}")
            return tuple([item_decoder(item, f"{path}[{i}]") for i, item in enumerate(data)])

        return decode_items
    decoders = [_decoder(arg) for arg in args]

    def decode_fixed(data: Any, path: str) -> Any:
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a list, got {_kind(data)}")
        if len(decoders) != len(data):
            raise InputError(f"{path}: expected {len(decoders)} items, got {len(data)}")
        return tuple(decoder(item, f"{path}[{i}]") for i, (decoder, item) in enumerate(zip(decoders, data, strict=True)))

    return decode_fixed


def _dataclass_decoder(cls: type) -> Decoder:
    hints = _hints(cls)
    fields = {f.name: _decoder(hints[f.name]) for f in dataclasses.fields(cls) if f.init}
    decode = _dataclass_decoder_body(cls, fields, frozenset(fields))
    if all(_is_plain(hints[name]) for name in fields):
        return _memoised(cls, decode)
    return decode


def _memoised(cls: type, decode: Decoder) -> Decoder:
    """`decode` for a dataclass of plain fields, sharing one immutable instance per distinct value (a
    cluster repeats the same NVLink port or P2P status a hundred thousand times)."""
    seen: dict[tuple[tuple[str, type, Any], ...], Any] = {}

    def decode_shared(data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            return decode(data, path)
        try:
            key = tuple([(name, type(value), value) for name, value in data.items()])  # True is not 1 here
            found = seen.get(key)
        except TypeError:  # a list or object where a plain value belongs: let decode say where
            return decode(data, path)
        if found is None:
            found = decode(data, path)
            if len(seen) < MAX_SHARED_VALUES:
                seen[key] = found
        return found

    return decode_shared


def _dataclass_decoder_body(cls: type, fields: dict[str, Decoder], names: frozenset[str]) -> Decoder:
    def decode(data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected an object, got {_kind(data)}")
        if not names.issuperset(data):
            raise InputError(f"{path}: unknown field {sorted(set(data) - names)[0]!r}")
        kwargs = {name: fields[name](value, f"{path}.{name}") for name, value in data.items()}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise InputError(f"{path}: {exc}") from None

    return decode


def _enum_decoder(cls: type[enum.Enum]) -> Decoder:
    def decode(data: Any, path: str) -> Any:
        try:
            return cls(data)
        except ValueError:
            raise InputError(f"{path}: {data!r} is not one of {[m.value for m in cls]}") from None

    return decode


def _decode_float(data: Any, path: str) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise InputError(f"{path}: expected a number, got {_kind(data)}")
    return float(data)


def _decode_int(data: Any, path: str) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise InputError(f"{path}: expected an integer, got {_kind(data)}")
    return data


def _scalar_decoder(tp: type) -> Decoder:
    def decode(data: Any, path: str) -> Any:
        if not isinstance(data, tp):
            raise InputError(f"{path}: expected {tp.__name__}, got {_kind(data)}")
        return data

    return decode


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(data), "a number")


def snapshot_to_json(snapshot: Snapshot, indent: int | None = 2) -> str:
    """Serialise a snapshot to JSON text."""
    return json.dumps(to_jsonable(snapshot), indent=indent)


def snapshot_from_json(text: str, name: str = "<json>") -> Snapshot:
    """Parse snapshot JSON text; raise InputError naming `name` and the problem."""
    data = _load_json_object(text, name)
    if "schema" not in data and isinstance(data.get("snapshot"), dict):
        data = data["snapshot"]  # the output of `linkscope probe --json` wraps the snapshot
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise InputError(f"{name}: unsupported snapshot schema {schema!r} (this linkscope reads schema {SCHEMA_VERSION})")
    try:
        return from_jsonable(Snapshot, data)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def measurements_to_json(measurements: Measurements, indent: int | None = 2) -> str:
    """Serialise measurements to JSON text (with the schema version)."""
    return json.dumps({"schema": SCHEMA_VERSION, "measurements": to_jsonable(measurements)}, indent=indent)


def measurements_from_json(text: str, name: str = "<json>") -> Measurements:
    """Parse measurements JSON (as written by `measurements_to_json`, or a snapshot that carries them)."""
    data = _load_json_object(text, name)
    if data.get("schema") != SCHEMA_VERSION:
        raise InputError(f"{name}: unsupported measurements schema {data.get('schema')!r}")
    payload = data.get("measurements")
    if payload is None:
        raise InputError(f"{name}: no measurements in this file")
    try:
        return from_jsonable(Measurements, payload, "$.measurements")
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def _load_json_object(text: str, name: str) -> dict[str, Any]:
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise InputError(f"{name}: file is larger than {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object at the top level")
    return data
