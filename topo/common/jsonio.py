"""The one JSON reader and the one JSON writer: standard JSON only, decoder limits as input errors.

Python's `json` reads `NaN` and `Infinity`, raises ValueError for integers past 4,300 digits and
RecursionError for deeply nested arrays; it writes `NaN` and `Infinity`, which other JSON readers
refuse. Here, reading a non-finite constant, an integer longer than MAX_INTEGER_DIGITS or
nesting past the decoder's depth check is one :class:`InputError` line; writing is always standard
JSON: a non-finite float (a bandwidth over zero time, say) is written as `null`, "no finite value".
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_INTEGER_DIGITS


def _refuse_constant(word: str) -> Any:
    raise InputError(f"{word} is not a JSON number (non-finite values are not accepted)")


def _bounded_int(word: str) -> int:
    digits = len(word.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise InputError(f"an integer of {digits} digits (at most {MAX_INTEGER_DIGITS} are accepted)")
    return int(word)


def _finite_float(word: str) -> float:
    value = float(word)
    if not math.isfinite(value):
        raise InputError(f"{word[:40]} is out of range for a number")
    return value


_LONE_SURROGATE = re.compile(
    r"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\)(?:\\\\)*(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|[\ud800-\udfff]"
)
"""A `\\uD800`-`\\uDFFF` escape that is not half of a pair (or a raw surrogate): no character of any text."""

_SURROGATE_LOOKAHEAD_CHARS = 12
"""How far a match looks past its end (the low half of a pair): what a streamed check holds back per chunk."""


def refuse_lone_surrogates(text: str, name: str) -> None:
    """The one policy on lone surrogates in JSON: InputError. Python's decoder accepts `"\\udc80"`, and the
    string it makes cannot be printed or written as UTF-8, so it would crash the first print instead."""
    if _may_hold_surrogate(text) and (match := _LONE_SURROGATE.search(text)) is not None:
        _refuse(match, name)


def _may_hold_surrogate(text: str) -> bool:
    """Whether `text` can hold a surrogate: a character past ASCII, or a `\\u` escape. A backslash is looked for
    first: one character is found with memchr, about fifty times faster than the two-character `\\u` over text
    that holds none (a profiler trace of hundreds of MB, say)."""
    return not text.isascii() or ("\\" in text and "\\u" in text)


def _refuse(match: re.Match[str], name: str) -> None:
    found = match.group()
    shown = f"\\u{found[-4:]}" if len(found) > 1 else f"U+{ord(found):04X}"
    raise InputError(f"{name}: a lone surrogate ({shown}) in a JSON string: half of a UTF-16 pair is no character")


class SurrogateCheck:
    """:func:`refuse_lone_surrogates` over text read in chunks: each chunk is checked with the end of
    the one before (a pair, or the backslashes before an escape, may straddle them); `done` checks the
    characters held back at the end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.held = ""
        self.judged = 0
        """Characters at the start of `held` whose matches were judged already."""

    def feed(self, chunk: str) -> None:
        """Check `chunk`, holding back its last characters until the next one arrives."""
        text = self.held + chunk
        cut = max(0, len(text) - _SURROGATE_LOOKAHEAD_CHARS)
        self._judge(text, cut)
        keep = min(len(text), 2 * _SURROGATE_LOOKAHEAD_CHARS)
        self.held, self.judged = text[len(text) - keep:], max(0, cut - (len(text) - keep))

    def done(self) -> None:
        """Check the characters held back at the end of the stream."""
        self._judge(self.held, len(self.held))

    def _judge(self, text: str, cut: int) -> None:
        if _may_hold_surrogate(text):
            for match in _LONE_SURROGATE.finditer(text):
                if match.end() > self.judged and match.end() <= cut:
                    _refuse(match, self.name)


def read_json(text: str, name: str) -> Any:
    """Parse standard JSON `text`; every failure is InputError `<name>: ...` (never a traceback)."""
    refuse_lone_surrogates(text, name)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    except RecursionError:  # the decoder's own depth check, at the interpreter's recursion limit
        raise InputError(f"{name}: JSON nested deeper than linkscope reads (arrays or objects inside each other "
                         f"about {sys.getrecursionlimit()} deep)") from None
    except ValueError as exc:
        raise InputError(f"{name}: not valid JSON ({type(exc).__name__})") from None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def json_text(value: Any, indent: int | None = 2, compact: bool = False) -> str:
    """`value` as standard JSON text (non-finite floats become null); `compact` drops all spaces.

    Compact text is written by msgspec's encoder (several times faster than the stdlib's on a large report, the
    same policy: non-finite floats as null), unless it holds characters outside ASCII, which the stdlib's writer
    escapes as every other JSON text of ours does."""
    if compact:
        import msgspec

        text = msgspec.json.encode(value).decode()
        if text.isascii():
            return text
    separators = (",", ":") if compact else None
    try:
        return json.dumps(value, indent=None if compact else indent, separators=separators, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), indent=None if compact else indent, separators=separators, allow_nan=False)
