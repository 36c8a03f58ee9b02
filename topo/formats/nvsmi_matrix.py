"""Lexing of one `nvidia-smi topo` matrix block: header columns, labelled rows, fused tokens.

nvidia-smi pads its matrices with tabs or spaces, and copies of its output lose separators
(`SYSSYS`, `NIC7NIC8`). This module turns the lines of one block into labelled rows of tokens,
splits fused fields back where the split is unambiguous, and reports everything else as an
:class:`InputError` naming the file and line. It knows nothing of GPUs vs NICs or of the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property, lru_cache

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen

NOT_AVAILABLE = "N/A"


@frozen
class Vocabulary:
    """The tokens one kind of matrix may contain, and regexes that split fused runs of them.

    Both vocabularies are prefix codes (no token starts another, apart from the digits of
    `NV<n>`), so a fused run such as `SYSSYS` or `NV18NV18` has exactly one split.
    """

    kind: str
    """What a token is called in messages, e.g. `link token`."""
    kinds: str
    """The plural, e.g. `link tokens`."""
    expected: str
    """The accepted tokens, for messages."""
    token: re.Pattern[str]
    run: re.Pattern[str]
    """One or more fused tokens at the start of a field."""


def _vocabulary(kind: str, kinds: str, expected: str, alternatives: str) -> Vocabulary:
    return Vocabulary(kind, kinds, expected, re.compile(alternatives), re.compile(f"(?:{alternatives})+"))


LINK_TOKENS = _vocabulary(
    "link token", "link tokens", "X, NV<n>, PIX, PXB, PHB, NODE, SYS (or the old SOC)", r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC"
)
"""Tokens of `nvidia-smi topo -m` (and `-mp`)."""
P2P_TOKENS = _vocabulary("P2P status", "P2P statuses", "X, OK, CNS, GNS, TNS, NS, DR, U", r"X|OK|CNS|GNS|TNS|NS|DR|U")
"""Tokens of `nvidia-smi topo -p2p <r|w|n|a|p>`."""

_VALUE = re.compile(r"N/A|\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
"""Shape of every value column: a cpulist, a NUMA node list, a node id, or N/A."""
_GPU_OR_NIC = re.compile(r"(?:GPU|NIC)\d+")
_DEVICE_LABEL = re.compile(r"(GPU\d+|NIC\d+)(.*)")
_OTHER_DEVICE = r"[A-Za-z](?:(?!GPU\d|NIC\d|CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA\s+ID)[\w.:\-])*"
_HEADER_ITEM = re.compile(
    rf"[ \t]*(?:(?P<value>CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA\s+ID)|(?P<device>GPU\d+|NIC\d+|{_OTHER_DEVICE}))"
)


@frozen
class Header:
    """The column header line of a matrix."""

    line: int
    """1-based line number."""
    devices: tuple[str, ...]
    """Device column labels in printed order (`GPU0`, `NIC3`, `mlx5_0`)."""
    value_columns: tuple[str, ...]
    """Affinity columns after the devices, names with single spaces."""


@frozen
class Row:
    """One matrix row: its label and its tokens in the header's device order."""

    label: str
    line: int
    tokens: tuple[str, ...]
    values: tuple[str, ...]
    """Affinity values as printed (may be fewer than the value columns: NIC rows print none)."""


@frozen
class Block:
    """A header and the rows under it, one row per device column."""

    header: Header
    rows: tuple[Row, ...]
    """In the printed order."""
    end: int
    """0-based index of the first line after the block."""
    missing: tuple[str, ...] = ()
    """NIC columns whose rows are not in the text (a paste cut short after the GPU rows): their cells with the
    GPUs come from the GPU rows; only NIC-to-NIC cells are lost."""
    cut_line: int | None = None
    """The line where the rows stop short (a NIC row cut part-way, or the last row before the missing ones)."""

    def row(self, label: str) -> Row:
        """The row with this label."""
        return self._rows_by_label[label]

    @cached_property
    def _rows_by_label(self) -> dict[str, Row]:
        return {row.label: row for row in self.rows}


