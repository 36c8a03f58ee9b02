"""Findings: what every analysis reports, one base type, one JSON writer, and the exit-status rule.

Each analysis subclasses :class:`Finding` with the fields its JSON contract names (`doctor`'s host, gpus,
evidence and fix; `check`'s dim, ranks, link and costs; `nccl-log`'s ranks and communicator ...), in the
order the contract lists them; :meth:`Finding.to_json` writes every field, tuples as lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Literal, get_args

from linkscope.topo.common.frozen import frozen

Severity = Literal["info", "warning", "error"]
"""How bad a finding is."""
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
"""Finding severities, least severe first."""


@frozen
class Finding:
    """One thing worth acting on: a code people can search for and how severe it is; subclasses add the rest
    (every one a `message`)."""

    code: str
    severity: Severity

    def to_json(self) -> dict[str, Any]:
        """The finding as the JSON contracts spell it: every field, in declaration order, tuples as lists."""
        return {field.name: _jsonable(getattr(self, field.name)) for field in dataclasses.fields(self)}


def _jsonable(value: object) -> object:
    return [_jsonable(item) for item in value] if isinstance(value, tuple) else value


def worst_severity(severities: Iterable[Severity]) -> Severity | None:
    """The most severe of `severities`, or None when there are none."""
    found = list(severities)
    return max(found, key=SEVERITIES.index) if found else None


def reaches(severities: Iterable[Severity], fail_on: Severity) -> bool:
    """True when one of `severities` is at or above `fail_on` (the exit-1 rule of every command with findings)."""
    worst = worst_severity(severities)
    return worst is not None and SEVERITIES.index(worst) >= SEVERITIES.index(fail_on)
