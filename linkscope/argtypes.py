"""Argument types for numeric flags: ASCII digits, explicit ranges, finite numbers, one-line errors.

`type=int` accepts other scripts' digits and `1_000`, and `type=float` accepts `nan` and `inf`
(a `--timeout nan` never expires). These parse through :mod:`topo.common.numbers` instead, and a bad
value is argparse's one line naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.numbers import parse_float, parse_int


def whole_number(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer from `minimum` to `maximum`."""

    def parse(text: str) -> int:
        try:
            return parse_int(text.strip(), "value", minimum, maximum)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "whole number"
    return parse


def seconds(minimum: float = 0.0, maximum: float = 7 * 24 * 3600.0) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds, more than `minimum`, at most `maximum` (a week)."""

    def parse(text: str) -> float:
        try:
            value = parse_float(text.strip(), "value", minimum, maximum)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if value <= minimum:
            raise argparse.ArgumentTypeError(f"value {text!r} must be more than {minimum:g}")
        return value

    parse.__name__ = "seconds"
    return parse
