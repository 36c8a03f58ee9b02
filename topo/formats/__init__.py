"""Readers of other tools' text output and of rank-map inputs."""

from topo.errors import InputError


def non_negative_number(word: str, where: str) -> float:
    """`word` as a number >= 0; InputError `<where> '<word>' is not ...` otherwise (NaN included)."""
    try:
        value = float(word)
    except ValueError:
        raise InputError(f"{where} {word!r} is not a number") from None
    if value != value or value < 0:
        raise InputError(f"{where} {word!r} is not a non-negative number")
    return value