def parse_header(line: str, line_number: int) -> Header | None:
    """The header that `line` is, or None when it is not a matrix header (it must start with a GPU column)."""
    devices: list[str] = []
    values: list[str] = []
    position = 0
    end = len(line.rstrip())
    while position < end:
        match = _HEADER_ITEM.match(line, position)
        if match is None:
            return None
        position = match.end()
        value = match.group("value")
        if value is not None:
            values.append(" ".join(value.split()))
            continue
        device = match.group("device")
        if values or _is_token(device) or not any(ch.isdigit() for ch in device):
            return None
        devices.append(device)
    if not devices or not devices[0].startswith("GPU") or not devices[0][3:].isdigit():
        return None
    return Header(line_number, tuple(devices), tuple(values))


def _is_token(text: str) -> bool:
    return LINK_TOKENS.run.fullmatch(text) is not None or P2P_TOKENS.run.fullmatch(text) is not None


def read_block(lines: Sequence[str], header: Header, vocabulary: Vocabulary, name: str) -> Block:
    """Read the rows under `header` (which sits at `lines[header.line - 1]`) into a checked square block."""
    where = f"{name}: line"
    _check_duplicates(header.value_columns, f"{where} {header.line}: duplicate column")
    raw_rows: list[tuple[int, str, list[str]]] = []
    index = header.line
    while index < len(lines):
        fields = lines[index].split()
        label = _row_label(fields[0], header.devices, vocabulary) if fields else None
        if label is None:
            break
        rest = fields[0][len(label) :]
        raw_rows.append((index + 1, label, ([rest] if rest else []) + fields[1:]))
        index += 1
    if not raw_rows:
        raise InputError(f"{where} {header.line}: matrix header is not followed by any row")
    labels = [label for _, label, _ in raw_rows]
    devices = _resolve_fused_columns(header, labels, name, allow_rowless=_only_nics_after(header.devices, labels))
    _check_duplicates(devices, f"{where} {header.line}: duplicate column")
    header = Header(header.line, devices, header.value_columns)
    seen: dict[str, int] = {}
    rows: list[Row] = []
    cut_line: int | None = None
    for line_number, label, fields in raw_rows:
        if label in seen:
            raise InputError(f"{where} {line_number}: second row {label} (first at line {seen[label]})")
        if label not in devices:
            raise InputError(f"{where} {line_number}: row {label} has no column in the header (line {header.line})")
        try:
            tokens, values = split_row(fields, devices, vocabulary)
        except ValueError as exc:
            last_line = not any(line.strip() for line in lines[line_number:])
            gpus_read = all(device in seen for device in devices if device.startswith("GPU"))
            if last_line and not label.startswith("GPU") and gpus_read:
                cut_line = line_number  # a NIC row the paste cut part-way: as if it were missing
                break
            cut = " - the text ends in this row: it looks cut short" if last_line else ""
            raise InputError(f"{where} {line_number}: row {label} {exc}{cut}") from None
        seen[label] = line_number
        if len(values) > len(header.value_columns):
            raise InputError(
                f"{where} {line_number}: row {label} has {len(values)} values after the {vocabulary.kinds} "
                f"for {len(header.value_columns)} columns ({', '.join(header.value_columns) or 'none'})"
            )
        rows.append(Row(label, line_number, tuple(tokens), tuple(values)))
    missing = [label for label in devices if label not in seen]
    if any(label.startswith("GPU") for label in missing):
        last = raw_rows[-1][0]
        raise InputError(
            f"{where} {last}: matrix is truncated: {len(rows)} rows for {len(devices)} columns, no row for {', '.join(missing)}"
        )
    if missing and cut_line is None:
        cut_line = raw_rows[-1][0]
    block = Block(header, tuple(rows), index, tuple(missing), cut_line if missing else None)
    check_square(block, vocabulary, name)
    return block


def _only_nics_after(devices: Sequence[str], labels: Sequence[str]) -> bool:
    """Whether the rows cover every GPU column (the rows missing, if any, are NICs': a paste cut after the GPU rows)."""
    gpus = [device for device in devices if _DEVICE_LABEL.fullmatch(device) and device.startswith("GPU")]
    return bool(gpus) and all(gpu in labels for gpu in gpus)


