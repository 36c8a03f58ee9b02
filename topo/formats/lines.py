"""The one line-cleaning front end every reader of pasted text goes through.

People paste logs as their launchers and terminals left them: every line tagged by Open MPI
(`[1,3]<stdout>:`), `srun --label` (`12: `), torchrun's `--tee` (`[default0]:`), Ray/SkyPilot
(`(head, rank=0, pid=3808) `), pdsh/clush (`host: `), `kubectl logs --prefix`
(`[pod/name/container] `), MPICH `-prepend-rank` (`[3] `), Python logging
(`2025-11-12 20:42:20,261 - INFO - `) or a bracketed timestamp, sometimes several stacked;
coloured by the terminal; quoted in Markdown. This module removes all of that before any table is
parsed, and keeps each line's number in the original file and the rank or host a prefix named, so
interleaved output of several ranks stays apart.

Unambiguous prefixes are removed wherever they appear. Two styles could be ordinary text
(`Device: 0, ...` looks like a pdsh prefix, `12: ` like an srun label), so they are removed only
when most of the first lines of the input carry them; so is an editor's line numbering, and then
only where the number is the line's own. All patterns are anchored and linear.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from linkscope.topo.common.limits import MAX_STACKED_PREFIXES
from linkscope.topo.common.text import strip_escapes


@dataclass(frozen=True, slots=True)
class Line:
    """One cleaned line: its 1-based number in the original input, its text, and what a prefix said."""

    number: int
    text: str
    rank: int | None = None
    """Rank (or task id / local rank) a launcher prefix named; None when no prefix named one."""
    host: str | None = None
    """Host (or pod) a prefix named; None when no prefix named one."""


_OPEN_MPI = re.compile(r"\[(?P<job>\d{1,9}),(?P<rank>\d{1,9})\]<std(?:out|err)>:")
_TORCHRUN = re.compile(r"\[(?P<role>[A-Za-z_][A-Za-z_]{0,40}?)(?P<rank>\d{1,9})\]:")
_RAY = re.compile(r"\((?P<inner>[^()\n]{0,300}?\bpid=\d{1,10}[^()\n]{0,300})\)[ \t]")
_KUBECTL = re.compile(r"\[pod/(?P<host>[A-Za-z0-9][\w.-]{0,252})/[\w.-]{1,253}(?:/[\w.-]{1,253})?\][ \t]")
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
    r"(?:[ \t]*-[ \t]*(?:[\w.]{1,64}[ \t]*-[ \t]*)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[ \t]*-"
    r"|[ \t]+(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b:?|[ \t]*\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\])?[ \t]?"
)
_BRACKETED_TIME = re.compile(
    r"\[(?:\d{4}-\d{2}-\d{2}[ T])?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?(?:[ \t][^\]\n]{0,40})?\][ \t]?"
)
_SRUN_LABEL = re.compile(r"[ \t]{0,8}(?P<rank>\d{1,7}):[ \t]")
_HOST_LABEL = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9_.-]{0,252}):[ \t]")
_QUOTE = re.compile(r"(?:>[ \t]?)+")
_MPICH_RANK = re.compile(r"\[(?P<rank>\d{1,7})\](?:[ \t]|$)(?![ \t]*NCCL (?:INFO|WARN|TRACE|ERROR)\b)", re.ASCII)
"""MPICH / Intel MPI `-prepend-rank`: `[3] ` (not NCCL's own `[cudaDev] NCCL INFO`, whose host:pid:tid was cut)."""
_LINE_NUMBER = re.compile(r"[ \t]{0,8}(?P<number>\d{1,7})(?:[ \t]|$)", re.ASCII)
"""An editor's or `cat -n`'s line number in front of a pasted line."""
_FENCE = re.compile(r"[ \t]{0,3}(?:```|~~~)[\w+-]{0,30}[ \t]*")

DETECTION_LINES = 256
"""How many non-empty lines decide whether the ambiguous prefix styles (`host: `, `12: `) are in use."""
_MAJORITY = 0.6


@dataclass(frozen=True, slots=True)
class _Styles:
    srun_labels: bool
    host_labels: bool
    line_number_offset: int | None = None
    """When an editor numbered the pasted lines: the number of the first line minus one."""


def clean_lines(text: str) -> list[Line]:
    """All lines of `text`, cleaned (see the module docstring); line numbers count from 1."""
    return list(iter_clean_lines(text.split("\n")))


def iter_clean_lines(raw_lines: Iterable[str], keep: Callable[[str], bool] | None = None) -> Iterator[Line]:
    """Clean lines as they come (a file object works: bounded memory for large logs).

    The first :data:`DETECTION_LINES` non-empty lines are looked at before any is yielded, to
    decide the ambiguous prefix styles for the whole input. With `keep`, only raw lines it
    accepts are cleaned and yielded (numbers still count every line): a fast path for readers
    that look for one marker in large logs.
    """
    iterator = iter(raw_lines)
    window, styles = _window(iterator)
    number = 0
    for raw in window:
        number += 1
        if keep is None or keep(raw):
            yield clean_line(raw, number, styles.srun_labels, styles.host_labels, _numbered_as(number, styles))
    for raw in iterator:
        number += 1
        if keep is None or keep(raw):
            yield clean_line(raw, number, styles.srun_labels, styles.host_labels, _numbered_as(number, styles))


Take = Callable[[list[str], int, int], int]
"""`take(batch, start, before)`: a reader reads what it can of `batch[start:]` itself, in order (`before`: how many
lines came before `batch[0]`), and returns the index of the first line it leaves to the cleaner, or `len(batch)`."""


def iter_clean_batches(batches: Iterable[list[str]], take: Take) -> Iterator[Line]:
    """:func:`iter_clean_lines` over lists of raw lines (a large log read in chunks): `take` goes through each list
    in one call and hands over only the lines that need cleaning, one at a time, so the order of lines holds."""
    iterator = iter(batches)
    head: list[list[str]] = []

    def head_lines() -> Iterator[str]:
        for batch in iterator:
            head.append(batch)
            yield from batch

    styles = _window(head_lines())[1]
    before = 0
    for batch in itertools.chain(head, iterator):
        start = 0
        while (start := take(batch, start, before)) < len(batch):
            number = before + start + 1
            yield clean_line(batch[start], number, styles.srun_labels, styles.host_labels, _numbered_as(number, styles))
            start += 1
        before += len(batch)


def _window(iterator: Iterator[str]) -> tuple[list[str], _Styles]:
    """The first lines of `iterator`, up to its :data:`DETECTION_LINES`-th non-empty one, and the styles they show."""
    window: list[str] = []
    non_empty = 0
    for raw in iterator:
        window.append(raw)
        if raw.strip():
            non_empty += 1
            if non_empty >= DETECTION_LINES:
                break
    return window, _detect_styles(window)


def _numbered_as(number: int, styles: _Styles) -> int | None:
    return None if styles.line_number_offset is None else number + styles.line_number_offset


def _line_number_offset(visible_lines: list[str]) -> int | None:
    """The offset of an editor's line numbering that most lines carry, or None.

    Rows of a matrix also count up line by line (`0 ...`, `1 ...`), so numbering needs a majority of
    the non-empty lines, and numbered lines that are blank or hold text (not a number or `N/A`, as a
    matrix row does): at least two, and a tenth of them.
    """
    offsets: dict[int, list[str]] = {}
    non_empty = 0
    for index, visible in enumerate(visible_lines, start=1):
        if not visible.strip():
            continue
        non_empty += 1
        match = _LINE_NUMBER.match(visible)
        if match is None:
            visible = _strip_unambiguous(visible)[0]
            match = _LINE_NUMBER.match(visible)
        if match is not None:
            offsets.setdefault(int(match.group("number")) - index, []).append(visible[match.end():])
    if not offsets:
        return None
    offset, rests = max(offsets.items(), key=lambda item: len(item[1]))
    textual = sum(1 for rest in rests if not rest.split() or not (rest.split()[0][:1].isdigit() or rest.split()[0] == "N/A"))
    enough = len(rests) >= 3 and len(rests) >= _MAJORITY * non_empty
    return offset if enough and textual >= max(2, len(rests) // 10) else None


def _detect_styles(raw_lines: list[str]) -> _Styles:
    srun = host = total = 0
    remainders: list[str] = []
    for raw in raw_lines:
        line = _strip_unambiguous(_visible(raw))[0]
        if not line.strip():
            remainders.append("")
            continue
        total += 1
        seen_srun = seen_host = False
        for _ in range(2):
            srun_match = None if seen_srun else _SRUN_LABEL.match(line)
            host_match = None if seen_host or srun_match else _HOST_LABEL.match(line)
            match = srun_match or host_match
            if match is None:
                break
            seen_srun, seen_host = seen_srun or srun_match is not None, seen_host or host_match is not None
            line = _strip_unambiguous(line[match.end():])[0]
        srun += seen_srun
        host += seen_host
        remainders.append(line)
    srun_labels = total > 0 and srun >= _MAJORITY * total
    host_labels = total > 0 and host >= _MAJORITY * total
    if srun_labels or host_labels:
        remainders = [line if line.strip() else "" for line in remainders]
    else:
        remainders = [_visible(raw) for raw in raw_lines]
    return _Styles(srun_labels, host_labels, _line_number_offset(remainders))


def clean_line(raw: str, number: int, srun_labels: bool = False, host_labels: bool = False,
               numbered_as: int | None = None) -> Line:
    """One raw line cleaned; `srun_labels`/`host_labels` say whether those ambiguous styles are in use,
    `numbered_as` the editor's line number the line carries when the input is numbered."""
    text = _without_repeated_tag(_visible(raw))
    rank: int | None = None
    host: str | None = None
    srun_left, host_left = srun_labels, host_labels
    for _ in range(MAX_STACKED_PREFIXES):
        text, numbered_as = _strip_number(text, numbered_as)
        text, found_rank, found_host = _strip_unambiguous(text)
        text, numbered_as = _strip_number(text, numbered_as)
        rank = rank if found_rank is None else found_rank
        host = host if found_host is None else found_host
        srun_match = _SRUN_LABEL.match(text) if srun_left else None
        host_match = _HOST_LABEL.match(text) if host_left and srun_match is None else None
        if srun_match is not None:
            srun_left = False
            rank = rank if rank is not None else int(srun_match.group("rank"))
            text = text[srun_match.end():]
        elif host_match is not None:
            host_left = False
            host = host if host is not None else host_match.group("host")
            text = text[host_match.end():]
        else:
            break
    if _FENCE.fullmatch(text):
        text = ""  # a fence inside a quote or under a prefix
    return Line(number=number, text=text.rstrip(), rank=rank, host=host)


_MPICH_REPEAT = re.compile(r"(?<=[0-9])\[(?P<rank>\d{1,7})\](?=[ \t])")
"""MPICH's `[3]` again behind a number inside a row (`-1[0]    1626.5`)."""


def _without_repeated_tag(text: str) -> str:
    """Open MPI (`--tag-output`) and MPICH (`-prepend-rank`) tag every write of a process, and nccl-tests writes a
    row in pieces, so a row can carry its own tag again mid-line (`... sum  -1[1,0]<stdout>:    85.14 ...`,
    `... sum  -1[0]    1626.5 ...`): the repeats of the line's own tag go (another rank's tag mid-line is two
    processes' output fused, and stays for the readers to refuse; NCCL's own lines, whose `0[0] -> 1[1]` brackets
    look alike, are left as they are)."""
    if "]<std" not in text:
        mpich = _MPICH_RANK.match(text)
        if mpich is None or "NCCL" in text or "[" not in text[mpich.end():]:
            return text
        own = mpich.group("rank")
        return text[:mpich.end()] + _MPICH_REPEAT.sub(
            lambda found: " " if found.group("rank") == own else found.group(0), text[mpich.end():])
    tag = _OPEN_MPI.search(text)
    if tag is None or text.count(tag.group(0)) < 2:
        return text
    rest = text[tag.end():]
    while rest.startswith(tag.group(0)):  # the same tag stacked in front: one of them is enough
        rest = rest[len(tag.group(0)):]
    return text[:tag.end()] + rest.replace(tag.group(0), " ")


def _strip_number(text: str, numbered_as: int | None) -> tuple[str, int | None]:
    """`text` without the editor's line number `numbered_as` in front (then None: it is removed once)."""
    if numbered_as is None or (numbered := _LINE_NUMBER.match(text)) is None or int(numbered.group("number")) != numbered_as:
        return text, numbered_as
    return text[numbered.end():], None


def _visible(raw: str) -> str:
    """What a terminal would show of `raw`: escapes removed, the last carriage-return overwrite kept."""
    text = strip_escapes(raw.rstrip("\r\n"))
    if "\r" in text:
        segments = [segment for segment in text.split("\r") if segment.strip()]
        text = segments[-1] if segments else ""
    if _FENCE.fullmatch(text):
        return ""
    return text


def _strip_unambiguous(text: str) -> tuple[str, int | None, str | None]:
    """Remove stacked unambiguous prefixes from the start of `text`; the innermost rank/host named wins."""
    rank: int | None = None
    host: str | None = None
    for _ in range(MAX_STACKED_PREFIXES):
        if not text or text[0] not in "[(0123456789>":
            break
        first = text[0]
        match: re.Match[str] | None = None
        if first == "[":
            match = (_OPEN_MPI.match(text) or _TORCHRUN.match(text) or _MPICH_RANK.match(text)
                     or _BRACKETED_TIME.match(text) or _KUBECTL.match(text))
            if match is not None and match.re is _KUBECTL:
                host = match.group("host")
            elif match is not None and "rank" in match.re.groupindex:
                rank = int(match.group("rank"))
        elif first == "(":
            match = _RAY.match(text)
            if match is not None:
                rank, ray_host = _ray_fields(match.group("inner"))
                host = ray_host if ray_host is not None else host
        elif first == ">":
            match = _QUOTE.match(text)
        else:
            match = _TIMESTAMP.match(text)
        if match is None or match.end() == 0:
            break
        text = text[match.end():]
    return text, rank, host


_RAY_RANK = re.compile(r"\brank=(\d{1,9})\b")
_RAY_IP = re.compile(r"\bip=([\w.:-]{1,64})")


def _ray_fields(inner: str) -> tuple[int | None, str | None]:
    """Rank and host from a Ray/SkyPilot prefix `(head, rank=0, pid=3808)` or `(Worker pid=12, ip=10.0.0.2)`."""
    rank_match = _RAY_RANK.search(inner)
    ip_match = _RAY_IP.search(inner)
    first = inner.split(",", 1)[0].strip()
    host = ip_match.group(1) if ip_match else (first if first and "=" not in first and " " not in first else None)
    return (int(rank_match.group(1)) if rank_match else None), host
