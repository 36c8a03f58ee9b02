"""Turning values into plain rich Text: untrusted strings (hostnames, device names) are never markup."""

from __future__ import annotations

from rich.text import Text


def plain(value: object, style: str = "") -> Text:
    """`value` as Text with no markup parsing; None shows as a dash."""
    return Text("-" if value is None else str(value), style=style)


def gbps_label(gbps: float | None) -> str:
    """A bandwidth in GB/s with sensible precision, or a dash."""
    if gbps is None:
        return "-"
    return f"{gbps:.1f}" if gbps < 100 else f"{gbps:.0f}"
