"""What the lines around an nccl-tests table say about it: the collective, the ranks, their hosts.

A paste states the collective in many places, and each counts: the `*_perf` binary on a command line
(also behind `kubectl exec ... --`, `bash -c "..."`, `srun`, a `set -x` trace), a wrapper script named
for its test (`run-allgather.sh`, `allgather.sh`), a wrapper's `-t all_gather` (where nccl-tests' own
`-t` is a thread count), and nccl-tests' `# Collective test starting/concluded: X_perf` lines. The rank
count comes from the `# Rank N ... on HOST device D` lines (the highest N + 1; a tail of the list still
shows the last), or from `nThread` x `nGpus` x the processes a launcher started; the host of each rank
from the same rank lines.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from linkscope.topo.common.numbers import is_integer

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

PERF = re.compile(r"\b(" + "|".join(sorted(PERF_TO_OP, key=len, reverse=True)) + r")_perf(?:_mpi)?(?=[\s;\"'`)|&]|$)")
"""The binary on a command line (not in a loader warning such as `.../all_reduce_perf: /usr/lib/...`)."""
RUN_LINE = re.compile(
    r"#?[ \t]*Collective test (?P<when>starting|concluded):[ \t]*(?P<op>\w{1,40}?)(?:_perf)?(?:_mpi)?[ \t]*$", re.ASCII)
RANK_LINE = re.compile(
    r"#?[ \t]*Rank[ \t]+(?P<rank>\d{1,9})[ \t]+(?:Group[ \t]+\d{1,9}[ \t]+)?Pid[ \t]+\d{1,10}[ \t]+on[ \t]+"
    r"(?P<host>[^\s]{1,255})(?:[ \t]+device[ \t]+\d{1,6})?", re.ASCII)
NTHREAD = re.compile(r"#?[ \t]*nThread[ \t]+(\d{1,6})[ \t]+nGpus[ \t]+(\d{1,6})", re.ASCII)
_GPUS_FLAG = re.compile(r"(?:^|[ \t])(?:-g|--ngpus)(?:=|[ \t]*)(\d{1,6})\b", re.ASCII)
_THREADS_FLAG = re.compile(r"(?:^|[ \t])(?:-t|--nthreads)(?:=|[ \t]*)(\d{1,6})\b", re.ASCII)
_TEST_FLAG = re.compile(r"(?:^|[ \t])(?:-t|--test|--collective|--coll)(?:=|[ \t]+)['\"]?([A-Za-z][\w-]{2,40})", re.ASCII)
"""A wrapper's option naming the test (`run_nccl_tests.sh -t all_gather`); a numeric `-t` is nccl-tests' thread count."""
_SCRIPT = re.compile(r"(?:^|[\s/\"'=])([\w.+-]{1,120})\.(?:sh|bash)(?=[\s;\"'`)|&]|$)", re.ASCII)
"""A shell script on a command line (`/scripts/run-allgather.sh`)."""
_OP_WORDS = (("reducescatter", "reduce_scatter"), ("allreduce", "all_reduce"), ("allgather", "all_gather"),
             ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("sendrecv", "send_recv"))
"""Collective names as they appear in script names and options, letters only, the longer first."""
LAUNCHER_COUNT_FLAGS: dict[str, tuple[str, ...]] = {
    "mpirun": ("-np", "--np", "-n", "--n", "-c"), "mpiexec": ("-np", "--np", "-n", "--n", "-c"),
    "orterun": ("-np", "--np", "-n", "--n", "-c"), "srun": ("-n", "--ntasks"),
}
"""Launchers that start the nccl-tests binary in several processes, and their process-count flags."""


@dataclass
class Context:
    """What the lines above a table said about it."""

    op: str | None = None
    op_source: str | None = None
    op_word: str | None = None
    """The word that named the op (`all_gather_perf`, `run-allgather.sh`, `-t all_gather`)."""
    ranks_seen: int | None = None
    """Highest `# Rank N` index + 1 (a tail of the list still shows the last index)."""
    rank_lines: int = 0
    """How many `# Rank` lines were seen (fewer than ranks_seen: only part of the list)."""
    rank_hosts: dict[int, str] = field(default_factory=dict)
    ranks_closed: bool = False
    threads_gpus: tuple[int, int] | None = None
    """`# nThread T nGpus G` of the header (per process)."""
    command_threads_gpus: tuple[int, int] | None = None
    """`-t` and `-g` of the `*_perf` command line (nccl-tests' defaults 1 and 1)."""
    command_procs: int | None = None
    """Processes a launcher before the binary started (1 for the binary run directly, `mpirun -np 16` 16);
    None when no command was seen or it does not say (a wrapper script, `mpirun -N 8`, `$MPIRUN`)."""

    def nranks(self) -> tuple[int | None, str | None]:
        """Ranks of the run and how they were found."""
        if self.ranks_seen:
            return self.ranks_seen, "rank lines"
        per_process = self.threads_gpus or self.command_threads_gpus
        if per_process is None or self.command_procs is None:
            return None, None
        ranks = self.command_procs * per_process[0] * per_process[1]
        return (ranks, "threads x gpus x processes") if ranks >= 1 else (None, None)

    def hosts(self) -> tuple[str, ...]:
        """The distinct hosts of the rank lines, in rank order."""
        return tuple(dict.fromkeys(self.rank_hosts[rank] for rank in sorted(self.rank_hosts)))


def closed(context: Context) -> Context:
    """The context for a table that follows this one without a new command (same op and launcher)."""
    return dataclasses.replace(context, ranks_closed=True)


def launcher_processes(prefix: str) -> int | None:
    """Processes the launcher in `prefix` (the command line before the binary) starts: 1 without a
    launcher (`taskset -c 0-7` and `nice -n 10` are not launchers), None when it does not say how many
    (`mpirun -N 8` per node, an srun without `-n`/`--ntasks` or nodes x tasks per node, or a shell variable
    such as `$MPIRUN` that may hold a launcher)."""
    words = prefix.split()
    names = [word.rsplit("/", 1)[-1] for word in words]
    start = next((i for i, name in enumerate(names) if name in LAUNCHER_COUNT_FLAGS), None)
    if start is None:
        return None if any(word.lstrip("\"'").startswith("$") for word in words) else 1
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


def op_of_word(word: str) -> str | None:
    """The collective a script name or option value names (`run-allgather`, `all_gather`, `AllToAll`), when it
    names exactly one."""
    letters = re.sub(r"[^a-z]", "", word.lower())
    found = []
    for spelled, op in _OP_WORDS:
        if spelled in letters:
            found.append(op)
            letters = letters.replace(spelled, " ")
    if not found and letters.endswith("reduce") and len(letters) <= len("reduce") + 4:
        found.append("reduce")
    return found[0] if len(set(found)) == 1 else None


def read_context(stripped: str, text: str, context: Context, last_table_op: list[str | None]) -> Context:
    """Update the context with one line that is not part of a table; `last_table_op` holds the op of the
    table just read (a `concluded` line names it when nothing above it did) and is updated in place."""
    if run := RUN_LINE.match(stripped):
        run_op = PERF_TO_OP.get(run.group("op"), run.group("op"))
        if run.group("when") == "concluded":
            if last_table_op and last_table_op[0] is None:
                last_table_op[0] = run_op
            return context
        if context.op == run_op and context.op_source == "command" and not context.ranks_closed:
            return context  # the line nccl-tests prints under its own command keeps what the command said
        return Context(op=run_op, op_source="header", op_word=run.group(0).strip())
    if not stripped.startswith("#"):
        perf = PERF.search(text) if "_perf" in text else None
        if perf:
            options = text[perf.end():]
            threads, gpus = _THREADS_FLAG.search(options), _GPUS_FLAG.search(options)
            return Context(op=PERF_TO_OP[perf.group(1)], op_source="command", op_word=perf.group(0),
                           command_threads_gpus=(int(threads.group(1)) if threads else 1,
                                                 int(gpus.group(1)) if gpus else 1),
                           command_procs=launcher_processes(text[: perf.start()]))
        wrapper = _wrapper_op(text)
        if wrapper is not None:
            return Context(op=wrapper[0], op_source="command", op_word=wrapper[1])
    if rank := RANK_LINE.match(stripped):
        if context.ranks_closed:
            context = dataclasses.replace(context, ranks_seen=None, rank_lines=0, rank_hosts={}, ranks_closed=False)
        number = int(rank.group("rank"))
        context.ranks_seen = max(context.ranks_seen or 0, number + 1)
        context.rank_lines += 1
        context.rank_hosts[number] = rank.group("host")
    elif threads_gpus := NTHREAD.match(stripped):
        context.threads_gpus = (int(threads_gpus.group(1)), int(threads_gpus.group(2)))
    return context


def names_op(text: str) -> bool:
    """Whether a line is a command that names the collective (a `*_perf` binary or a wrapper that names its test)."""
    stripped = text.lstrip()
    if stripped.startswith("#"):
        return False
    return ("_perf" in text and PERF.search(text) is not None) or _wrapper_op(text) is not None


def _wrapper_op(text: str) -> tuple[str, str] | None:
    """The collective a wrapper's command line names (its `-t all_gather`, or a script named for one test)."""
    for match in _TEST_FLAG.finditer(text):
        word = match.group(1)
        op = PERF_TO_OP.get(word.removesuffix("_perf")) or op_of_word(word)
        if op is not None and not is_integer(word):
            return op, match.group(0).strip()
    for match in _SCRIPT.finditer(text):
        op = op_of_word(match.group(1).rsplit("/", 1)[-1])
        if op is not None:
            return op, match.group(1) + text[match.end(1):match.end()]
    return None
