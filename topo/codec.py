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
from functools import cache
from typing import Any, TypeVar

from topo.errors import InputError
from topo.model import SCHEMA_VERSION, Measurements, Snapshot

T = TypeVar("T")

MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
"""Largest snapshot file the loader accepts."""


def to_jsonable(value: Any) -> Any:
    """Turn a model object into plain JSON types (dicts, lists, str, numbers, None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_jsonable(item) for item in value]
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Build an instance of `cls` from plain JSON data, checking every field's type."""
    return typing.cast(T, _decoder(cls)(data, path))


def _decode(tp: Any, data: Any, path: str) -> Any:
    return _decoder(tp)(data, path)


Decoder = typing.Callable[[Any, str], Any]


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
    names = frozenset(fields)

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
