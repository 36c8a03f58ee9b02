"""Explicit rank maps: which host and GPU every rank runs on, from the files launchers use.

Formats (detected from the content):
- CSV `rank,host,gpu` (header optional, `#` comments);
- JSON: a list of `{"rank": 0, "host": "node1", "gpu": 0}` objects (or `{"ranks": [...]}`);
- DeepSpeed hostfile: `worker-1 slots=4` per line; ranks fill hosts in order, GPU = local slot;
- Slurm: `SLURM_JOB_NODELIST=gpu[001-004,010]` with optional `SLURM_TASKS_PER_NODE=2(x3),1` and
  `SLURM_DISTRIBUTION=cyclic` lines (or a bare hostlist line); local task i runs on GPU i.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import read_json
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST, MAX_HOSTLIST_CHARS, MAX_HOSTS, MAX_WORLD_RANKS, check_cap
from linkscope.topo.common.numbers import is_integer, parse_int
from linkscope.topo.common.text import printable
from linkscope.topo.layout.placement import RankMapEntry

_BRACKET = re.compile(r"\[([^\]]*)\]")
_TASKS = re.compile(r"[ \t]*([0-9]{1,18})(?:\(x([0-9]{1,18})\))?[ \t]*\Z")
_HOSTFILE_LINE = re.compile(r"^(\S+)[ \t]+slots[ \t]*=[ \t]*([0-9]{1,18})[ \t]*$")


def expand_hostlist(text: str, field: str = "hostlist") -> list[str]:
    """Expand a Slurm hostlist (`gpu[001-004,010]`, `a,b[1-2]`, `r[1-2]-n[1-2]`) into host names.

    The number of names is computed first (a product of range lengths per item), so a list past
    MAX_HOSTS is refused before anything is expanded."""
    check_cap(len(text), MAX_HOSTLIST_CHARS, "hostlist characters", field)
    items = _split_top_level(text.strip(), field)
    total = 0
    for item in items:
        total += _name_count(item, field)
        check_cap(total, MAX_HOSTS, "hosts named by the hostlist", field)
    hosts: list[str] = []
    for item in items:
        hosts.extend(_expand_item(item, field))
    if not hosts:
        raise InputError(f"{field}: empty hostlist")
    return hosts


def _ranges(body: str, item: str, field: str) -> list[tuple[int, int, int]]:
    """(start, end, zero-padded width) of each `N` or `N-M` in a bracket's `body`."""
    ranges = []
    for part in body.split(","):
        start_text, dash, end_text = part.strip().partition("-")
        where = f"{field}: {printable(part[:40])!r} in the hostlist"
        if not _is_index(start_text) or (dash and not _is_index(end_text)):
            raise InputError(f"{where} is not a number or range")
        start = parse_int(start_text, where, 0)
        end = parse_int(end_text, where, 0) if dash else start
        if end < start:
            raise InputError(f"{field}: range {part!r} in {printable(item[:60])!r} runs backwards")
        ranges.append((start, end, len(start_text)))
    return ranges


def _is_index(text: str) -> bool:
    return is_integer(text) and not text.startswith(("+", "-"))


def _name_count(item: str, field: str) -> int:
    """How many names `item` expands to: the product over its brackets of their range lengths."""
    count = 1
    for match in _BRACKET.finditer(item):
        count *= sum(end - start + 1 for start, end, _ in _ranges(match.group(1), item, field))
        if count > MAX_HOSTS:
            check_cap(count, MAX_HOSTS, "hosts named by the hostlist", field)
    return count


def _split_top_level(text: str, field: str) -> list[str]:
    items: list[str] = []
    depth, start = 0, 0
    for position, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"{field}: unbalanced ']' in {printable(text[:60])!r}")
        elif char == "," and depth == 0:
            items.append(text[start:position])
            start = position + 1
    if depth != 0:
        raise InputError(f"{field}: unbalanced '[' in {printable(text[:60])!r}")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, field: str) -> list[str]:
    """The names of one hostlist item, brackets expanded left to right (no recursion: an item may
    hold thousands of brackets)."""
    segments: list[list[str]] = []
    position = 0
    for match in _BRACKET.finditer(item):
        segments.append([item[position : match.start()]])
        segments.append([f"{number:0{width}d}" for start, end, width in _ranges(match.group(1), item, field)
                         for number in range(start, end + 1)])
        position = match.end()
    segments.append([item[position:]])
    return ["".join(parts) for parts in itertools.product(*segments)]


