"""Explicit rank maps: which host and GPU every rank runs on, from the files launchers use.

Formats (detected from the content):
- CSV `rank,host,gpu` (header optional, `#` comments);
- JSON: a list of `{"rank": 0, "host": "node1", "gpu": 0}` objects (or `{"ranks": [...]}`);
- DeepSpeed hostfile: `worker-1 slots=4` per line; ranks fill hosts in order, GPU = local slot;
- Slurm: `SLURM_JOB_NODELIST=gpu[001-004,010]` with optional `SLURM_TASKS_PER_NODE=2(x3),1` and
  `SLURM_DISTRIBUTION=cyclic` lines (or a bare hostlist line); local task i runs on GPU i.
"""

from __future__ import annotations

import json
import re
from typing import Any

from topo.errors import InputError
from topo.placement import RankMapEntry

_BRACKET = re.compile(r"\[([^\]]*)\]")
_TASKS = re.compile(r"\s*(\d+)(?:\(x(\d+)\))?\s*\Z")
_HOSTFILE_LINE = re.compile(r"^(\S+)\s+slots\s*=\s*(\d+)\s*$")


def expand_hostlist(text: str, field: str = "hostlist") -> list[str]:
    """Expand a Slurm hostlist (`gpu[001-004,010]`, `a,b[1-2]`, `r[1-2]-n[1-2]`) into host names."""
    hosts: list[str] = []
    for item in _split_top_level(text.strip(), field):
        hosts.extend(_expand_item(item, field))
    if not hosts:
        raise InputError(f"{field}: empty hostlist")
    return hosts


def _split_top_level(text: str, field: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"{field}: unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise InputError(f"{field}: unbalanced '[' in {text!r}")
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, field: str) -> list[str]:
    match = _BRACKET.search(item)
    if match is None:
        return [item]
    prefix, suffix = item[: match.start()], item[match.end() :]
    names: list[str] = []
    for part in match.group(1).split(","):
        start_text, dash, end_text = part.strip().partition("-")
        if not start_text.isdigit() or (dash and not end_text.isdigit()):
            raise InputError(f"{field}: {part!r} in {item!r} is not a number or range")
        start, end = int(start_text), int(end_text) if dash else int(start_text)
        if end < start:
            raise InputError(f"{field}: range {part!r} in {item!r} runs backwards")
        if end - start > 100000:
            raise InputError(f"{field}: range {part!r} in {item!r} is too large")
        width = len(start_text)
        names.extend(f"{prefix}{number:0{width}d}" for number in range(start, end + 1))
    return [expanded for name in names for expanded in _expand_item(name + suffix, field)]


def parse_tasks_per_node(text: str, field: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Expand `2(x3),1` into [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = _TASKS.match(part)
        if match is None:
            raise InputError(f"{field}: {part.strip()!r} is not COUNT or COUNT(xREPEAT) (example: 2(x3),1)")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def read_rank_map(text: str, name: str, default_slots: int) -> tuple[RankMapEntry, ...]:
    """Parse a rank-map file of any supported format; `default_slots` is the GPUs per host when unsaid."""
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
        return _from_hosts(expand_hostlist(lines[0][1], f"{name}: line {lines[0][0]}"), [default_slots], "block")
    number, line = next((number, line) for number, line in lines if "," not in line and not _HOSTFILE_LINE.match(line))
    raise InputError(f"{name}: line {number}: {line[:60]!r} is not `rank,host,gpu`, `HOST slots=N` or a Slurm hostlist")


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
        if not rank.isdigit() or not gpu.isdigit() or not host:
            raise InputError(f"{name}: line {number}: expected rank,host,gpu with whole numbers, got {line[:60]!r}")
        entries.append(RankMapEntry(int(rank), host, int(gpu)))
    return _unique(entries, name)


def _read_json(text: str, name: str) -> tuple[RankMapEntry, ...]:
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: line {exc.lineno}: not JSON ({exc.msg})") from None
    if isinstance(data, dict):
        data = data.get("ranks")
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a list of {{rank, host, gpu}} objects (or {{\"ranks\": [...]}})")
    entries = []
    for index, item in enumerate(data):
        where = f"{name}: $[{index}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object with rank, host, gpu")
        rank, host, gpu = item.get("rank"), item.get("host"), item.get("gpu")
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise InputError(f"{where}.rank: expected a whole number >= 0, got {rank!r}")
        if not isinstance(host, str) or not host:
            raise InputError(f"{where}.host: expected a host name, got {host!r}")
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            raise InputError(f"{where}.gpu: expected a whole number >= 0, got {gpu!r}")
        entries.append(RankMapEntry(rank, host, gpu))
    return _unique(entries, name)


def _read_hostfile(lines: list[tuple[int, str]], name: str) -> tuple[RankMapEntry, ...]:
    hosts, slots = [], []
    for number, line in lines:
        match = _HOSTFILE_LINE.match(line)
        assert match is not None
        if int(match.group(2)) < 1:
            raise InputError(f"{name}: line {number}: slots must be at least 1")
        if match.group(1) in hosts:
            raise InputError(f"{name}: line {number}: host {match.group(1)!r} is listed twice")
        hosts.append(match.group(1))
        slots.append(int(match.group(2)))
    return _from_hosts(hosts, slots, "block")


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
    return _from_hosts(hosts, slots, distribution)


def _from_hosts(hosts: list[str], slots: list[int], distribution: str) -> tuple[RankMapEntry, ...]:
    """Ranks over hosts with per-host task counts (one count for all when `slots` has one entry)."""
    counts = slots if len(slots) == len(hosts) else [slots[0]] * len(hosts)
    entries: list[RankMapEntry] = []
    if distribution == "block":
        for host, count in zip(hosts, counts, strict=True):
            base = len(entries)
            entries.extend([RankMapEntry(base + local, host, local) for local in range(count)])
        return tuple(entries)
    local = 0
    while len(entries) < sum(counts):
        for host, count in zip(hosts, counts, strict=True):
            if local < count:
                entries.append(RankMapEntry(len(entries), host, local))
        local += 1
    return tuple(entries)


def _unique(entries: list[RankMapEntry], name: str) -> tuple[RankMapEntry, ...]:
    seen: set[int] = set()
    for entry in entries:
        if entry.rank in seen:
            raise InputError(f"{name}: rank {entry.rank} appears twice")
        seen.add(entry.rank)
    return tuple(entries)
