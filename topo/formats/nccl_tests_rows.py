"""The rows of nccl-tests tables: which columns a header (or a header-less row) has, and each row read
and checked. A half-written last row and the pieces of a row that NCCL log lines cut apart are
dropped and said; anything else that does not read is an InputError naming `file:line`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.numbers import is_integer, non_negative_number, parse_float, parse_int
from linkscope.topo.common.units import format_gbps
from linkscope.topo.formats.lines import Line

NCCL_TYPES: dict[str, str] = {
    "float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
}


REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"})

NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
"""NCCL_DEBUG lines that can land between the rows of a table; they are skipped, not read."""
LABEL_NAMES = ("redop", "root")
GROUP_NAMES = ("time", "algbw", "busbw")


@dataclass(frozen=True)
class Columns:
    """The columns of a table: optional `redop` and `root`, then one or two (time, algbw, busbw, check) groups."""

    redop: bool
    root: bool
    groups: int
    check: str = "#wrong"
    """`#wrong` (a count) or, in 2019-2021 tables, `error` (the largest numeric error)."""

    @property
    def width(self) -> int:
        return 3 + self.redop + self.root + 4 * self.groups


def header_columns(text: str) -> Columns | None:
    """The columns a header line names, or None when `text` is no nccl-tests header."""
    words = text.lstrip("#").split()
    if words[:3] != ["size", "count", "type"]:
        return None
    rest = words[3:]
    labels = [word for word in rest[:2] if word in LABEL_NAMES]
    rest = rest[len(labels):]
    if labels not in ([], ["redop"], ["root"], ["redop", "root"]) or len(rest) not in (4, 8):
        return None
    checks = {rest[3], *rest[7:8]}
    if any(rest[i:i + 3] != list(GROUP_NAMES) for i in range(0, len(rest), 4)) or len(checks) != 1 \
            or not checks <= {"#wrong", "error"}:
        return None
    return Columns("redop" in labels, "root" in labels, len(rest) // 4, checks.pop())


def row_columns(words: list[str]) -> Columns | None:
    """The columns a header-less row has (a tail without its header), read from its shape."""
    if len(words) < 7 or words[2] not in NCCL_TYPES:
        return None
    labels = len(words) - 3
    groups = 2 if labels >= 8 else 1
    labels -= 4 * groups
    if labels == 2 and words[3] in REDOPS and is_integer(words[4]):
        columns = Columns(True, True, groups)
    elif labels == 1 and words[3] in REDOPS:
        columns = Columns(True, False, groups)
    elif labels == 1 and is_integer(words[3]):
        columns = Columns(False, True, groups)
    elif labels == 0:
        columns = Columns(False, False, groups)
    else:
        return None
    check = words[columns.width - 1]
    return columns if is_integer(check) or check == "N/A" else Columns(columns.redop, columns.root, groups, "error")




@dataclass
class Row:
    line: int
    size: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    groups: list[tuple[float, float, float, int | None]]
    error: float | None = None




def read_rows(candidates: list[Line], columns: Columns, name: str, notes: list[str]) -> tuple[list[Row], int]:
    """The complete rows among a table's candidate lines, and how many were 0-byte rows (skipped): a
    half-written last row and the pieces of a row that NCCL log lines cut apart are dropped (and said),
    anything else that does not read is an InputError."""
    rows: list[Row] = []
    zero_rows = 0
    broken = False
    last_key: dict[tuple[str, str | None, int | None], tuple[int, int]] = {}
    for position, line in enumerate(candidates):
        words = line.text.split()
        if NCCL_LOG.search(line.text) is not None or (broken and len(words) != columns.width):
            notes.append(f"line {line.number}: a row cut apart by NCCL log lines, dropped")
            broken = True
            continue
        broken = False
        if len(words) != columns.width or words[2] not in NCCL_TYPES:
            if position == len(candidates) - 1 and len(words) < columns.width:
                notes.append(f"line {line.number}: half-written last row dropped ({len(words)} of {columns.width} columns)")
                if not rows:
                    raise InputError(f"{name}:{line.number}: expected {columns.width} columns in an nccl-tests row, "
                                     f"found {len(words)} (the table's only row is half-written)")
                continue
            if len(words) != columns.width:
                raise InputError(f"{name}:{line.number}: expected {columns.width} columns in an nccl-tests row, "
                                 f"found {len(words)}")
            raise InputError(f"{name}:{line.number}: unknown data type {words[2]!r}")
        row = _row(words, columns, name, line.number)
        if row is None:
            zero_rows += 1
            continue
        key = (row.dtype, row.redop, row.root)
        earlier = last_key.get(key)
        if earlier is not None and row.size <= earlier[0]:
            raise InputError(f"{name}:{line.number}: size {row.size} after {earlier[0]} (line {earlier[1]}) in one table: "
                             "output of several processes interleaved without a rank prefix; cannot tell them apart")
        last_key[key] = (row.size, line.number)
        rows.append(row)
    return rows, zero_rows


def _row(words: list[str], columns: Columns, name: str, number: int) -> Row | None:
    """One complete row, checked; None for a 0-byte row."""
    where = f"{name}:{number}:"
    size = parse_int(words[0], f"{where} size", minimum=0)
    count = parse_int(words[1], f"{where} count", minimum=0)
    position = 3
    redop = root = None
    if columns.redop:
        redop = words[position]
        if redop not in REDOPS:
            raise InputError(f"{where} unknown reduction {redop!r} (expected one of {', '.join(sorted(REDOPS))})")
        position += 1
    if columns.root:
        root = parse_int(words[position], f"{where} root", minimum=-1)
        position += 1
    if size == 0:
        return None
    groups: list[tuple[float, float, float, int | None]] = []
    error: float | None = None
    for start in range(position, columns.width, 4):
        time_word, algbw_word, busbw_word, check_word = words[start:start + 4]
        time_us = non_negative_number(time_word, f"{where} time")
        algbw = non_negative_number(algbw_word, f"{where} algbw")
        busbw = non_negative_number(busbw_word, f"{where} busbw")
        _check_algbw(size, time_us, algbw, busbw, name, number)
        wrong: int | None = None
        if check_word != "N/A" and columns.check == "#wrong":
            wrong = parse_int(check_word, f"{where} #wrong", minimum=0)
        elif check_word != "N/A":
            value = parse_float(check_word, f"{where} error", minimum=0)
            error = value if error is None else max(error, value)
        groups.append((time_us, algbw, busbw, wrong))
    return Row(number, size, count, words[2], redop, root, groups, error)


def _check_algbw(size: int, time_us: float, algbw: float, busbw: float, name: str, number: int) -> None:
    """algbw must equal size/time within the rounding of the printed figures (catches shifted columns, and
    the all_gather/reduce_scatter tables of nccl-tests before mid-2020, whose algbw was scaled by (n-1)/n)."""
    if time_us <= 0:
        raise InputError(f"{name}:{number}: time {time_us} us is not positive")
    computed = size / (time_us * 1e3)
    tolerance = computed * (0.02 + 0.006 / time_us) + 0.011
    if abs(computed - algbw) <= tolerance:
        return
    why = "columns out of place?"
    if algbw == busbw and computed / 2 - tolerance <= algbw < computed:
        why = ("nccl-tests before mid-2020 printed all_gather and reduce_scatter algbw already scaled by (n-1)/n, "
               "so busbw cannot be checked; such tables are not read")
    raise InputError(f"{name}:{number}: algbw {algbw} does not match size/time = {format_gbps(computed, '.3g')} ({why})")