def parse_tasks_per_node(text: str, field: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Expand `2(x3),1` into [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = _TASKS.match(part)
        if match is None:
            raise InputError(f"{field}: {printable(part.strip()[:40])!r} is not COUNT or COUNT(xREPEAT) (example: 2(x3),1)")
        count = parse_int(match.group(1), f"{field}: task count", 0, MAX_GPUS_PER_HOST)
        repeat = int(match.group(2) or 1)
        check_cap(len(counts) + repeat, MAX_HOSTS, "nodes in SLURM_TASKS_PER_NODE", field)
        counts.extend([count] * repeat)
    return counts


def read_rank_map(text: str, name: str, default_slots: int) -> tuple[RankMapEntry, ...]:
    """Parse a rank-map file of any supported format; `default_slots` is the GPUs per host when unsaid."""
    entries = _read_any(text, name, default_slots)
    if not entries:
        raise InputError(f"{name}: the rank map names no ranks")
    return entries


def _read_any(text: str, name: str, default_slots: int) -> tuple[RankMapEntry, ...]:
    stripped = text.strip()
    if not stripped:
        raise InputError(f"{name}: empty rank map")
    if stripped[0] in "[{":
        return _read_json(stripped, name)
    lines = [(number, line.split("#", 1)[0].strip()) for number, line in enumerate(text.splitlines(), 1)]
    lines = [(number, line) for number, line in lines if line]
    if any("SLURM_" in line for _, line in lines):
        return _read_slurm(lines, name, default_slots)
    if all(_HOSTFILE_LINE.match(line) for _, line in lines):
        return _read_hostfile(lines, name)
    if all("," in line for _, line in lines):
        return _read_csv(lines, name)
    if len(lines) == 1:
        return _from_hosts(expand_hostlist(lines[0][1], f"{name}: line {lines[0][0]}"), [default_slots], "block", name)
    csv_like = "," in lines[0][1]  # the first line decides the format the others break
    number, line = next(((number, line) for number, line in lines
                         if ("," in line) != csv_like or not (csv_like or _HOSTFILE_LINE.match(line))), lines[0])
    raise InputError(f"{name}: line {number}: {printable(line[:60])!r} is not `rank,host,gpu`, `HOST slots=N` "
                     "or a Slurm hostlist")


def _read_csv(lines: list[tuple[int, str]], name: str) -> tuple[RankMapEntry, ...]:
    entries = []
    first = lines[0][1]
    if [cell.strip().lower() for cell in first.split(",")] == ["rank", "host", "gpu"]:
        lines = lines[1:]
    for number, line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 3:
            raise InputError(f"{name}: line {number}: expected 3 fields rank,host,gpu, got {len(cells)}")
        rank, host, gpu = cells
        if not _is_index(rank) or not _is_index(gpu) or not host:
            raise InputError(f"{name}: line {number}: expected rank,host,gpu with whole numbers, got {printable(line[:60])!r}")
        where = f"{name}: line {number}:"
        entries.append(RankMapEntry(parse_int(rank, f"{where} rank", 0, MAX_WORLD_RANKS - 1), host,
                                    parse_int(gpu, f"{where} gpu", 0, MAX_GPUS_PER_HOST - 1)))
    return _unique(entries, name)


def _read_json(text: str, name: str) -> tuple[RankMapEntry, ...]:
    data: Any = read_json(text, name)
    if isinstance(data, dict):
        data = data.get("ranks")
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a list of {{rank, host, gpu}} objects (or {{\"ranks\": [...]}})")
    check_cap(len(data), MAX_WORLD_RANKS, "ranks in the rank map", name)
    entries = []
    for index, item in enumerate(data):
        where = f"{name}: $[{index}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object with rank, host, gpu")
        rank, host, gpu = item.get("rank"), item.get("host"), item.get("gpu")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < MAX_WORLD_RANKS:
            raise InputError(f"{where}.rank: expected a whole number from 0 to {MAX_WORLD_RANKS - 1}, got {rank!r}")
        if not isinstance(host, str) or not host:
            raise InputError(f"{where}.host: expected a host name, got {host!r}")
        if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < MAX_GPUS_PER_HOST:
            raise InputError(f"{where}.gpu: expected a whole number from 0 to {MAX_GPUS_PER_HOST - 1}, got {gpu!r}")
        entries.append(RankMapEntry(rank, host, gpu))
    return _unique(entries, name)


def _read_hostfile(lines: list[tuple[int, str]], name: str) -> tuple[RankMapEntry, ...]:
    hosts: list[str] = []
    slots: list[int] = []
    seen: set[str] = set()
    for number, line in lines:
        match = _HOSTFILE_LINE.match(line)
        assert match is not None
        if int(match.group(2)) < 1:
            raise InputError(f"{name}: line {number}: slots must be at least 1")
        if match.group(1) in seen:
            raise InputError(f"{name}: line {number}: host {printable(match.group(1))!r} is listed twice")
        seen.add(match.group(1))
        hosts.append(match.group(1))
        slots.append(parse_int(match.group(2), f"{name}: line {number}: slots", 1, MAX_GPUS_PER_HOST))
    check_cap(len(hosts), MAX_HOSTS, "hosts in the hostfile", name)
    return _from_hosts(hosts, slots, "block", name)


def _read_slurm(lines: list[tuple[int, str]], name: str, default_slots: int) -> tuple[RankMapEntry, ...]:
    values: dict[str, tuple[int, str]] = {}
    for number, line in lines:
        key, sep, value = line.removeprefix("export ").partition("=")
        if not sep:
            raise InputError(f"{name}: line {number}: expected KEY=VALUE, got {line[:60]!r}")
        values[key.strip()] = (number, value.strip().strip("'\""))
    nodelist = values.get("SLURM_JOB_NODELIST") or values.get("SLURM_NODELIST")
    if nodelist is None:
        raise InputError(f"{name}: no SLURM_JOB_NODELIST line")
    hosts = expand_hostlist(nodelist[1], f"{name}: line {nodelist[0]}")
    slots = [default_slots]
    if "SLURM_TASKS_PER_NODE" in values:
        number, text = values["SLURM_TASKS_PER_NODE"]
        slots = parse_tasks_per_node(text, f"{name}: line {number}: SLURM_TASKS_PER_NODE")
        if len(slots) != len(hosts):
            raise InputError(
                f"{name}: line {number}: SLURM_TASKS_PER_NODE covers {len(slots)} nodes, the nodelist has {len(hosts)}"
            )
    distribution = "block"
    if "SLURM_DISTRIBUTION" in values:
        number, text = values["SLURM_DISTRIBUTION"]
        distribution = text.split(":")[0].lower()
        if distribution not in ("block", "cyclic"):
            raise InputError(f"{name}: line {number}: SLURM_DISTRIBUTION {text!r} is not block or cyclic")
    return _from_hosts(hosts, slots, distribution, name)


def _from_hosts(hosts: list[str], slots: list[int], distribution: str, name: str) -> tuple[RankMapEntry, ...]:
    """Ranks over hosts with per-host task counts (one count for all when `slots` has one entry);
    linear in the number of ranks, which is checked against MAX_WORLD_RANKS first."""
    counts = slots if len(slots) == len(hosts) else [slots[0]] * len(hosts)
    check_cap(sum(counts), MAX_WORLD_RANKS, "ranks in the rank map", name)
    entries: list[RankMapEntry] = []
    if distribution == "block":
        for host, count in zip(hosts, counts, strict=True):
            base = len(entries)
            entries.extend([RankMapEntry(base + local, host, local) for local in range(count)])
        return tuple(entries)
    active = list(range(len(hosts)))
    local = 0
    while active:
        active = [index for index in active if counts[index] > local]
        base = len(entries)
        entries.extend(RankMapEntry(base + offset, hosts[index], local) for offset, index in enumerate(active))
        local += 1
    return tuple(entries)


def _unique(entries: list[RankMapEntry], name: str) -> tuple[RankMapEntry, ...]:
    seen: set[int] = set()
    for entry in entries:
        if entry.rank in seen:
            raise InputError(f"{name}: rank {entry.rank} appears twice")
        seen.add(entry.rank)
    return tuple(entries)
