"""Byte sizes as people type them: `1073741824`, `64K`, `1M`, `1G`, `1GiB`, `1GB`.

nccl-tests reads a bare suffix as a power of 1024 (`-b 64K`), so `K`, `M`, `G`, `T` here
are KiB, MiB, GiB, TiB; the spelled-out forms are unambiguous: `GiB` is 2^30, `GB` is 10^9.
"""

from __future__ import annotations

import re

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_SIZE_BYTES

_SIZE = re.compile(r"\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([KMGTP]?)(i?B)?\s*\Z", re.IGNORECASE | re.ASCII)
_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def parse_size_bytes(text: str, field: str = "size") -> int:
    """Parse `text` into a whole number of bytes; raise InputError naming `field` when it is not a size."""
    match = _SIZE.match(text)
    if not match:
        raise InputError(f"{field}: {text[:40]!r} is not a size (examples: 1048576, 64K, 1M, 1G, 1GiB, 1GB)")
    number, prefix, unit = match.group(1), match.group(2).upper(), match.group(3)
    power = _POWER[prefix]
    base = 1000 if unit is not None and unit.lower() == "b" and prefix else 1024
    from fractions import Fraction  # exact decimals for the few sizes typed; formatting sizes (every report) needs none

    value = Fraction(number) * base**power
    if value.denominator != 1:
        raise InputError(f"{field}: {text!r} is not a whole number of bytes")
    if value > MAX_SIZE_BYTES:
        raise InputError(f"{field}: {text!r} is above linkscope's cap of {MAX_SIZE_BYTES:,} bytes (1 PiB, topo/common/limits.py)")
    return int(value)


def format_size_bytes(size_bytes: float) -> str:
    """Render a byte count with a binary suffix (`1 GiB`, `64 KiB`, `512 B`) for people."""
    value = float(size_bytes)
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or suffix == "TiB":
            return f"{value:.0f} {suffix}" if value == int(value) else f"{value:.3g} {suffix}"
        value /= 1024
    return f"{value:.3g} TiB"


def geometric_sizes(low: int, high: int, factor: int, limit: int) -> list[int]:
    """nccl-tests' sweep: `low`, `low*factor`, ... while not above `high` (always at least `low`); it stops
    once it holds more than `limit` sizes, so a caller can refuse a sweep that long without building it."""
    sizes = [low]
    while sizes[-1] * factor <= high and len(sizes) <= limit:
        sizes.append(sizes[-1] * factor)
    return sizes
