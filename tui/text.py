"""Turning values into plain rich Text, and the app's one sanitiser for untrusted strings.

Host, GPU, NIC and version names, sources and notes come from files and snapshots and may carry
terminal escape sequences. Textual writes a Text's characters to the terminal as they are, so
every snapshot is made printable (:func:`printable_fields`) where it enters the app
(`LinkscopeApp.show_snapshot`), and :func:`plain` makes any other value printable; strings are
never parsed as markup.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, TypeVar

from rich.text import Text

from linkscope.topo.common.text import printable

T = TypeVar("T")


def same_text(shown: object, new: Text) -> bool:
    """Whether `new` would show as `shown` does: both Text, with the same characters, style and spans (rich's Text
    equality leaves out the style)."""
    return isinstance(shown, Text) and shown.plain == new.plain and shown.style == new.style and shown.spans == new.spans


def plain(value: object, style: str = "") -> Text:
    """`value` as printable Text with no markup parsing; None shows as a dash."""
    return Text("-" if value is None else printable(str(value)), style=style)


def printable_fields(value: T) -> T:
    """`value` (a frozen dataclass, tuple or string, nested) with every string made printable; the
    same object where nothing needed a change, so an ordinary snapshot is not copied."""
    return _printable(value)


_ATOMS = (int, float, bool, type(None))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(field.name for field in dataclasses.fields(cls) if field.init)
    return names


def _printable(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return value if value.isprintable() else printable(value)
    if kind in _ATOMS or isinstance(value, enum.Enum):
        return value
    if kind is tuple:
        items = tuple(_printable(item) for item in value)
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for name in _field_names(kind):
            old = getattr(value, name)
            new = _printable(old)
            if new is not old:
                changes[name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def gbps_label(gbps: float | None) -> str:
    """A bandwidth in GB/s with sensible precision, or a dash."""
    if gbps is None:
        return "-"
    return f"{gbps:.1f}" if gbps < 100 else f"{gbps:.0f}"


def not_this_machine(source: str | None) -> str:
    """What a snapshot that is not this machine now is, in words: a built-in sample or a saved snapshot."""
    if source is not None and source.startswith("sample:"):
        return f"{source} is a built-in sample, not this machine"
    return f"{source or 'this snapshot'} is a saved snapshot, not this machine now"
