"""Quantities for people, one way everywhere: bandwidth in GB/s and durations in s, ms or us
(sizes in bytes are :mod:`topo.common.sizes`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

GBPS = "GB/s"
"""The bandwidth unit everywhere: 10^9 bytes per second."""


def format_gbps(value: float, spec: str | None = None, infinite: str = "unbounded") -> str:
    """A bandwidth for people, the one way linkscope writes one: `372 GB/s`, `5.8 GB/s`, `0.131 GB/s` (never a
    bare `0 GB/s`); `spec` fixes the number's format where a table or a report lines its figures up (`.1f`:
    `45.3 GB/s`); an infinite bandwidth (one rank moves nothing, a link with no cost) is `infinite`."""
    if math.isinf(value):
        return infinite
    if spec is not None:
        return f"{value:{spec}} {GBPS}"
    return f"{value:.0f} {GBPS}" if value >= 10 else f"{value:.2g} {GBPS}" if value >= 1 else f"{value:.3g} {GBPS}"


def format_gbps_range(values: Iterable[float]) -> str:
    """Whole GB/s, or the range they span: `390 GB/s`, `370-397 GB/s`."""
    rounded = sorted({round(value) for value in values})
    return f"{rounded[0]} {GBPS}" if len(rounded) == 1 else f"{rounded[0]}-{rounded[-1]} {GBPS}"


def format_seconds(seconds: float | None) -> str:
    """A duration for people: `6.28 ms`, `1.2 s`, `15 us`."""
    if seconds is None:
        return "-"
    if seconds >= 1000:
        return f"{seconds:,.0f} s"
    if seconds >= 1:
        return f"{seconds:.4g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} us"


def format_share(fraction: float) -> str:
    """A fraction as a percentage for people: `47%`, and `0.4%` rather than a `0%` that reads as nothing."""
    return f"{fraction:.1%}" if 0 < abs(fraction) < 0.01 else f"{fraction:.0%}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 NIC`, `2 NICs`: a count with its noun in the right number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
