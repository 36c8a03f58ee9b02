"""The one JSON writer of the command line: always valid JSON (RFC 8259), whatever the numbers.

Python's `json` writes `Infinity` and `NaN` for non-finite floats, which no other JSON reader
accepts; a time of `inf` (nothing to send) or a ratio of `nan` becomes `null` here instead,
and `allow_nan=False` makes any value that slips past fail loudly rather than print bad JSON.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, TextIO


def finite(value: Any) -> Any:
    """`value` with every non-finite float (inf, -inf, nan) inside dicts, lists and tuples replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def json_text(value: Any, indent: int | None = 2, compact: bool = False) -> str:
    """`value` as JSON text; `compact` drops the spaces and indentation (for very large outputs)."""
    if compact:
        return json.dumps(finite(value), allow_nan=False, separators=(",", ":"))
    return json.dumps(finite(value), allow_nan=False, indent=indent)


def print_json(value: Any, indent: int | None = 2, compact: bool = False, stream: TextIO | None = None) -> None:
    """Write `value` as JSON and a newline to `stream` (stdout by default)."""
    out = stream if stream is not None else sys.stdout
    out.write(json_text(value, indent, compact))
    out.write("\n")
