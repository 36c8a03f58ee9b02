"""Untrusted XML into a small tree, safely: NCCL's topology and graph files come from other machines and issue threads.

The parser is `defusedxml`'s (a well-kept library made for exactly this): no DTD, so no entity expansion (billion
laughs) and no external entities. On top of it the caps of :mod:`topo.common.limits` bound the file's size, the
nesting depth, the number of elements and the length of an attribute, each checked while the file is read, before
anything of that size is built. Every refusal is one :class:`InputError` line naming the file and line.
"""

from __future__ import annotations

import re
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_NCCL_XML_BYTES, MAX_XML_ATTRIBUTE_CHARS, MAX_XML_DEPTH, MAX_XML_ELEMENTS


@frozen
class XmlElement:
    """One element: its tag, attributes in file order, children, and the line it starts on."""

    tag: str
    attrs: tuple[tuple[str, str], ...]
    children: tuple[XmlElement, ...]
    line: int

    def get(self, key: str) -> str | None:
        """The attribute `key`, or None when the element has none."""
        for name, value in self.attrs:
            if name == key:
                return value
        return None


class _Refused(Exception):
    """A cap was passed while reading; carries the one-line reason."""


class _Builder:
    """The parser's target: builds :class:`XmlElement`s and enforces the caps as elements open."""

    def __init__(self) -> None:
        self.parser: Any = None
        self.stack: list[tuple[str, tuple[tuple[str, str], ...], int, list[XmlElement]]] = []
        self.root: XmlElement | None = None
        self.count = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        line = self.parser.parser.CurrentLineNumber if self.parser is not None else 0
        self.count += 1
        if self.count > MAX_XML_ELEMENTS:
            raise _Refused(f"line {line}: more than {MAX_XML_ELEMENTS} elements")
        if len(self.stack) >= MAX_XML_DEPTH:
            raise _Refused(f"line {line}: elements nested more than {MAX_XML_DEPTH} deep")
        for key, value in attrs.items():
            if len(value) > MAX_XML_ATTRIBUTE_CHARS:
                raise _Refused(f"line {line}: attribute {key[:40]!r} is longer than {MAX_XML_ATTRIBUTE_CHARS} characters")
        self.stack.append((tag, tuple(attrs.items()), line, []))

    def end(self, tag: str) -> None:
        name, attrs, line, children = self.stack.pop()
        element = XmlElement(name, attrs, tuple(children), line)
        if self.stack:
            self.stack[-1][3].append(element)
        else:
            self.root = element

    def data(self, data: str) -> None:
        """Text between elements: NCCL's files hold none that matters."""

    def close(self) -> XmlElement | None:
        return self.root


def parse_xml(text: str, name: str) -> XmlElement:
    """The root element of `text`; raise InputError (one line naming `name` and the line) when it is not
    well-formed XML, declares a DTD or entities, or passes a cap."""
    if len(text) > MAX_NCCL_XML_BYTES:
        raise InputError(f"{name}: XML input is larger than the {MAX_NCCL_XML_BYTES // (1024 * 1024)} MiB limit")
    builder = _Builder()
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    builder.parser = parser
    try:
        parser.feed(_without_comments(text.lstrip("\ufeff")))
        parser.close()
    except _Refused as exc:
        raise InputError(f"{name}: {exc}") from None
    except DefusedXmlException as exc:
        raise InputError(f"{name}: XML refused: {_defused_reason(exc)}") from None
    except ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else 0
        reason = str(exc).split(":")[0]
        raise InputError(f"{name}: line {line}: not well-formed XML ({reason})") from None
    except RecursionError:
        raise InputError(f"{name}: elements nested too deep") from None
    if builder.root is None:
        raise InputError(f"{name}: no XML element")
    return builder.root


def _without_comments(text: str) -> str:
    """Comments dropped the way NCCL's own reader drops them (from `<!--` to the first `-->`, so `--` inside one is
    fine, as hand-written vendor files assume); their newlines stay, so line numbers stay right. One pass: an
    unterminated comment is left for the parser to refuse."""
    pieces: list[str] = []
    position = 0
    while (start := text.find("<!--", position)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break
        pieces.append(text[position:start])
        pieces.append("\n" * text.count("\n", start, end))
        position = end + 3
    pieces.append(text[position:])
    return "".join(pieces)


def _defused_reason(exc: DefusedXmlException) -> str:
    kind = type(exc).__name__
    if kind == "DTDForbidden":
        return "a DOCTYPE declaration (DTDs, and with them entities, are not accepted)"
    if kind == "EntitiesForbidden":
        return "an entity declaration (entity expansion is not accepted)"
    if kind == "ExternalReferenceForbidden":
        return "a reference to an external resource"
    return kind


def looks_like_xml_of(text: str, tag: str) -> bool:
    """True when `text` is XML holding a `<tag` element near its start (comments and a declaration may come first)."""
    head = text[:65536]
    return head.lstrip().startswith("<") and f"<{tag}" in head


def parse_nccl_root(text: str, name: str, tag: str, version: int, what: str) -> XmlElement:
    """The root of one of NCCL's XML files: a `<tag version="...">` NCCL would load (it refuses other versions)."""
    root = parse_xml(text, name)
    if root.tag != tag:
        raise InputError(f"{name}: line {root.line}: <{root.tag}> is not NCCL's {what} (<{tag}>) element")
    stated = (root.get("version") or "").strip()
    if not re.fullmatch(r"\d{1,6}", stated) or int(stated) != version:
        raise InputError(f"{name}: line {root.line}: <{tag} version={root.get('version')!r}>: NCCL reads version "
                         f"{version} only")
    return root


_HEX = re.compile(r"[+-]?0[xX][0-9a-fA-F]{1,16}")
_DECIMAL = re.compile(r"[+-]?\d{1,18}(?:\.\d{0,12})?")


def attr_number(text: str | None) -> float | None:
    """A numeric attribute as NCCL writes them (`12`, `0x1`, `12.000000`); None when absent or unreadable."""
    word = (text or "").strip()
    if _HEX.fullmatch(word):
        return float(int(word, 16))
    return float(word) if _DECIMAL.fullmatch(word) else None


def attr_int(text: str | None) -> int | None:
    """An integer attribute (NCCL's strtol(..., 0) for `0x1`); a fraction is cut; None when absent or unreadable."""
    value = attr_number(text)
    return None if value is None else int(value)
