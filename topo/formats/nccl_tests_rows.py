"""The rows of nccl-tests tables: which columns a header (or a header-less row) has, and each row read
and checked.

A header names its columns (`size count type redop root time algbw busbw #wrong ...`), and the reader
follows the names, so a table some columns were cut from (a poster's `size time algbw busbw`), the
per-test headers of 2017-2022 (`error` instead of `#wrong`, `redop` or `root` only where the test has
one), headers printed without `#` (`wrong`) and sizes written `1_073_741_824` all read. Rows are read
as far as they are whole: a half-written last row and the pieces of a row that NCCL log lines cut apart
are dropped and said; rows of a fork that prints only the out-of-place half are read as such when the
run went on after them. Each number keeps the precision it was printed with, so that checks between
printed numbers allow for their rounding. Anything else that does not read is an InputError naming
`file:line`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.numbers import is_decimal, is_integer, non_negative_number, parse_float, parse_int
from linkscope.topo.common.units import format_gbps
from linkscope.topo.formats.lines import Line

NCCL_TYPES: dict[str, str] = {
    "float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
}
UNKNOWN_TYPE = "unknown"
"""The data type of a row whose table has no `type` column."""

REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"})
EMPTY_REDOP = ""
"""What the redop of a row is when nccl-tests printed an empty name there (all_to_all before late 2022)."""

NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
"""NCCL_DEBUG lines that can land between the rows of a table; they are skipped, not read."""
LABEL_NAMES = ("count", "type", "redop", "root")
"""The columns between `size` and the first time, in the order nccl-tests prints them."""
GROUP_NAMES = ("time", "algbw", "busbw")
CHECK_NAMES = {"#wrong": "#wrong", "wrong": "#wrong", "error": "error"}
"""Names of the correctness column: a count of wrong elements, or (2017-2022) the largest numeric error."""
_HUMAN_SIZE = re.compile(r"[0-9]{1,4}(?:[_,][0-9]{3}){1,6}", re.ASCII)
"""A size written for people, `1_073_741_824` or `1,048,576` (and a poster's `1048_576`)."""


@frozen
class Columns:
    """The columns of a table: `size`, some of `count type redop root`, then one or two measured groups
    of (time, algbw, busbw) with or without a check column."""

    labels: tuple[str, ...] = LABEL_NAMES
    groups: int = 2
    check: str | None = "#wrong"
    """`#wrong` (a count), `error` (the largest numeric error, 2017-2022 tables) or None (no such column)."""

    @property
    def redop(self) -> bool:
        return "redop" in self.labels

    @property
    def root(self) -> bool:
        return "root" in self.labels

    @property
    def group_width(self) -> int:
        return 3 + (self.check is not None)

    @property
    def width(self) -> int:
        return 1 + len(self.labels) + self.groups * self.group_width

    @property
    def complete(self) -> bool:
        """Whether every column nccl-tests prints is there (a table nobody cut columns from)."""
        return self.labels[:2] == ("count", "type") and self.check is not None


def header_columns(text: str) -> Columns | None:
    """The columns a header line names, or None when `text` is no nccl-tests header."""
    words = text.lstrip("#").split()
    if not words or words[0] != "size":
        return None
    rest = words[1:]
    labels = []
    while rest and rest[0] in LABEL_NAMES:
        labels.append(rest.pop(0))
    if tuple(labels) != tuple(name for name in LABEL_NAMES if name in labels):
        return None
    check: str | None = None
    if len(rest) in (4, 8) and rest[3] in CHECK_NAMES:
        check = CHECK_NAMES[rest[3]]
    width = 3 + (check is not None)
    if len(rest) not in (width, 2 * width):
        return None
    for start in range(0, len(rest), width):
        group = rest[start:start + width]
        if group[:3] != list(GROUP_NAMES) or (check is not None and CHECK_NAMES.get(group[3]) != check):
            return None
    return Columns(tuple(labels), len(rest) // width, check)


def row_columns(words: list[str]) -> Columns | None:
    """The columns a header-less row has (a tail without its header), read from its shape."""
    if len(words) < 7 or words[2] not in NCCL_TYPES:
        return None
    labels = len(words) - 3
    groups = 2 if labels >= 8 else 1
    labels -= 4 * groups
    if labels == 2 and words[3] in REDOPS and is_integer(words[4]):
        columns = Columns(LABEL_NAMES, groups)
    elif labels == 1 and words[3] in REDOPS:
        columns = Columns(("count", "type", "redop"), groups)
    elif labels == 1 and is_integer(words[3]):
        columns = Columns(("count", "type", "root"), groups)
    elif labels == 0:
        columns = Columns(("count", "type"), groups)
    else:
        return None
    check = words[columns.width - 1]
    if is_integer(check) or check == "N/A":
        return columns
    return Columns(columns.labels, groups, "error")


def is_size(word: str) -> bool:
    """Whether `word` can be the size column of a row (digits, or digits grouped for people)."""
    return is_integer(word) or _HUMAN_SIZE.fullmatch(word) is not None


@frozen
class Measured:
    """One measured group of a row (out-of-place or in-place) and the rounding of its printed numbers."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    checked: bool
    """False where the check column printed N/A (nccl-tests did not check this half)."""
    time_error: float
    algbw_error: float
    busbw_error: float
    """Half a unit of the last printed digit of each number: the most its rounding can have moved it."""


@dataclass
class Row:
    line: int
    size: int
    count: int | None
    dtype: str
    redop: str | None
    """None when the table has no redop column; EMPTY_REDOP where the column printed nothing."""
    root: int | None
    groups: list[Measured]
    error: float | None = None


def printed_error(word: str) -> float:
    """Half a unit of the last digit `word` was printed with (`0.05` -> 0.005, `127997` -> 0.5, `1.0e+03` -> 50):
    how far rounding can have moved the number it stands for."""
    mantissa, _, exponent = word.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = 10.0 ** int(exponent) if exponent and is_integer(exponent) else 1.0
    return 0.5 * 10.0 ** -decimals * scale


@dataclass
class RowsRead:
    """The complete rows of a table, the 0-byte rows skipped, and the rows read as out-of-place only."""

    rows: list[Row]
    zero_rows: int
    one_group: bool = False


def read_rows(candidates: list[Line], columns: Columns, name: str, notes: list[str], ended: bool) -> RowsRead:
    """The complete rows among a table's candidate lines. `ended` says the table ended at the end of the
    text (so its last line may be cut short); a half-written last row and the pieces of a row that NCCL log
    lines cut apart are dropped (and said), anything else that does not read is an InputError."""
    one_group = _one_group_table(candidates, columns, ended)
    if one_group:
        columns = Columns(columns.labels, 1, columns.check)
        notes.append(f"line {candidates[0].number}: the rows hold only the out-of-place half (a build of nccl-tests "
                     "that prints no in-place figures); read as such")
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
        words = _with_empty_redop(words, columns)
        if len(words) != columns.width or ("type" in columns.labels and words[columns.labels.index("type") + 1]
                                           not in NCCL_TYPES):
            last = position == len(candidates) - 1
            if last and len(words) < columns.width:
                notes.append(f"line {line.number}: half-written last row dropped ({len(words)} of {columns.width} columns)")
                if not rows:
                    raise InputError(f"{name}:{line.number}: expected {columns.width} columns in an nccl-tests row, "
                                     f"found {len(words)} (the table's only row is half-written)")
                continue
            if len(words) != columns.width:
                raise InputError(f"{name}:{line.number}: expected {columns.width} columns in an nccl-tests row, "
                                 f"found {len(words)}")
            raise InputError(f"{name}:{line.number}: unknown data type {words[columns.labels.index('type') + 1]!r}")
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
    return RowsRead(rows, zero_rows, one_group)


def _one_group_table(candidates: list[Line], columns: Columns, ended: bool) -> bool:
    """Whether every row of a two-group table holds exactly one group, and the run went on after them (a row
    one group short at the very end of the text is a row cut short, not a build that prints one half)."""
    if columns.groups != 2 or not candidates:
        return False
    short = columns.width - columns.group_width
    widths = {len(_with_empty_redop(line.text.split(), Columns(columns.labels, 1, columns.check))) for line in candidates
              if NCCL_LOG.search(line.text) is None}
    return widths == {short} and (not ended or len(candidates) > 1)


def _with_empty_redop(words: list[str], columns: Columns) -> list[str]:
    """A row whose redop nccl-tests printed as an empty name (all_to_all until late 2022) has one word fewer
    than its header: put the empty redop back where the next word is not a reduction."""
    if not columns.redop or len(words) != columns.width - 1:
        return words
    position = 1 + columns.labels.index("redop")
    if position < len(words) and words[position] not in REDOPS:
        return [*words[:position], EMPTY_REDOP, *words[position:]]
    return words


def _size(word: str, where: str) -> int:
    if _HUMAN_SIZE.fullmatch(word):
        return int(word.replace("_", "").replace(",", ""))
    return parse_int(word, f"{where} size", minimum=0)


def _row(words: list[str], columns: Columns, name: str, number: int) -> Row | None:
    """One complete row, checked; None for a 0-byte row."""
    where = f"{name}:{number}:"
    size = _size(words[0], where)
    values = dict(zip(columns.labels, words[1:1 + len(columns.labels)], strict=True))
    count = parse_int(values["count"], f"{where} count", minimum=0) if "count" in values else None
    redop = values.get("redop")
    if redop is not None and redop != EMPTY_REDOP and redop not in REDOPS:
        raise InputError(f"{where} unknown reduction {redop!r} (expected one of {', '.join(sorted(REDOPS))})")
    root = parse_int(values["root"], f"{where} root", minimum=-1) if "root" in values else None
    if size == 0:
        return None
    groups: list[Measured] = []
    error: float | None = None
    position = 1 + len(columns.labels)
    for start in range(position, columns.width, columns.group_width):
        time_word, algbw_word, busbw_word = words[start:start + 3]
        check_word = words[start + 3] if columns.check is not None else "N/A"
        time_us = non_negative_number(time_word, f"{where} time")
        algbw = non_negative_number(algbw_word, f"{where} algbw")
        busbw = non_negative_number(busbw_word, f"{where} busbw")
        measured = Measured(time_us, algbw, busbw, None, check_word != "N/A", printed_error(time_word),
                            printed_error(algbw_word), printed_error(busbw_word))
        check_algbw(size, measured, name, number)
        wrong: int | None = None
        if check_word != "N/A" and columns.check == "#wrong":
            wrong = _wrong_count(check_word, f"{where} #wrong")
        elif check_word != "N/A":
            value = parse_float(check_word, f"{where} error", minimum=0)
            error = value if error is None else max(error, value)
        groups.append(Measured(time_us, algbw, busbw, wrong, measured.checked, measured.time_error,
                               measured.algbw_error, measured.busbw_error))
    dtype = values.get("type", UNKNOWN_TYPE)
    return Row(number, size, count, dtype, redop, root, groups, error)


def _wrong_count(word: str, where: str) -> int:
    """nccl-tests prints the wrong-element count with `%g`: large counts come as `1.23457e+06`."""
    if is_integer(word) or not is_decimal(word):
        return parse_int(word, where, minimum=0)
    return int(parse_float(word, where, minimum=0))


def check_algbw(size: int, measured: Measured, name: str, number: int) -> None:
    """algbw must equal size/time within the rounding of the printed figures (catches shifted columns, and
    the all_gather/reduce_scatter tables of nccl-tests before mid-2020, whose algbw was scaled by (n-1)/n)."""
    time_us, algbw, busbw = measured.time_us, measured.algbw, measured.busbw
    if time_us <= 0:
        raise InputError(f"{name}:{number}: time {time_us} us is not positive")
    computed = size / (time_us * 1e3)
    tolerance = computed * (0.02 + measured.time_error / time_us) + measured.algbw_error + 0.006
    if abs(computed - algbw) <= tolerance:
        return
    why = "columns out of place?"
    if algbw == busbw and computed / 2 - tolerance <= algbw < computed:
        why = ("nccl-tests before mid-2020 printed all_gather and reduce_scatter algbw already scaled by (n-1)/n, "
               "so busbw cannot be checked; such tables are not read")
    raise InputError(f"{name}:{number}: algbw {algbw} does not match size/time = {format_gbps(computed, '.3g')} ({why})")
