"""Console rendering of a snapshot's hosts with rich: link matrix, legend, GPU and NIC tables.

Each renderer is a function that takes a :class:`topo.model.host.Host` (or a snapshot) and returns a
rich renderable, so `show`, `probe` and others print the same views. This module itself imports
no rich: it holds the token helpers the JSON output shares, and the style of each link class and severity.
Untrusted strings (host and device names from files) are always rendered as plain `Text`.
"""

from __future__ import annotations

from linkscope.topo.machine.links import LINK_CLASS
from linkscope.topo.model.host import Host, parse_link_token

UNKNOWN_TOKEN = "?"
"""Shown for a pair the snapshot does not describe (a link or GPU x NIC entry missing from a file)."""

CLASS_STYLES: dict[str, str] = {
    "self": "dim",
    "nvlink": "bold green",
    "switch": "cyan",
    "host": "yellow",
    "sys": "bold red",
    "unknown": "magenta",
}
"""Rich style of each colour class; tokens stay readable without colour."""

SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
"""Rich style of each finding severity, shared by `check` and `doctor` (here, so that `doctor` does not load
`check`'s view and the layout and cost modules behind it)."""


def token_class(token: str) -> str:
    """The colour class (`nvlink`, `switch`, `host`, `sys`, `self`, `unknown`) of a legend token."""
    try:
        kind, _ = parse_link_token(token)
    except ValueError:
        return "unknown"
    return LINK_CLASS[kind]


def token_style(token: str) -> str:
    """The rich style a legend token is drawn in."""
    return CLASS_STYLES[token_class(token)]


def matrix_tokens(host: Host) -> list[list[str]]:
    """GPU x GPU legend tokens; a pair the snapshot lacks reads `?` instead of failing."""
    count = len(host.gpus)
    rows: list[list[str]] = []
    for a in range(count):
        row = []
        for b in range(count):
            try:
                row.append(host.link(a, b).token)
            except KeyError:
                row.append(UNKNOWN_TOKEN)
        rows.append(row)
    return rows


def gpu_nic_tokens(host: Host) -> list[list[str]]:
    """GPU x NIC legend tokens, one row per GPU and one column per NIC; missing entries read `?`."""
    nic_count = len(host.nics)
    rows = []
    for position in range(len(host.gpus)):
        recorded = list(host.gpu_nic[position]) if position < len(host.gpu_nic) else []
        rows.append((recorded + [UNKNOWN_TOKEN] * nic_count)[:nic_count])
    return rows
