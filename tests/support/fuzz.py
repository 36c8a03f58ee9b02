"""What the fuzz, long-line and fault suites feed: every reader and file format, by the command that reads it.

A new reader joins the suites by adding a :class:`Reader` to READERS: the command line that reads a
file, and the real files it was written against.
"""

from __future__ import annotations

import io
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from support.paths import ROOT

REAL = ROOT / "tests" / "fixtures" / "real"
VARIANTS = ROOT / "tests" / "fixtures" / "topo_variants"
SAMPLES = ROOT / "topo" / "samples"


@dataclass(frozen=True)
class Reader:
    """One way linkscope reads a file: `argv` with `{file}` where the file goes, and real examples."""

    name: str
    argv: tuple[str, ...]
    fixtures: tuple[Path, ...]


def _files(folder: Path, pattern: str = "*.txt") -> tuple[Path, ...]:
    return tuple(sorted(folder.glob(pattern)))


RANK_MAPS: dict[str, str] = {
    "ranks.csv": "rank,host,gpu\n" + "".join(f"{rank},node{rank // 8},{rank % 8}\n" for rank in range(16)),
    "ranks.json": "[" + ",".join(f'{{"rank": {rank}, "host": "node{rank // 8}", "gpu": {rank % 8}}}' for rank in range(16)) + "]",
    "hostfile": "node0 slots=8\nnode1 slots=8\n",
    "slurm.env": "SLURM_JOB_NODELIST=node[0-1]\nSLURM_TASKS_PER_NODE=8(x2)\nSLURM_DISTRIBUTION=cyclic\n",
}
"""Rank maps of each format for 16 ranks on two 8-GPU nodes."""


def rank_map_fixtures(folder: Path) -> tuple[Path, ...]:
    """The RANK_MAPS written under `folder`."""
    paths = []
    for name, text in RANK_MAPS.items():
        path = folder / name
        path.write_text(text)
        paths.append(path)
    return tuple(paths)


def readers(folder: Path) -> tuple[Reader, ...]:
    """Every reader with its fixtures (rank maps are written under `folder`)."""
    return (
        Reader("topo", ("show", "{file}", "--json"), _files(REAL / "topo") + _files(VARIANTS)),
        Reader("snapshot", ("show", "{file}", "--json"), _files(SAMPLES, "*.json")),
        Reader("nccl-tests", ("import", "{file}", "--json"), _files(REAL / "nccl_tests")),
        Reader("p2p", ("import", "{file}", "--json"), _files(REAL / "p2p")),
        Reader("rank-map", ("check", "sample:dgx-h100", "--tp", "8", "--json", "--rank-map", "{file}"),
               rank_map_fixtures(folder)),
    )


@dataclass(frozen=True)
class Outcome:
    """What one in-process run of the command line did."""

    status: int
    out: str
    err: str
    seconds: float


class TooSlow(Exception):
    """The run went past its time bound."""


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise TooSlow inside the block after `seconds` (SIGALRM: the main thread only)."""

    def expire(signum: int, frame: object) -> None:
        raise TooSlow(f"more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str], seconds: float = 10.0, stdin: str | None = None) -> Outcome:
    """`linkscope ARGV` in this process under a time bound, with stdout and stderr captured."""
    from linkscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogatepass")), encoding="utf-8")
    started = time.perf_counter()
    try:
        with time_bound(seconds), redirect_stdout(out), redirect_stderr(err):
            status = main(argv)
    finally:
        sys.stdin = saved_stdin
    return Outcome(status, out.getvalue(), err.getvalue(), time.perf_counter() - started)


def command(reader: Reader, path: Path) -> list[str]:
    """The reader's command line for `path`."""
    return [part.format(file=path) for part in reader.argv]


def assert_clean_outcome(outcome: Outcome, what: str) -> None:
    """A result (0/1) or one line on stderr and exit 2; never a traceback."""
    assert "Traceback" not in outcome.err, f"{what}: {outcome.err[-2000:]}"
    assert outcome.status in (0, 1, 2), f"{what}: exit {outcome.status}: {outcome.err[-500:]}"
    if outcome.status == 2:
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("linkscope: error: "), f"{what}: {outcome.err[-1000:]}"


WEIRD_WORDS = (
    "9" * 5000, "-1", "0", "1e400", "nan", "inf", "NaN", "\u00b9\u00b2", "\u0663", "1_000", "0x10", "\x1b]0;t\x07",
    "\x00", "\x85", "\u2028", "GPU0", "NV0", "NV-3", "X", "SYS", "NIC99", "[", "]", "(x999999999)", "slots=0", ",",
    "\t", "  ", "#", "N/A", "\ufeff", "\ud7ff", "r[0-99999]n[0-99999]",
)
"""Words that have broken parsers: huge and foreign digits, non-finite numbers, controls, format tokens."""


REPLACEMENTS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12), st.sampled_from(WEIRD_WORDS), st.just([]), st.just({}), st.lists(st.integers(-3, 300), max_size=4),
)


@st.composite
def mutated_json(draw: st.DrawFn, data: Any) -> Any:
    """`data` with one value somewhere replaced (or a list emptied, an item repeated, a key dropped)."""
    if isinstance(data, dict) and data and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(data)))
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return {name: value for name, value in data.items() if name != key}
        return {**data, key: draw(mutated_json(data[key]))}
    if isinstance(data, list) and data and draw(st.integers(0, 3)):
        index = draw(st.integers(0, len(data) - 1))
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return [*data, data[index]]
        if choice == 1:
            return []
        return [*data[:index], draw(mutated_json(data[index])), *data[index + 1:]]
    return draw(REPLACEMENTS)
