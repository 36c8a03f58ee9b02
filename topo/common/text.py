"""Terminal escape sequences and control characters: removed from what we read, made visible in what we print.

Untrusted strings (host, GPU, NIC and version names from a file or snapshot, file names in error
lines) can carry ANSI/OSC sequences that clear the screen, set the window title, write the
clipboard (OSC 52) or plant hyperlinks. Every text renderer passes them through :func:`printable`;
every reader of pasted text removes escape sequences with :func:`strip_escapes`. The patterns are
linear: each is anchored on ESC (or a C1 introducer) and consumes one bounded class.
"""

from __future__ import annotations

import re
import sys
import unicodedata

_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor moves, erase)
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # two- and three-byte escapes (charset selection, keypad modes)
)
"""One escape sequence, terminated or cut short (a sequence cut short runs to the end of the text)."""

_COMPLETE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x90\x98\x9c-\x9f]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
"""One escape sequence with its final byte or terminator (what printing removes; the start of one cut
short is shown as `\\x1b...`, so it cannot swallow the rest of an error line)."""

_C1_INTRODUCER = re.compile(r"[\x90\x98\x9b\x9d\x9e\x9f]")

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Bidirectional formatting characters: an RTL override makes `gpu7.evil` display as something else, and the
rest of the line with it ("Trojan Source", CVE-2021-42574)."""

_INVISIBLE = "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2028\u2029\u2060-\u2064\u3164\ufeff\uffa0"
"""Characters that print as nothing (zero-width space and joiners, word joiner, byte-order mark, soft hyphen,
Hangul fillers, Mongolian vowel separator) or break a line (U+2028/9): `node01` and `node01<U+200B>` would
print alike."""

UNPRINTABLE_IN_BLOCK = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}{_INVISIBLE}]")
"""What :func:`printable_block` shows escaped: C0 controls but tab and newline, DEL, C1 controls, the
bidirectional formatting characters and the invisible ones."""

_CONTROL_OR_TAB = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}{_INVISIBLE}]")
_IGNORED_IN_NAMES = re.compile(f"[{_BIDI}{_INVISIBLE}]")


def strip_escapes(text: str) -> str:
    """`text` without terminal escape sequences (what a terminal capture of colourful output holds)."""
    if "\x1b" not in text and (text.isascii() or not _C1_INTRODUCER.search(text)):
        return text
    return _ESCAPE_SEQUENCE.sub("", text)


def printable(text: str) -> str:
    """`text` safe to print on a terminal as one line: escape sequences removed, other control
    characters (newlines and tabs too) shown as `\\xNN`, so nothing in it acts on the terminal."""
    cleaned = _without_complete_sequences(text)
    if not _CONTROL_OR_TAB.search(cleaned):
        return cleaned
    return _CONTROL_OR_TAB.sub(_shown, cleaned)


def printable_block(text: str) -> str:
    """Like :func:`printable` for multi-line text: newlines kept, tabs kept, every other control shown."""
    if _plain_ascii(text):
        return text  # nothing in it to remove or show (a large JSON report, at a fraction of the pattern's cost)
    return _shown_block(text)


def _shown_block(text: str) -> str:
    """:func:`printable_block`, line by line."""
    return "\n".join(UNPRINTABLE_IN_BLOCK.sub(_shown, _without_complete_sequences(line))
                     for line in text.split("\n"))


_ASCII_UNPRINTABLE_IN_BLOCK = "".join(map(chr, [*range(0x09), *range(0x0b, 0x20), 0x7f]))
"""The ASCII characters :data:`UNPRINTABLE_IN_BLOCK` shows (escape among them)."""


def _plain_ascii(text: str) -> bool:
    """Whether `text` is ASCII without any character :func:`printable_block` would show or remove (each looked for
    on its own: a scan of memory per character, far cheaper than the pattern's step per character)."""
    return text.isascii() and not any(character in text for character in _ASCII_UNPRINTABLE_IN_BLOCK)


def comparable(name: str) -> str:
    """`name` as duplicates are compared (host, NIC, GPU names): invisible and bidirectional formatting
    characters dropped, then NFKC (full-width `ｎｏｄｅ０１` is `node01`) and case folded, so two names that
    print alike, or that DNS treats as one, are one."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFKC", _IGNORED_IN_NAMES.sub("", name)).casefold()


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _without_complete_sequences(text: str) -> str:
    if "\x1b" not in text and (text.isascii() or not _C1_INTRODUCER.search(text)):
        return text
    return _COMPLETE_SEQUENCE.sub("", text)



def say(text: str, stderr: bool = False, end: str = "\n", block: bool = False) -> None:
    """Write `text` on stdout (or stderr) the one safe way: made :func:`printable` (one line: a newline in a
    file name is shown, not obeyed), or with `block` :func:`printable_block` (several lines, JSON). Every
    line a command, probe or worker writes for a terminal goes through here or through the rich console
    (`linkscope.render.console`), never through `print`; a test holds the code to it."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write((printable_block(text) if block else printable(text)) + end)
    if stderr:
        stream.flush()