def _check_duplicates(labels: Sequence[str], prefix: str) -> None:
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise InputError(f"{prefix} {label}")
        seen.add(label)


def _row_label(field: str, devices: Sequence[str], vocabulary: Vocabulary) -> str | None:
    """The device label a row starts with, or None when the line is not a row.

    The label may be fused with the row's first token (`NIC10SYS`), or be one piece of a fused
    header name (`mlx5_0` under `mlx5_0mlx5_1`); anything else after a label ends the matrix.
    """
    match = _DEVICE_LABEL.fullmatch(field)
    if match:
        label, rest = match.group(1), match.group(2)
    elif field in devices:
        return field
    else:
        prefixes = [device for device in devices if field.startswith(device)]
        if prefixes:
            label = max(prefixes, key=len)
            rest = field[len(label) :]
        elif any(field in device for device in devices) and not _is_token(field):
            return field
        else:
            return None
    return label if not rest or vocabulary.run.fullmatch(rest) else None


def _resolve_fused_columns(header: Header, labels: Sequence[str], name: str, allow_rowless: bool = False) -> tuple[str, ...]:
    """Split header names that are fused row labels (`mlx5_0mlx5_1`) when the split is unique. With
    `allow_rowless` (every GPU has its row, some NIC rows are missing) a name no row matches is a NIC whose
    row was cut off, kept as it is."""
    known = set(labels)
    devices: list[str] = []
    for device in header.devices:
        if device in known or _GPU_OR_NIC.fullmatch(device):
            devices.append(device)
            continue
        splits = _splits(device, known)
        if not splits and allow_rowless:
            devices.append(device)
            continue
        if len(splits) != 1:
            problem = "matches no row label" if not splits else "can be split into row labels in more than one way"
            raise InputError(f"{name}: line {header.line}: column {device!r} {problem}")
        devices.extend(splits[0])
    return tuple(devices)


def _splits(text: str, labels: set[str]) -> list[list[str]]:
    """Every way to write `text` as a concatenation of `labels` (at most two are needed).

    Dynamic programming from the end of `text`, so a run of thousands of fused labels needs no recursion:
    `ways[i]` holds up to two (label, next position) choices that spell `text[i:]` completely.
    """
    end = len(text)
    ways: list[list[tuple[str, int]]] = [[] for _ in range(end + 1)]
    counts = [0] * (end + 1)
    counts[end] = 1
    for start in range(end - 1, -1, -1):
        for label in labels:
            after = start + len(label)
            if after <= end and counts[after] and text.startswith(label, start):
                ways[start].append((label, after))
                counts[start] = min(2, counts[start] + counts[after])
                if counts[start] > 1:
                    break
    if counts[0] == 0:
        return []
    found: list[list[str]] = []
    for first, after in ways[0][:2]:
        split = [first]
        position = after
        while position < end:
            label, position = ways[position][0]
            split.append(label)
        found.append(split)
    if counts[0] > 1 and len(found) < 2:
        found.append([])  # a second split further along: only the count matters to the caller
    return found


def split_row(fields: Sequence[str], columns: Sequence[str], vocabulary: Vocabulary) -> tuple[list[str], list[str]]:
    """Split the fields after a row label into one token per column and the trailing values.

    Fused runs (`SYSSYS`, `NODEPIX`, a token fused with the first value like `SYS0-23`) are split
    when the split is unique and the row length comes out right; otherwise ValueError says why.
    """
    count = len(columns)
    tokens: list[str] = []
    values: list[str] = []
    position = 0
    while position < len(fields) and len(tokens) < count:
        field = fields[position]
        position += 1
        split = _split_field(field, vocabulary)
        if split is None:
            if _VALUE.fullmatch(field):
                raise ValueError(f"has {len(tokens)} {vocabulary.kinds} for {count} columns before the value {field!r}")
            raise _unknown(vocabulary, field, columns[len(tokens)])
        pieces, rest = split
        if len(tokens) + len(pieces) > count:
            raise ValueError(f"has more {vocabulary.kinds} than the {count} columns (field {field!r} overruns the row)")
        if rest and len(tokens) + len(pieces) < count:
            raise _unknown(vocabulary, field, columns[len(tokens)])
        if rest:
            *fused_tokens, value = _split_fused_value(pieces, rest, field, vocabulary)
            pieces = tuple(fused_tokens)
            values.append(value)
        tokens.extend(pieces)
    if len(tokens) < count:
        raise ValueError(f"has {len(tokens)} {vocabulary.kinds} for {count} columns")
    values.extend(fields[position:])
    for value in values:
        if not _VALUE.fullmatch(value):
            if vocabulary.run.fullmatch(value):
                raise ValueError(f"has more {vocabulary.kinds} than the {count} columns")
            raise ValueError(f"has unreadable value {value!r} (expected a CPU/NUMA list, a number or N/A)")
    return tokens, values


