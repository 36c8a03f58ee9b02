"""Linux cpulists (`0-3,8,10-11`), as sysfs and NVML affinity masks spell sets of CPUs or NUMA nodes."""

from __future__ import annotations

from collections.abc import Iterable


def parse_cpulist(text: str) -> set[int]:
    """The set of numbers in a Linux cpulist such as `0-3,8,10-11` (raise ValueError if malformed)."""
    numbers: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high) if high else int(low)
        if last < first:
            raise ValueError(f"bad range {part!r}")
        numbers.update(range(first, last + 1))
    return numbers


def format_cpulist(numbers: Iterable[int]) -> str:
    """The Linux cpulist of a set of numbers, ranges joined: {0,1,2,5} -> `0-2,5`."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = previous = None
    for number in ordered:
        if previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(f"{start}-{previous}" if previous != start else f"{start}")
        start = previous = number
    if start is not None:
        parts.append(f"{start}-{previous}" if previous != start else f"{start}")
    return ",".join(parts)
