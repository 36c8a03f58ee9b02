"""Reader of nccl-tests output (`all_reduce_perf` and friends) into :class:`topo.model.measurements.Measurements`.

Reads logs as people paste them: through the line-cleaning front end (launcher and logging
prefixes, escapes, quotes), with or without the `# nThread ...` / `# Using devices` preamble,
several runs in one file, the table formats of 2019 to now (no `root` column, an `error` column of
floats instead of `#wrong`), NCCL log lines between rows, a table inside a full NCCL_DEBUG log,
a tail without its header, and a half-written last row (dropped, and said). When prefixes name
ranks, each rank's tables stay apart. Each table takes its op from the `*_perf` command above it,
nccl-tests' own `# Collective test starting/concluded` line, `--op`, or its columns
(:mod:`topo.formats.nccl_tests_infer`), and says which (`op_source`). A row that does not read
cleanly (a number that is not one, algbw that is not size/time, busbw that is not algbw x the op's
factor) is rejected with `file:line`, never guessed at.
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from dataclasses import dataclass, field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_COMMAND_CHARS
from linkscope.topo.common.numbers import is_decimal, is_integer
from linkscope.topo.formats.lines import Line, clean_lines, iter_clean_lines
from linkscope.topo.formats.nccl_tests_infer import BYTES_PER_ELEMENT, SIGNATURES, RowFacts, candidate_ops, ranks_from_ratio
from linkscope.topo.formats.nccl_tests_rows import NCCL_LOG, NCCL_TYPES, Columns, Row, header_columns, read_rows, row_columns
from linkscope.topo.model.busbw import bus_factor
from linkscope.topo.model.measurements import CollectiveResult, Measurements

__all__ = ["PERF_TO_OP", "known_op",
           "launcher_processes", "looks_like_nccl_tests", "read_nccl_tests"]

PERF_TO_OP: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "gather": "gather",
    "scatter": "scatter",
    "hypercube": "hypercube",
}
"""nccl-tests binary name (without `_perf`) -> linkscope op name."""

_PERF = re.compile(r"\b(" + "|".join(sorted(PERF_TO_OP, key=len, reverse=True)) + r")_perf(?:_mpi)?(?=[ \t]|$)")
"""The binary on a command line (not in a loader warning such as `.../all_reduce_perf: /usr/lib/...`)."""
_RUN_LINE = re.compile(
    r"#[ \t]*Collective test (?P<when>starting|concluded):[ \t]*(?P<op>\w{1,40}?)(?:_perf)?(?:_mpi)?[ \t]*$", re.ASCII)
_RANK_LINE = re.compile(
    r"#?[ \t]*Rank[ \t]+(?P<rank>\d{1,9})[ \t]+(?:Group[ \t]+\d{1,9}[ \t]+)?Pid[ \t]+\d{1,10}[ \t]+on[ \t]", re.ASCII)
_NTHREAD = re.compile(r"#?[ \t]*nThread[ \t]+(\d{1,6})[ \t]+nGpus[ \t]+(\d{1,6})", re.ASCII)
_GPUS_FLAG = re.compile(r"(?:^|[ \t])(?:-g|--ngpus)(?:=|[ \t]*)(\d{1,6})\b", re.ASCII)
_THREADS_FLAG = re.compile(r"(?:^|[ \t])(?:-t|--nthreads)(?:=|[ \t]*)(\d{1,6})\b", re.ASCII)
_UNITS = re.compile(r"#?[ \t]*\(B\)[ \t]+\(elements\)")
LAUNCHER_COUNT_FLAGS: dict[str, tuple[str, ...]] = {
    "mpirun": ("-np", "--np", "-n", "--n", "-c"), "mpiexec": ("-np", "--np", "-n", "--n", "-c"),
    "orterun": ("-np", "--np", "-n", "--n", "-c"), "srun": ("-n", "--ntasks"),
}
"""Launchers that start the nccl-tests binary in several processes, and their process-count flags."""


def known_op(op: str) -> str:
    """`op` as linkscope names it (`alltoall` and `all_to_all` alike); InputError for an unknown one."""
    word = op.strip().removesuffix("_perf")
    named = PERF_TO_OP.get(word, word)
    if named not in SIGNATURES:
        raise InputError(f"--op {op!r} is not a collective nccl-tests runs (one of {', '.join(SIGNATURES)})")
    return named


def looks_like_nccl_tests(text: str) -> bool:
    """True when `text` holds an nccl-tests table header, or rows shaped like one (a tail)."""
    for line in iter_clean_lines(text.split("\n")):
        stripped = line.text.strip()
        if not stripped:
            continue
        if "size" in stripped and header_columns(stripped) is not None:
            return True
        words = stripped.split()
        if is_integer(words[0]) and (row_columns(words) is not None or _fused_row(words, stripped)):
            return True
    return False


def _fused_row(words: list[str], text: str) -> bool:
    """Whether a line is the start of a table row with an NCCL log line written into it."""
    return len(words) >= 3 and is_integer(words[0]) and is_integer(words[1]) and words[2] in NCCL_TYPES \
        and NCCL_LOG.search(text) is not None


@dataclass
class _Context:
    """What the lines above a table said about it."""

    op: str | None = None
    op_source: str | None = None
    ranks_seen: int | None = None
    """Highest `# Rank N` index + 1 (a tail of the list still shows the last index)."""
    ranks_closed: bool = False
    threads_gpus: tuple[int, int] | None = None
    """`# nThread T nGpus G` of the header (per process)."""
    command_threads_gpus: tuple[int, int] | None = None
    """`-t` and `-g` of the `*_perf` command line (nccl-tests' defaults 1 and 1)."""
    command_procs: int | None = 1
    """Processes a launcher before the binary started (`mpirun -np 16`); None when it does not say."""

    def nranks(self) -> tuple[int | None, str | None]:
        """Ranks of the run and how they were found."""
        if self.ranks_seen:
            return self.ranks_seen, "rank lines"
        per_process = self.threads_gpus or self.command_threads_gpus
        if per_process is None or self.command_procs is None:
            return None, None
        ranks = self.command_procs * per_process[0] * per_process[1]
        return (ranks, "threads x gpus x processes") if ranks >= 1 else (None, None)


@dataclass
class _Table:
    columns: Columns
    first_line: int
    context: _Context
    rows: list[Row] = field(default_factory=list)
    candidates: list[Line] = field(default_factory=list)
    zero_rows: int = 0


def launcher_processes(prefix: str) -> int | None:
    """Processes the launcher in `prefix` (the command line before the binary) starts: 1 without a
    launcher (`taskset -c 0-7` and `nice -n 10` are not launchers), None when it does not say how many
    (`mpirun -N 8` per node, an srun without `-n`/`--ntasks` or nodes x tasks per node)."""
    words = prefix.split()
    names = [word.rsplit("/", 1)[-1] for word in words]
    start = next((i for i, name in enumerate(names) if name in LAUNCHER_COUNT_FLAGS), None)
    if start is None:
        return 1
    values: dict[str, str] = {}
    options = words[start + 1:]
    for position, word in enumerate(options):
        if not word.startswith("-"):
            continue
        flag, equals, value = word.partition("=")
        if not equals and position + 1 < len(options) and not options[position + 1].startswith("-"):
            value = options[position + 1]
        values.setdefault(flag, value)

    def count(word: str) -> int | None:
        return int(word) if is_integer(word) and 1 <= int(word) <= 1 << 24 else None

    for flag in LAUNCHER_COUNT_FLAGS[names[start]]:
        if (processes := count(values.get(flag, ""))) is not None:
            return processes
    nodes, per_node = count(values.get("-N") or values.get("--nodes", "")), count(values.get("--ntasks-per-node", ""))
    if names[start] == "srun" and nodes is not None and per_node is not None:
        return nodes * per_node
    return None


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
        fused = next((line for line in lines if _fused_row(line.text.split(), line.text)), None)
        if fused is not None:
            raise InputError(f"{name}:{fused.number}: an nccl-tests row cut apart by NCCL log lines, and no complete row "
                             "or column header to read (NCCL_DEBUG output written into the table: rerun without it, "
                             "or with NCCL_DEBUG_FILE)")
        raise InputError(f"{name}: no nccl-tests result table (a `#  size  count  type  redop  root  time ...` "
                         "header or rows shaped like one)")
    if not results:
        raise InputError(f"{name}: the nccl-tests tables hold no rows")
    if len(with_tables) > 1:
        notes.append(f"tables of {len(with_tables)} ranks/hosts kept apart (each row's group names the prefix it came from)")
    return Measurements(source=f"nccl-tests ({name})", collectives=tuple(results), notes=tuple(dict.fromkeys(notes)))


def _label(line: Line) -> str | None:
    return f"rank {line.rank}" if line.rank is not None else (f"host {line.host}" if line.host is not None else None)


def _streams(lines: list[Line]) -> list[tuple[str | None, list[Line]]]:
    """Lines per rank/host a prefix named (unprefixed command lines go to every stream; blank lines
    belong to none); one stream when no prefix names a rank or host, or only one does."""
    by_label: dict[str | None, list[Line]] = {}
    for line in lines:
        if line.text.strip():
            by_label.setdefault(_label(line), []).append(line)
    if len(by_label) <= 1:
        return [(next(iter(by_label), None), lines)]
    shared = [line for line in by_label.get(None, [])
              if "_perf" in line.text and _PERF.search(line.text) and not line.text.lstrip().startswith("#")]
    return [(label, own if label is None else list(heapq.merge(shared, own, key=lambda line: line.number)))
            for label, own in by_label.items()]


def _tables(lines: list[Line], name: str, notes: list[str]) -> list[_Table]:
    """The tables of one stream, with the context above each; rows are read by :func:`read_rows`."""
    tables: list[_Table] = []
    context = _Context()
    table: _Table | None = None
    continued = ""
    """A command line continued with backslashes, so far."""
    for line in lines:
        stripped = line.text.strip()
        if not stripped:
            continue
        words = stripped.split()
        first_is_number = is_decimal(words[0])
        if table is not None:
            if first_is_number:
                table.candidates.append(line)
                continue
            if NCCL_LOG.search(stripped) or _UNITS.match(stripped) or stripped == "#" or \
                    (stripped.startswith("#") and "out-of-place" in stripped):
                continue
            table.rows, table.zero_rows = read_rows(table.candidates, table.columns, name, notes)
            table = None
        if continued or (stripped.endswith("\\") and not stripped.startswith("#")):
            if not stripped.startswith("#"):
                continued += " " + stripped.removesuffix("\\")
                if stripped.endswith("\\") and len(continued) < MAX_COMMAND_CHARS:
                    continue
            command, continued = continued.strip(), ""
            context = _read_context(command, command, context, tables)
            if not stripped.startswith("#"):
                continue
        if "size" in stripped and (columns := header_columns(stripped)) is not None:
            table = _Table(columns, line.number, context)
            tables.append(table)
            context = _closed(context)
            continue
        if first_is_number and is_integer(words[0]) and not NCCL_LOG.search(stripped) and \
                (columns := row_columns(words)) is not None:
            table = _Table(columns, line.number, context)
            table.candidates.append(line)
            tables.append(table)
            context = _closed(context)
            continue
        context = _read_context(stripped, line.text, context, tables)
    if table is not None:
        table.rows, table.zero_rows = read_rows(table.candidates, table.columns, name, notes)
    return tables


def _closed(context: _Context) -> _Context:
    """The context for a table that follows this one without a new command (same op and launcher)."""
    return dataclasses.replace(context, ranks_closed=True)


def _read_context(stripped: str, text: str, context: _Context, tables: list[_Table]) -> _Context:
    """Update the context with one line that is not part of a table."""
    if run := _RUN_LINE.match(stripped):
        run_op = PERF_TO_OP.get(run.group("op"), run.group("op"))
        if run.group("when") == "concluded":
            if tables and tables[-1].context.op is None:
                tables[-1].context.op, tables[-1].context.op_source = run_op, "header"
            return context
        if context.op == run_op and context.op_source == "command" and not context.ranks_closed:
            return context  # the line nccl-tests prints under its own command keeps what the command said
        return _Context(op=run_op, op_source="header")
    perf = _PERF.search(text) if "_perf" in text else None
    if perf and not stripped.startswith("#"):
        options = text[perf.end():]
        threads, gpus = _THREADS_FLAG.search(options), _GPUS_FLAG.search(options)
        return _Context(op=PERF_TO_OP[perf.group(1)], op_source="command",
                        command_threads_gpus=(int(threads.group(1)) if threads else 1, int(gpus.group(1)) if gpus else 1),
                        command_procs=launcher_processes(text[: perf.start()]))
    if rank := _RANK_LINE.match(stripped):
        if context.ranks_closed:
            context.ranks_seen, context.ranks_closed = None, False
        context.ranks_seen = max(context.ranks_seen or 0, int(rank.group("rank")) + 1)
    elif threads_gpus := _NTHREAD.match(stripped):
        context.threads_gpus = (int(threads_gpus.group(1)), int(threads_gpus.group(2)))
    return context


def _facts(table: _Table) -> list[RowFacts]:
    facts: list[RowFacts] = []
    for row in table.rows:
        per_count = row.size / (row.count * BYTES_PER_ELEMENT[row.dtype]) if row.count else float("nan")
        for _, algbw, busbw, _ in row.groups:
            facts.append(RowFacts(row.redop, row.root, per_count, algbw, busbw))
    return facts


def _results(table: _Table, name: str, given: str | None, label: str | None, notes: list[str]) -> list[CollectiveResult]:
    """The rows of one table with its op and rank count settled and busbw cross-checked."""
    if not table.rows:
        return []
    facts = _facts(table)
    nranks, nranks_source = table.context.nranks()
    op, op_source = (given, "given") if given else (table.context.op, table.context.op_source)
    if op is None:
        op = _inferred_op(facts, nranks, name, table.first_line, notes)
        op_source = "inferred"
    elif op not in SIGNATURES:
        notes.append(f"{op} table (line {table.first_line}): nccl-tests defines no busbw factor for it; busbw not checked")
    if nranks is None and op.split("|", 1)[0] in SIGNATURES:
        nranks, nranks_source = _ranks_of(op, facts)
    if nranks is None:
        notes.append(f"{op} table (line {table.first_line}): rank count not stated in the log")
    elif nranks == 1:
        notes.append(f"{op} table (line {table.first_line}) ran on ONE rank: its bandwidths measure no link "
                     "and must not be trusted")
    if table.zero_rows:
        notes.append(f"{op} table (line {table.first_line}): {table.zero_rows} row(s) of 0 bytes skipped")
    if table.columns.check == "error":
        worst = max((row.error for row in table.rows if row.error is not None), default=None)
        notes.append(f"{op} table (line {table.first_line}): older format, its `error` column is the largest numeric "
                     f"error (here {worst if worst is not None else 'N/A'}), not a count of wrong elements")
    results: list[CollectiveResult] = []
    for row in table.rows:
        for in_place, (time_us, algbw, busbw, wrong) in enumerate(row.groups):
            if nranks is not None and op.split("|", 1)[0] in SIGNATURES and \
                    abs(algbw * bus_factor(op, nranks) - busbw) > 0.011 + 0.01 * max(algbw, busbw):
                raise InputError(f"{name}:{row.line}: busbw {busbw} is not algbw x {bus_factor(op, nranks):.3g} for "
                                     f"{op} on {nranks} ranks (columns out of place, or the wrong rank count?)")
            results.append(CollectiveResult(
                op=op, size_bytes=row.size, dtype=NCCL_TYPES[row.dtype], time_us=time_us, algbw_gbps=algbw,
                busbw_gbps=busbw, nranks=nranks, wrong=wrong, in_place=bool(in_place), backend="nccl",
                group=label, op_source=op_source, nranks_source=nranks_source,
            ))
    return results


def _ranks_of(op: str, facts: list[RowFacts]) -> tuple[int | None, str | None]:
    """Rank count from the per-rank counts (all_gather and friends) or the busbw/algbw ratio, and which."""
    first = op.split("|", 1)[0]
    if SIGNATURES[first].per_rank_count:
        ratios = {round(fact.elements_per_count) for fact in facts if fact.elements_per_count == fact.elements_per_count}
        if len(ratios) == 1 and (ranks := ratios.pop()) > 1:
            return ranks, "size/count"
    ranks_by_ratio = ranks_from_ratio(op, facts)
    return ranks_by_ratio, "busbw/algbw" if ranks_by_ratio is not None else None


def _inferred_op(facts: list[RowFacts], nranks: int | None, name: str, first_line: int, notes: list[str]) -> str:
    candidates = candidate_ops(facts, nranks)
    where = f"line {first_line}"
    if len(candidates) == 1:
        notes.append(f"{where}: no command line names this table's collective; its columns say {candidates[0]}")
        return candidates[0]
    if candidates and all(
            bus_factor(op, n) == bus_factor(candidates[0], n) for op in candidates for n in (2, 3, 8)):
        notes.append(f"{where}: the columns fit {' and '.join(candidates)} alike (same busbw factor); "
                     "op shown as both, give --op to choose")
        return "|".join(candidates)
    said = f"could be {' or '.join(candidates)}" if candidates else "fits no collective's columns"
    raise InputError(f"{name}:{first_line}: cannot tell which collective this table is (no `*_perf` command or "
                     f"`# Collective test` line names it, and its columns {said}); give --op")
