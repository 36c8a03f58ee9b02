"""Finding severities and the exit-status rule every command with findings shares."""

from __future__ import annotations

from collections.abc import Iterable

SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
"""Finding severities, least severe first."""


def worst_severity(severities: Iterable[str]) -> str | None:
    """The most severe of `severities`, or None when there are none."""
    found = list(severities)
    return max(found, key=SEVERITIES.index) if found else None


def reaches(severities: Iterable[str], fail_on: str) -> bool:
    """True when one of `severities` is at or above `fail_on` (the exit-1 rule of `check` and `doctor`)."""
    worst = worst_severity(severities)
    return worst is not None and SEVERITIES.index(worst) >= SEVERITIES.index(fail_on)
