"""Reader of nccl-tests output (`all_reduce_perf` and friends) into :class:`topo.model.measurements.Measurements`.

Reads logs as people paste them: through the line-cleaning front end (launcher and logging
prefixes, escapes, quotes), with or without the `# nThread ...` / `# Using devices` preamble,
several runs in one file, the table formats of 2017 to now (per-test headers, an `error` column of
floats instead of `#wrong`, headers printed without `#`, columns a poster cut), NCCL log lines between
rows, a table inside a full NCCL_DEBUG log, a tail without its header, rows elided with `...`, and a
half-written last row (dropped, and said). When prefixes name ranks, each rank's tables stay apart.
Each table takes its op from wherever the paste states it (:mod:`topo.formats.nccl_tests_context`:
command lines, wrapper scripts, `-t`, nccl-tests' own `# Collective test` lines), `--op`, or its
columns (:mod:`topo.formats.nccl_tests_infer`), and says which (`op_source`).

Checks between printed numbers allow for the rounding of each: busbw is algbw x the op's factor
within half a unit of each printed figure (times the factor). A row that fails it is a note, not a
refusal; when most rows fail with the rank count the rank lines give and the table's own ratio gives
another, the ratio wins (nccl-tests computed busbw with it) and the note says so. Only what cannot be
read at all is refused, naming the line: no table, a header with no row under it, rows of several
processes interleaved without a prefix, numbers that are not numbers, columns out of place.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_COMMAND_CHARS, MAX_NAMED_ROWS
from linkscope.topo.common.numbers import is_decimal, is_integer
from linkscope.topo.formats.lines import Line, clean_lines, iter_clean_lines
from linkscope.topo.formats.nccl_tests_context import PERF_TO_OP, Context, closed, names_op, read_context
from linkscope.topo.formats.nccl_tests_infer import (
    BYTES_PER_ELEMENT,
    SIGNATURES,
    RowFacts,
    TableFacts,
    candidate_ops,
    factor_fits,
    ranks_from_ratio,
    ranks_of_counts,
)
from linkscope.topo.formats.nccl_tests_rows import (
    NCCL_LOG,
    NCCL_TYPES,
    UNKNOWN_TYPE,
    Columns,
    Measured,
    Row,
    header_columns,
    is_size,
    read_rows,
    row_columns,
)
from linkscope.topo.model.busbw import bus_factor
from linkscope.topo.model.measurements import CollectiveResult, Measurements

__all__ = ["PERF_TO_OP", "known_op", "looks_like_nccl_tests", "read_nccl_tests"]

_UNITS = re.compile(r"#?[ \t]*\(B\)[ \t]+(?:\(elements\)|\(us\))")
_FOOTER = re.compile(r"#?[ \t]*(?:Avg bus bandwidth|Out of bounds values)\b")
_ELISION = re.compile(r"#?[ \t]*(?:\.{3,}|…|\[\s*\.{3}\s*\]|\(?\.{3}[^\n]{0,80}(?:truncated|elided|omitted|snip)[^\n]{0,80})\s*$",
                      re.IGNORECASE)
"""A line that stands for rows a poster left out: `...`, `[...]`, `# ... (truncated output) ...`."""


def known_op(op: str) -> str:
    """`op` as linkscope names it (`alltoall` and `all_to_all` alike); InputError for an unknown one."""
    word = op.strip().removesuffix("_perf")
    named = PERF_TO_OP.get(word, word)
    if named not in SIGNATURES:
        raise InputError(f"--op {op!r} is not a collective nccl-tests runs (one of {', '.join(SIGNATURES)})")
    return named


def looks_like_nccl_tests(text: str) -> bool:
    """True when `text` holds an nccl-tests table header, rows shaped like one (a tail), or nccl-tests' own
    preamble with its footer (a run whose rows were left out, which the reader then refuses naming the line)."""
    preamble = footer = False
    for line in iter_clean_lines(text.split("\n")):
        stripped = line.text.strip()
        if not stripped:
            continue
        if "size" in stripped and header_columns(stripped) is not None:
            return True
        words = stripped.split()
        if is_integer(words[0]) and (row_columns(words) is not None or _fused_row(words, stripped)):
            return True
        preamble = preamble or ("nThread" in stripped and "nGpus" in stripped)
        footer = footer or _FOOTER.match(stripped) is not None
    return preamble and footer


def _fused_row(words: list[str], text: str) -> bool:
    """Whether a line is the start of a table row with an NCCL log line written into it."""
    return len(words) >= 3 and is_integer(words[0]) and is_integer(words[1]) and words[2] in NCCL_TYPES \
        and NCCL_LOG.search(text) is not None


@dataclass
class _Table:
    columns: Columns
    first_line: int
    context: Context
    rows: list[Row] = field(default_factory=list)
    candidates: list[Line] = field(default_factory=list)
    zero_rows: int = 0
    last_header_line: int = 0
    elided: list[int] = field(default_factory=list)
    op_concluded: list[str | None] = field(default_factory=lambda: [None])
    """The op a `# Collective test concluded` line after the table names."""


def read_nccl_tests(text: str, name: str, op: str | None = None) -> Measurements:
    """Parse every result table in `text`; `op` (`--op`) overrides the collective of every table."""
    given = known_op(op) if op else None
    lines = clean_lines(text)
    notes: list[str] = []
    per_stream = [(label, _tables(stream, name, notes)) for label, stream in _streams(lines)]
    with_tables = [(label, tables) for label, tables in per_stream if tables]
    results: list[CollectiveResult] = []
    for label, tables in with_tables:
        for table in tables:
            results.extend(_results(table, name, given, label if len(with_tables) > 1 else None, notes))
    if not with_tables:
        raise InputError(_no_table(lines, name))
    if not results:
        empty = next(table for _, tables in with_tables for table in tables)
        raise InputError(f"{name}:{empty.first_line}: an nccl-tests column header and no row under it (the table ends "
                         f"at line {empty.last_header_line}: the run stopped, or its rows were left out, before the "
                         "first row)")
    if len(with_tables) > 1:
        notes.append(f"tables of {len(with_tables)} ranks/hosts kept apart (each row's group names the prefix it came from)")
    return Measurements(source=f"nccl-tests ({name})", collectives=tuple(results), notes=tuple(dict.fromkeys(notes)))


def _no_table(lines: list[Line], name: str) -> str:
    """Why a text with no readable table is refused, naming the line that says so."""
    fused = next((line for line in lines if _fused_row(line.text.split(), line.text)), None)
    if fused is not None:
        return (f"{name}:{fused.number}: an nccl-tests row cut apart by NCCL log lines, and no complete row "
                "or column header to read (NCCL_DEBUG output written into the table: rerun without it, "
                "or with NCCL_DEBUG_FILE)")
    elided = next((line for line in lines if _ELISION.match(line.text.strip())), None)
    if elided is not None:
        return (f"{name}:{elided.number}: no nccl-tests result table: its rows were left out here "
                f"({elided.text.strip()[:80]!r}); nothing to read")
    footer = next((line for line in lines if _FOOTER.match(line.text.strip())), None)
    where = f"{name}:{footer.number}" if footer is not None else name
    return f"{where}: no nccl-tests result table (a `#  size  count  type  redop  root  time ...` header or rows shaped like one)"


def _label(line: Line) -> str | None:
    return f"rank {line.rank}" if line.rank is not None else (f"host {line.host}" if line.host is not None else None)


def _streams(lines: list[Line]) -> list[tuple[str | None, list[Line]]]:
    """Lines per rank/host a prefix named (command lines no rank prefix claims go to every rank's stream too;
    blank lines belong to none); one stream when no prefix names a rank or host, or only one does."""
    by_label: dict[str | None, list[Line]] = {}
    for line in lines:
        if line.text.strip():
            by_label.setdefault(_label(line), []).append(line)
    if len(by_label) <= 1:
        return [(next(iter(by_label), None), lines)]
    shared = [line for line in lines if line.rank is None and line.text.strip() and names_op(line.text)]
    return [(label, own if label is None or not label.startswith("rank ")
             else list(heapq.merge(shared, own, key=lambda line: line.number)))
            for label, own in by_label.items()]


def _tables(lines: list[Line], name: str, notes: list[str]) -> list[_Table]:
    """The tables of one stream, with the context above each; rows are read by :func:`read_rows`."""
    tables: list[_Table] = []
    context = Context()
    table: _Table | None = None
    elided: list[int] = []
    """Lines outside the tables that stand for text the poster left out."""
    continued = ""
    """A command line continued with backslashes, so far."""
    for line in lines:
        stripped = line.text.strip()
        if not stripped:
            continue
        words = stripped.split()
        first_is_number = is_decimal(words[0]) or is_size(words[0])
        if table is not None:
            if first_is_number or (table.candidates and not stripped.startswith("#")
                                   and NCCL_LOG.search(table.candidates[-1].text) and not NCCL_LOG.search(stripped)):
                table.candidates.append(line)  # a row, or the rest of one an NCCL log line was written into
                continue
            if _ELISION.match(stripped):
                table.elided.append(line.number)
                continue
            if _UNITS.match(stripped) and not table.candidates:
                table.last_header_line = line.number
                continue
            if NCCL_LOG.search(stripped) or stripped == "#" or (stripped.startswith("#") and "out-of-place" in stripped):
                continue
            _close(table, name, notes, ended=False)
            table = None
        if continued or (stripped.endswith("\\") and not stripped.startswith("#")):
            if not stripped.startswith("#"):
                continued += " " + stripped.removesuffix("\\")
                if stripped.endswith("\\") and len(continued) < MAX_COMMAND_CHARS:
                    continue
            command, continued = continued.strip(), ""
            context = read_context(command, command, context, tables[-1].op_concluded if tables else [])
            if not stripped.startswith("#"):
                continue
        if "size" in stripped and (columns := header_columns(stripped)) is not None:
            table = _Table(columns, line.number, context, last_header_line=line.number)
            tables.append(table)
            context = closed(context)
            continue
        if first_is_number and is_integer(words[0]) and not NCCL_LOG.search(stripped) and \
                (columns := row_columns(words)) is not None:
            table = _Table(columns, line.number, context, last_header_line=line.number - 1)
            table.candidates.append(line)
            tables.append(table)
            context = closed(context)
            continue
        if _ELISION.match(stripped):
            elided.append(line.number)
            continue
        context = read_context(stripped, line.text, context, tables[-1].op_concluded if tables else [])
    if table is not None:
        _close(table, name, notes, ended=True)
    if elided and tables:
        notes.append(f"{_lines(elided)}: text left out by the poster ('...'): "
                     "rows, rank lines or a preamble may be missing")
    return tables


def _close(table: _Table, name: str, notes: list[str], ended: bool) -> None:
    read = read_rows(table.candidates, table.columns, name, notes, ended)
    table.rows, table.zero_rows = read.rows, read.zero_rows
    if read.one_group:
        table.columns = Columns(table.columns.labels, 1, table.columns.check)


def _facts(table: _Table) -> TableFacts:
    rows: list[RowFacts] = []
    for row in table.rows:
        per_count = float("nan")
        if row.count and row.dtype in BYTES_PER_ELEMENT:
            per_count = row.size / (row.count * BYTES_PER_ELEMENT[row.dtype])
        for measured in row.groups:
            rows.append(RowFacts(row.redop, row.root, per_count, measured.algbw, measured.busbw,
                                 measured.algbw_error, measured.busbw_error))
    in_place = [row.groups[1].checked for row in table.rows if len(row.groups) > 1]
    out_of_place = [row.groups[0].checked for row in table.rows]
    checked: bool | None = None
    if any(in_place):
        checked = True
    elif in_place and any(out_of_place):
        checked = False
    return TableFacts(tuple(rows), (table.columns.redop, table.columns.root), table.columns.check == "error", checked)


def _results(table: _Table, name: str, given: str | None, label: str | None, notes: list[str]) -> list[CollectiveResult]:
    """The rows of one table with its op and rank count settled and busbw cross-checked."""
    if not table.rows:
        return []
    facts = _facts(table)
    where = f"line {table.first_line}"
    nranks, nranks_source = table.context.nranks()
    op, op_source = (given, "given") if given else (table.context.op, table.context.op_source)
    if op is None and table.op_concluded[0] is not None:
        op, op_source = table.op_concluded[0], "header"
    if op is None:
        op = _inferred_op(facts, nranks, name, table.first_line, notes)
        op_source = "inferred"
    elif op not in SIGNATURES:
        notes.append(f"{op} table ({where}): nccl-tests defines no busbw factor for it; busbw not checked")
    priced = op.split("|", 1)[0] in SIGNATURES
    if priced and nranks is not None:
        nranks, nranks_source = _rank_count_against_ratio(op, nranks, nranks_source, facts, where, notes)
    if nranks is None and priced:
        nranks, nranks_source = _ranks_of(op, facts)
    if nranks is None:
        notes.append(f"{op} table ({where}): rank count not stated in the log")
    elif nranks == 1:
        notes.append(f"{op} table ({where}) ran on ONE rank: its bandwidths measure no link and must not be trusted")
    _table_notes(table, op, where, notes)
    unfit: list[int] = []
    results: list[CollectiveResult] = []
    hosts = table.context.hosts()
    for row in table.rows:
        for in_place, measured in enumerate(row.groups):
            if nranks is not None and priced and not factor_fits(op, nranks, _row_facts(row, measured)):
                unfit.append(row.line)
            results.append(CollectiveResult(
                op=op, size_bytes=row.size, dtype=NCCL_TYPES.get(row.dtype, UNKNOWN_TYPE), time_us=measured.time_us,
                algbw_gbps=measured.algbw, busbw_gbps=measured.busbw, nranks=nranks, wrong=measured.wrong,
                in_place=bool(in_place), backend="nccl", group=label, op_source=op_source, nranks_source=nranks_source,
                hosts=hosts, table_line=table.first_line,
            ))
    if unfit and nranks is not None:
        lines = sorted(set(unfit))
        more = f" and {len(lines) - MAX_NAMED_ROWS} more" if len(lines) > MAX_NAMED_ROWS else ""
        notes.append(f"{op} table ({where}): busbw is not algbw x {bus_factor(op, nranks):.4g} ({op} on {nranks} ranks) "
                     f"even allowing for the printed rounding on {_lines(lines[:MAX_NAMED_ROWS])}{more}: those rows are kept "
                     "as printed; distrust them")
    return results


def _row_facts(row: Row, measured: Measured) -> RowFacts:
    return RowFacts(row.redop, row.root, float("nan"), measured.algbw, measured.busbw, measured.algbw_error,
                    measured.busbw_error)


def _table_notes(table: _Table, op: str, where: str, notes: list[str]) -> None:
    if table.zero_rows:
        notes.append(f"{op} table ({where}): {table.zero_rows} row(s) of 0 bytes skipped")
    if table.elided:
        notes.append(f"{op} table ({where}): rows left out by the poster at {_lines(table.elided)}")
    if table.columns.check == "error":
        worst = max((row.error for row in table.rows if row.error is not None), default=None)
        notes.append(f"{op} table ({where}): older format, its `error` column is the largest numeric "
                     f"error (here {worst if worst is not None else 'N/A'}), not a count of wrong elements")
    if not table.columns.complete:
        notes.append(f"{op} table ({where}): columns cut from the table (it has "
                     f"{' '.join(('size', *table.columns.labels))} and the measured figures only)")
    wrong = sum(1 for row in table.rows for measured in row.groups if measured.wrong)
    if wrong:
        notes.append(f"{op} table ({where}): {wrong} result(s) report wrong elements (#wrong > 0): the data was "
                     "corrupted, and their bandwidths are not valid measurements")


def _rank_count_against_ratio(op: str, nranks: int, source: str | None, facts: TableFacts, where: str,
                              notes: list[str]) -> tuple[int, str | None]:
    """The stated rank count, unless most rows contradict it and the table's own busbw/algbw names another that
    every row fits: nccl-tests computed busbw with the count it ran on, so the ratio wins, and this is said."""
    rows = facts.rows
    misfits = sum(1 for row in rows if not factor_fits(op, nranks, row))
    if misfits * 2 <= len(rows):
        return nranks, source
    by_ratio = ranks_from_ratio(op, rows)
    if by_ratio is None or by_ratio == nranks or not all(factor_fits(op, by_ratio, row) for row in rows):
        return nranks, source
    notes.append(f"{op} table ({where}): the {source} say {nranks} ranks, but busbw/algbw of its rows says {by_ratio} "
                 f"(busbw = algbw x {bus_factor(op, by_ratio):.4g}): {by_ratio} used")
    return by_ratio, "busbw/algbw"


def _ranks_of(op: str, facts: TableFacts) -> tuple[int | None, str | None]:
    """Rank count from the per-rank counts (all_gather and friends) or the busbw/algbw ratio, and which."""
    by_counts = ranks_of_counts(facts.rows, op)
    if by_counts is not None:
        return by_counts, "size/count"
    by_ratio = ranks_from_ratio(op, facts.rows)
    return by_ratio, "busbw/algbw" if by_ratio is not None else None


def _inferred_op(facts: TableFacts, nranks: int | None, name: str, first_line: int, notes: list[str]) -> str:
    candidates = candidate_ops(facts, nranks)
    where = f"line {first_line}"
    if len(candidates) == 1:
        notes.append(f"{where}: no command line names this table's collective; its columns say {candidates[0]}")
        return candidates[0]
    if candidates and all(
            bus_factor(op, n) == bus_factor(candidates[0], n) for op in candidates for n in _possible_counts(nranks)):
        notes.append(f"{where}: the columns fit {' and '.join(candidates)} alike (same busbw factor); "
                     "op shown as both, give --op to choose")
        return "|".join(candidates)
    said = f"could be {' or '.join(candidates)}" if candidates else "fits no collective's columns"
    raise InputError(f"{name}:{first_line}: cannot tell which collective this table is (no `*_perf` command or "
                     f"`# Collective test` line names it, and its columns {said}); give --op")


def _lines(numbers: list[int]) -> str:
    """`line 7` or `lines 7, 9`."""
    return ("line " if len(numbers) == 1 else "lines ") + ", ".join(str(number) for number in numbers)


def _possible_counts(nranks: int | None) -> tuple[int, ...]:
    return (nranks,) if nranks is not None else (2, 3, 8)
