"""JSON round-trip for the frozen dataclasses of :mod:`topo.model`.

One generic encoder/decoder driven by the dataclass type hints, so adding a field to the
model needs no codec change. Decoding checks types, then meaning (:mod:`topo.validate`), and
raises :class:`InputError` naming the file given and the JSON path of the first bad field.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, TypeVar

from topo.errors import InputError
from topo.jsonio import json_text, read_json
from topo.model import SCHEMA_VERSION, Measurements, Snapshot
from topo.validate import validate_measurements, validate_snapshot

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
    return typing.cast(T, _decode(cls, data, path))


def _decode(tp: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(option, data, path)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if errors else f"{path}: unexpected null")
    if origin is tuple:
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a list, got {_kind(data)}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{path}[{i}]") for i, item in enumerate(data))
        if len(args) != len(data):
            raise InputError(f"{path}: expected {len(args)} items, got {len(data)}")
        return tuple(_decode(arg, item, f"{path}[{i}]") for i, (arg, item) in enumerate(zip(args, data, strict=True)))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected an object, got {_kind(data)}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(f"{path}: unknown field {unknown[0]!r}")
        kwargs = {name: _decode(hints[name], value, f"{path}.{name}") for name, value in data.items()}
        try:
            return tp(**kwargs)
        except TypeError as exc:
            raise InputError(f"{path}: {exc}") from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise InputError(f"{path}: {data!r} is not one of {[m.value for m in tp]}") from None
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise InputError(f"{path}: expected a number, got {_kind(data)}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise InputError(f"{path}: expected an integer, got {_kind(data)}")
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise InputError(f"{path}: expected {tp.__name__}, got {_kind(data)}")
        return data
    raise TypeError(f"codec cannot decode type {tp!r}")  # a model bug, not bad input


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(data), "a number")


def snapshot_to_json(snapshot: Snapshot, indent: int | None = 2) -> str:
    """Serialise a snapshot to JSON text."""
    return json_text(to_jsonable(snapshot), indent=indent)


def snapshot_from_json(text: str, name: str = "<json>") -> Snapshot:
    """Parse snapshot JSON text; raise InputError naming `name` and the problem."""
    data = _load_json_object(text, name)
    path = "$"
    if "schema" not in data and isinstance(data.get("snapshot"), dict):
        data, path = data["snapshot"], "$.snapshot"  # the output of `linkscope probe --json` wraps the snapshot
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise InputError(f"{name}: unsupported snapshot schema {schema!r} (this linkscope reads schema {SCHEMA_VERSION})")
    try:
        snapshot = from_jsonable(Snapshot, data, path)
        validate_snapshot(snapshot, path)
        return snapshot
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


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


def _load_json_object(text: str, name: str) -> dict[str, Any]:
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise InputError(f"{name}: file is larger than {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MiB")
    data = read_json(text, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object at the top level")
    return data
