"""The fast way in: a snapshot decoded from JSON text in C (msgspec), for files that are well formed.

The generic decoder of :mod:`topo.model.codec` walks Python dicts made by `json.loads`; msgspec parses,
type-checks and builds the same dataclasses in C, and writes them (`benchmarks/bench_cluster.py codec` times both
ways on a cluster's 1,024 host files). It is a fast path only: :func:`decode_snapshot` returns None for any
text it does not accept, and the codec then decodes that text the generic way, which names the file, the JSON
path and the problem (one line) or, for a form this path leaves to it (`linkscope probe --json` output), reads
it. So it must accept nothing the generic decoder refuses, and build what that decoder builds:

- the JSON is checked against a mirror of the model (one msgspec Struct per dataclass, made from the same
  type hints) that refuses unknown fields, integers past MAX_INTEGER_DIGITS digits, numbers whose size
  could only come from such an integer, and a schema other than SCHEMA_VERSION (or none); msgspec itself
  refuses what `json.loads` refuses (NaN, Infinity, numbers out of range, malformed text);
- then the text is decoded into the model's own frozen dataclasses.

Both passes run with the garbage collector paused: a cluster file is millions of new objects, none of
them garbage, and the collections they set off took longer than the decoding.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Annotated, Any, Literal

import msgspec

from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.limits import MAX_INTEGER_DIGITS
from linkscope.topo.model.snapshot import SCHEMA_VERSION, Snapshot

_LARGEST_INT = 10**MAX_INTEGER_DIGITS - 1
_BOUNDED_INT = Annotated[int, msgspec.Meta(ge=-_LARGEST_INT, le=_LARGEST_INT)]
_BOUNDED_FLOAT = Annotated[float, msgspec.Meta(gt=-float(10**MAX_INTEGER_DIGITS), lt=float(10**MAX_INTEGER_DIGITS))]
"""A float field given an integer literal gets its value: a literal of more than MAX_INTEGER_DIGITS digits is
at least 1e18 in size, so any number that large goes the generic way, which looks at the digits."""


def decode_snapshot(text: str) -> Snapshot | None:
    """The snapshot in `text` (not yet checked for meaning: :func:`~topo.model.validate.validate_snapshot`),
    or None when the text is anything but a well-formed snapshot of this schema."""
    checker, decoder = _decoders()
    with collector_paused():
        try:
            checker.decode(text)
            return typing.cast(Snapshot, decoder.decode(text))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None


@cache
def _decoders() -> tuple[msgspec.json.Decoder[Any], msgspec.json.Decoder[Snapshot]]:
    """The mirror's decoder (the checks) and the model's (the objects), built once per process."""
    return msgspec.json.Decoder(_mirror(Snapshot)), msgspec.json.Decoder(Snapshot)


def _mirror(tp: Any) -> Any:
    """The type the checking pass reads where the model has `tp`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_mirror(option) for option in typing.get_args(tp))]  # noqa: UP007
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple[_mirror(args[0]), ...]  # type: ignore[misc]
        return tuple[tuple(_mirror(arg) for arg in args)]  # type: ignore[misc]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _mirror_struct(tp)
    if tp is int:
        return _BOUNDED_INT
    if tp is float:
        return _BOUNDED_FLOAT
    if tp in (str, bool, type(None)) or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return tp
    raise TypeError(f"no typed decoding for {tp!r}")  # a model bug, not bad input


@cache
def _mirror_struct(tp: type) -> type[msgspec.Struct]:
    """A Struct with `tp`'s init fields, required where `tp` requires them, refusing any other field."""
    hints = typing.get_type_hints(tp)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in dataclasses.fields(tp):
        if not field.init:
            continue
        if tp is Snapshot and field.name == "schema":
            fields.append((field.name, Literal[SCHEMA_VERSION]))  # the generic decoder refuses a file without one
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            fields.append((field.name, _mirror(hints[field.name])))
        else:
            fields.append((field.name, _mirror(hints[field.name]), None))  # checked, never used: any default does
    return msgspec.defstruct(f"Checked{tp.__name__}", fields, kw_only=True, forbid_unknown_fields=True, gc=False)


def snapshot_text(snapshot: Snapshot, indent: int | None) -> str | None:
    """`snapshot` as the JSON text :func:`~topo.common.jsonio.json_text` writes of it (`indent` None: one line),
    written in C; None when it holds text that only `json_text` writes as linkscope does (non-ASCII and
    control characters escaped). A float below 1e-4 or from 1e16 up is written in the other notation of
    the same number (`1e-05` there, `1e-5` here)."""
    encoded = msgspec.json.format(msgspec.json.encode(snapshot), indent=0 if indent is None else indent)
    if not encoded.isascii() or b"\\u" in encoded or b"\x7f" in encoded:
        return None
    return encoded.decode("ascii")
