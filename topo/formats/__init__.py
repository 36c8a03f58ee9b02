"""Readers of other tools' text output and of rank-map inputs."""

from linkscope.topo.numbers import parse_float


def non_negative_number(word: str, where: str) -> float:
    """`word` as a finite number >= 0; InputError `<where> '<word>' is not ...` otherwise."""
    return parse_float(word, where, minimum=0)
