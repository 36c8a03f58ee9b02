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


def read_json(text: str, name: str) -> Any:
    """Parse standard JSON `text`; every failure is InputError `<name>: ...` (never a traceback)."""
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
    """`value` as standard JSON text (non-finite floats become null); `compact` drops all spaces."""
    separators = (",", ":") if compact else None
    try:
        return json.dumps(value, indent=None if compact else indent, separators=separators, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), indent=None if compact else indent, separators=separators, allow_nan=False)
