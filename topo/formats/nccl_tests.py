"""Reader of nccl-tests output (`all_reduce_perf` and friends) into :class:`topo.model.Measurements`.

Handles logs with or without the `# nThread ...` / `# Using devices` preamble, several runs in
one file (each table takes its op from the nearest `*_perf` command or `# Collective test
starting:` line above it), truncated tables, any `-f` factor, `N/A` in the `#wrong` columns and
out-of-place-only tables. A row that does not read cleanly (a missing column, a number that is
not one, algbw that does not match size/time) is rejected with `file:line`, never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topo.busbw import BUS_FACTOR_OPS, bus_factor
from topo.errors import InputError
from topo.formats import non_negative_number
from topo.model import CollectiveResult, Measurements

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

NCCL_TYPES: dict[str, str] = {
    "float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2",
}

_PERF = re.compile(r"\b(" + "|".join(sorted(PERF_TO_OP, key=len, reverse=True)) + r")_perf(?=\s|$)")
"""The binary on a command line (not in a loader warning such as `.../all_reduce_perf: /usr/lib/...`)."""
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\w+?)(?:_perf)?\s*$")
_HEADER = re.compile(
    r"^#\s*size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong(\s+time\s+algbw\s+busbw\s+#wrong)?\s*$"
)
_RANK_LINE = re.compile(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+\S+\s+device")
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
"""NCCL_DEBUG lines that can land between the rows of a table; they are skipped, not read."""
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_GPUS_FLAG = re.compile(r"(?:^|\s)(?:-g|--ngpus)[=\s]*(\d+)\b")
_THREADS_FLAG = re.compile(r"(?:^|\s)(?:-t|--nthreads)[=\s]*(\d+)\b")
LAUNCHER_COUNT_FLAGS: dict[str, tuple[str, ...]] = {
    "mpirun": ("-np", "--np", "-n", "--n", "-c"), "mpiexec": ("-np", "--np", "-n", "--n", "-c"),
    "orterun": ("-np", "--np", "-n", "--n", "-c"), "srun": ("-n", "--ntasks"),
}
"""Launchers that start the nccl-tests binary in several processes, and their process-count flags."""


def looks_like_nccl_tests(text: str) -> bool:
    """True when `text` holds at least one nccl-tests result table header."""
    return any(_HEADER.match(line.strip()) for line in text.splitlines())


@dataclass
class _Context:
    """What the lines above a table said about it."""

    op: str | None = None
    ranks_listed: int = 0
    threads_gpus: tuple[int, int] | None = None
    """`# nThread T nGpus G` of the header (per process)."""
    command_threads_gpus: tuple[int, int] | None = None
    """`-t` and `-g` of the `*_perf` command line (nccl-tests' defaults 1 and 1)."""
    command_procs: int | None = 1
    """Processes a launcher before the binary started (`mpirun -np 16`); None when it does not say."""

    def nranks(self) -> int | None:
        """Ranks of the run: the `# Rank` lines when listed, else processes x threads x GPUs per thread."""
        if self.ranks_listed:
            return self.ranks_listed
        per_process = self.threads_gpus or self.command_threads_gpus
        if per_process is None or self.command_procs is None:
            return None
        ranks = self.command_procs * per_process[0] * per_process[1]
        return ranks if ranks >= 1 else None


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
    for flag in LAUNCHER_COUNT_FLAGS[names[start]]:
        if values.get(flag, "").isdigit() and int(values[flag]) >= 1:
            return int(values[flag])
    nodes, per_node = values.get("-N") or values.get("--nodes", ""), values.get("--ntasks-per-node", "")
    if names[start] == "srun" and nodes.isdigit() and per_node.isdigit() and int(nodes) * int(per_node) >= 1:
        return int(nodes) * int(per_node)
    return None


def _integer(word: str, name: str, field: str, lineno: int) -> int:
    if not word.isdigit():
        raise InputError(f"{name}:{lineno}: {field} {word!r} is not a whole number")
    return int(word)


def _wrong(word: str, name: str, lineno: int) -> int | None:
    if word == "N/A":
        return None
    return _integer(word, name, "#wrong", lineno)


def _check_algbw(size: int, time_us: float, algbw: float, name: str, lineno: int) -> None:
    """algbw must equal size/time within the rounding of the printed figures (catches shifted columns)."""
    if time_us <= 0:
        raise InputError(f"{name}:{lineno}: time {time_us} us is not positive")
    computed = size / (time_us * 1e3)
    tolerance = computed * (0.02 + 0.006 / time_us) + 0.011
    if abs(computed - algbw) > tolerance:
        raise InputError(f"{name}:{lineno}: algbw {algbw} does not match size/time = {computed:.3g} GB/s "
                         "(columns out of place?)")


def _check_busbw(op: str, nranks: int | None, algbw: float, busbw: float, name: str, lineno: int) -> None:
    """busbw must be algbw times the op's factor for the stated rank count."""
    if nranks is None or op not in BUS_FACTOR_OPS:
        return
    expected = algbw * bus_factor(op, nranks)
    if abs(expected - busbw) > 0.011 + 0.01 * max(expected, busbw):
        raise InputError(f"{name}:{lineno}: busbw {busbw} is not algbw x {bus_factor(op, nranks):.3g} for {op} on "
                         f"{nranks} ranks (columns out of place, or the wrong rank count?)")


def _op_from(op: str | None, name: str, lineno: int, op_override: str | None) -> str:
    if op_override:
        return op_override
    if op is None:
        raise InputError(f"{name}:{lineno}: cannot tell which collective this table is (no `*_perf` command or "
                         "`# Collective test starting` line above it; give --op)")
    return op


def read_nccl_tests(text: str, name: str, op: str | None = None) -> Measurements:
    """Parse every result table in `text`; `op` overrides the collective when the log does not name it."""
    results: list[CollectiveResult] = []
    notes: list[str] = []
    context = _Context()
    lines = text.splitlines()
    index = 0
    tables = 0
    while index < len(lines):
        line = lines[index].rstrip()
        stripped = line.strip()
        lineno = index + 1
        starting = _STARTING.match(stripped)
        perf = _PERF.search(line)
        if starting or (perf and not stripped.startswith("#")):
            word = starting.group(1) if starting else perf.group(1) if perf else ""
            run_op = PERF_TO_OP.get(word.removesuffix("_perf"), word.removesuffix("_perf"))
            if not (starting and context.op == run_op and context.command_threads_gpus is not None):
                context = _Context(op=run_op)  # (the line nccl-tests prints under its own command keeps it)
            if perf and not stripped.startswith("#"):
                options = line[perf.end():]
                threads, gpus = _THREADS_FLAG.search(options), _GPUS_FLAG.search(options)
                context.command_threads_gpus = (int(threads.group(1)) if threads else 1, int(gpus.group(1)) if gpus else 1)
                context.command_procs = launcher_processes(line[: perf.start()])
        elif _RANK_LINE.match(stripped):
            context.ranks_listed += 1
        elif match := _NTHREAD.match(stripped):
            context.threads_gpus = (int(match.group(1)), int(match.group(2)))
        elif header := _HEADER.match(stripped):
            table_op = _op_from(context.op, name, lineno, op)
            in_place_columns = header.group(1) is not None
            index = _read_table(lines, index + 1, name, table_op, context, in_place_columns, results, notes)
            tables += 1
            context = _Context(op=context.op)
            continue
        index += 1
    if not tables:
        raise InputError(f"{name}: no nccl-tests result table (a `#  size  count  type  redop  root  time ...` header)")
    if not results:
        raise InputError(f"{name}: the nccl-tests tables hold no rows")
    return Measurements(source=f"nccl-tests ({name})", collectives=tuple(results), notes=tuple(notes))


def _read_table(lines: list[str], index: int, name: str, op: str, context: _Context, in_place_columns: bool,
                results: list[CollectiveResult], notes: list[str]) -> int:
    """Read the rows after a header; returns the index of the first line after the table."""
    nranks = context.nranks()
    if nranks is None:
        notes.append(f"{op} table: rank count not stated in the log")
    elif nranks == 1:
        notes.append(f"{op} table ran on ONE rank: its bandwidths measure no link and must not be trusted")
    zero_rows = 0
    expected_columns = 13 if in_place_columns else 9
    while index < len(lines):
        stripped = lines[index].strip()
        lineno = index + 1
        if (stripped.startswith("#") and ("(B)" in stripped or "(elements)" in stripped)) or _NCCL_LOG.search(stripped):
            index += 1
            continue
        if not stripped or stripped.startswith("#") or not stripped[0].isdigit():
            break
        words = stripped.split()
        if len(words) != expected_columns:
            raise InputError(f"{name}:{lineno}: expected {expected_columns} columns in an nccl-tests row, found {len(words)}")
        size = _integer(words[0], name, "size", lineno)
        _integer(words[1], name, "count", lineno)
        dtype = NCCL_TYPES.get(words[2])
        if dtype is None:
            raise InputError(f"{name}:{lineno}: unknown data type {words[2]!r}")
        if size == 0:
            zero_rows += 1
            index += 1
            continue
        groups = [(False, words[5:9])]
        if in_place_columns:
            groups.append((True, words[9:13]))
        for in_place, (time_word, algbw_word, busbw_word, wrong_word) in groups:
            time_us = non_negative_number(time_word, f"{name}:{lineno}: time")
            algbw = non_negative_number(algbw_word, f"{name}:{lineno}: algbw")
            busbw = non_negative_number(busbw_word, f"{name}:{lineno}: busbw")
            _check_algbw(size, time_us, algbw, name, lineno)
            _check_busbw(op, nranks, algbw, busbw, name, lineno)
            results.append(CollectiveResult(
                op=op, size_bytes=size, dtype=dtype, time_us=time_us, algbw_gbps=algbw, busbw_gbps=busbw,
                nranks=nranks, wrong=_wrong(wrong_word, name, lineno), in_place=in_place, backend="nccl",
            ))
        index += 1
    if zero_rows:
        notes.append(f"{op} table: {zero_rows} row(s) of 0 bytes skipped")
    return index