@lru_cache(maxsize=4096)
def _split_field(field: str, vocabulary: Vocabulary) -> tuple[tuple[str, ...], str] | None:
    """The tokens a field starts with and the rest, or None when it starts with no token (cached: fields repeat)."""
    run = vocabulary.run.match(field)
    if run is None:
        return None
    return tuple(vocabulary.token.findall(run.group(0))), field[run.end() :]


def _unknown(vocabulary: Vocabulary, field: str, column: str | None = None) -> ValueError:
    where = f" in column {column}" if column else ""
    return ValueError(f"has unknown {vocabulary.kind} {field!r}{where} (expected {vocabulary.expected})")


def _split_fused_value(pieces: Sequence[str], rest: str, field: str, vocabulary: Vocabulary) -> list[str]:
    """Tokens of `field` followed by the value fused to them (returned as the last item)."""
    last = pieces[-1]
    if not (last.startswith("NV") and last[2:].isdigit()):
        if not _VALUE.fullmatch(rest):
            raise _unknown(vocabulary, field)
        return [*pieces, rest]
    digits = last[2:]
    candidates = [
        (f"NV{digits[:cut]}", digits[cut:] + rest)
        for cut in range(1, len(digits) + 1)
        if not digits.startswith("0") and _VALUE.fullmatch(digits[cut:] + rest)
    ]
    if len(candidates) != 1:
        if not candidates:
            raise _unknown(vocabulary, field)
        readings = " or ".join(f"{token} + {value}" for token, value in candidates)
        raise ValueError(f"has fused field {field!r} that reads as {readings}; add the missing separator")
    token, value = candidates[0]
    return [*pieces[:-1], token, value]


def normalized(token: str) -> str:
    """The modern spelling of a token: older drivers printed `SOC` where newer ones print `SYS`."""
    return "SYS" if token == "SOC" else token


def check_square(block: Block, vocabulary: Vocabulary, name: str) -> None:
    """Raise InputError unless the diagonal is `X`, nothing else is, and the matrix is symmetric."""
    columns = block.header.devices
    position = {label: index for index, label in enumerate(columns)}
    rows = {row.label: row for row in block.rows}
    for i, a in enumerate(columns):
        row_a = rows.get(a)
        if row_a is None:
            continue  # a NIC row the paste lost: its cells are checked from the other rows' side only
        for j in range(i, len(columns)):
            b = columns[j]
            ab = row_a.tokens[j]
            if b not in rows:
                if ab == "X":
                    raise InputError(f"{name}: line {row_a.line}: X (self) between different devices {a} and {b}")
                continue
            if i == j:
                if ab != "X":
                    raise InputError(f"{name}: line {row_a.line}: {a} against itself is {ab!r}, expected X")
                continue
            row_b = rows[b]
            ba = row_b.tokens[position[a]]
            if "X" in (ab, ba):
                line = row_a.line if ab == "X" else row_b.line
                raise InputError(f"{name}: line {line}: X (self) between different devices {a} and {b}")
            if normalized(ab) != normalized(ba):
                raise InputError(
                    f"{name}: line {row_b.line}: {vocabulary.kinds} are not symmetric: "
                    f"{a}->{b} is {ab} (line {row_a.line}) but {b}->{a} is {ba}"
                )
