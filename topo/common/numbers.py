"""Numbers read from text, the one way: ASCII digits only, bounded length, explicit ranges.

`str.isdigit()` accepts superscript and other Unicode digits that `int()` rejects or reads
differently (`int("٨")` is 8), and `int()` raises past 4,300 digits; `float()` reads `nan` and `inf`.
Every reader and every numeric flag parses numbers here instead (:func:`whole_number` and
:func:`decimal_number` are the argparse types), and every failure is one :class:`InputError` line.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_INTEGER_DIGITS

_INTEGER = re.compile(rf"[+-]?[0-9]{{1,{MAX_INTEGER_DIGITS}}}", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]{1,40}(?:\.[0-9]{0,40})?|\.[0-9]{1,40})(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)


def is_integer(word: str) -> bool:
    """Whether `word` is an integer :func:`parse_int` reads (ASCII digits, optional sign, bounded length)."""
    return _INTEGER.fullmatch(word) is not None


def is_decimal(word: str) -> bool:
    """Whether `word` is a finite decimal :func:`parse_float` reads (no `inf`, `nan` or hex)."""
    return _DECIMAL.fullmatch(word) is not None


def parse_int(word: str, where: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """`word` as an integer within [minimum, maximum]; InputError `<where> '<word>' ...` otherwise."""
    if not is_integer(word):
        shown = word if len(word) <= 40 else word[:37] + "..."
        raise InputError(f"{where} {shown!r} is not an integer (ASCII digits, at most {MAX_INTEGER_DIGITS})")
    value = int(word)
    _check_range(value, word, where, minimum, maximum)
    return value


def parse_float(word: str, where: str, minimum: float | None = None, maximum: float | None = None) -> float:
    """`word` as a finite number within [minimum, maximum]; InputError `<where> '<word>' ...` otherwise."""
    if not is_decimal(word):
        shown = word if len(word) <= 40 else word[:37] + "..."
        raise InputError(f"{where} {shown!r} is not a number")
    value = float(word)
    if not math.isfinite(value):
        raise InputError(f"{where} {word!r} is out of range")
    _check_range(value, word, where, minimum, maximum)
    return value


def non_negative_number(word: str, where: str) -> float:
    """`word` as a finite number >= 0; InputError `<where> '<word>' is not ...` otherwise."""
    return parse_float(word, where, minimum=0)


def _check_range(value: float, word: str, where: str, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise InputError(f"{where} {word!r} is below the minimum {_shown(minimum)}")
    if maximum is not None and value > maximum:
        raise InputError(f"{where} {word!r} is above the maximum {_shown(maximum)}")


def _shown(limit: float) -> str:
    """A range limit as people write it: integers in full (1048576, not 1.04858e+06)."""
    return str(int(limit)) if float(limit).is_integer() and abs(limit) < 1e18 else f"{limit:g}"


def whole_number(minimum: int, maximum: int = 10**MAX_INTEGER_DIGITS - 1) -> Callable[[str], int]:
    """An argparse type: an integer from `minimum` to `maximum`, read by :func:`parse_int` (so `٨`, `1_000`
    and `8.0` are refused on every flag alike, in one line naming the flag)."""

    def parse(text: str) -> int:
        try:
            return parse_int(text.strip(), "value", minimum, maximum)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "whole number"
    return parse


def decimal_number(minimum: float, maximum: float, above_minimum: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `minimum` (more than it, with `above_minimum`) to `maximum`,
    read by :func:`parse_float` (no `nan`, `inf` or hex)."""

    def parse(text: str) -> float:
        try:
            value = parse_float(text.strip(), "value", minimum, maximum)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if above_minimum and value <= minimum:
            raise argparse.ArgumentTypeError(f"value {text!r} must be more than {_shown(minimum)}")
        return value

    parse.__name__ = "number"
    return parse


WEEK_S = 7 * 24 * 3600.0
"""The longest duration a flag takes (a deadline of a week is as good as none)."""


def seconds(minimum: float = 0.0, maximum: float = WEEK_S) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds, more than `minimum`, at most `maximum`."""
    parse = decimal_number(minimum, maximum, above_minimum=True)
    parse.__name__ = "seconds"
    return parse


def comma_items(text: str, where: str) -> tuple[str, ...]:
    """The items of a comma-separated value (`1,5,25`), stripped; InputError for an empty one (`1,,5`, a
    trailing comma) or none at all: a typo is not read as a shorter list."""
    items = tuple(part.strip() for part in text.split(","))
    if not any(items):
        raise InputError(f"{where}: nothing given")
    if not all(items):
        raise InputError(f"{where}: {text!r} has an empty item (two commas, or one at an end)")
    return items
