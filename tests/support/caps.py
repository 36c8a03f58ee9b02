"""Inputs exactly at each cap of topo/common/limits.py (and one past it), shared by the caps tests and
benchmarks/bench_caps.py (which times the largest accepted input of each)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from linkscope.topo.common.limits import MAX_GPUS_PER_HOST, MAX_HOSTS, MAX_SIZE_BYTES, MAX_WORLD_RANKS


@dataclass(frozen=True)
class CapCase:
    """One cap: `call(n)` reads an input of size n; it must accept `cap` and refuse `cap + 1`."""

    name: str
    cap: int
    call: Callable[[int], Any]


def _hostlist(count: int) -> Any:
    from linkscope.topo.formats.rankmap import expand_hostlist

    return expand_hostlist(f"node[0-{count - 1}]")


def _hostlist_product(count: int) -> Any:
    """`r[0-a]n[0-b]`: the product of two ranges, the shape that named 10^10 hosts."""
    from linkscope.topo.formats.rankmap import expand_hostlist

    half = 256
    assert count % half in (0, 1)
    extra = ",spare" if count % half else ""
    return expand_hostlist(f"r[0-{count // half - 1}]n[0-{half - 1}]{extra}")


def _slurm_tasks(count: int) -> Any:
    from linkscope.topo.formats.rankmap import parse_tasks_per_node

    return parse_tasks_per_node(f"8(x{count})")


def _hostfile_slots(slots: int) -> Any:
    from linkscope.topo.formats.rankmap import read_rank_map

    return read_rank_map(f"node0 slots={slots}\n", "hostfile", 8)


def _world_from_hostfile(ranks: int) -> Any:
    """A DeepSpeed hostfile of 1,024-slot hosts naming `ranks` ranks in all."""
    from linkscope.topo.formats.rankmap import read_rank_map

    hosts, rest = divmod(ranks, MAX_GPUS_PER_HOST)
    lines = [f"node{index} slots={MAX_GPUS_PER_HOST}" for index in range(hosts)]
    if rest:
        lines.append(f"node{hosts} slots={rest}")
    return read_rank_map("\n".join(lines) + "\n", "hostfile", 8)


def _nranks(count: int) -> Any:
    from linkscope.topo.model.measurements import CollectiveResult, Measurements
    from linkscope.topo.model.validate import validate_measurements

    row = CollectiveResult("all_reduce", 1024, "float", 10.0, 0.1, 0.1, count)
    return validate_measurements(Measurements("test", collectives=(row,)))


def _size_bytes(size: int) -> Any:
    from linkscope.topo.common.sizes import parse_size_bytes

    return parse_size_bytes(str(size), "--bytes")


def _estimate_ranks(ranks: int) -> Any:
    from linkscope.cli import main

    status = main(["estimate", "all_reduce", "--bytes", "1G", "--ranks", str(ranks), "--nodes", "8", "--json"])
    if status != 0:
        from linkscope.topo.common.errors import InputError

        raise InputError(f"estimate --ranks {ranks}: exit {status}")
    return status


CAP_CASES: tuple[CapCase, ...] = (
    CapCase("hostlist range (hosts)", MAX_HOSTS, _hostlist),
    CapCase("hostlist product r[..]n[..] (hosts)", MAX_HOSTS, _hostlist_product),
    CapCase("SLURM_TASKS_PER_NODE repeat (nodes)", MAX_HOSTS, _slurm_tasks),
    CapCase("hostfile slots (GPUs per host)", MAX_GPUS_PER_HOST, _hostfile_slots),
    CapCase("hostfile world (ranks)", MAX_WORLD_RANKS, _world_from_hostfile),
    CapCase("measurement nranks (ranks)", MAX_WORLD_RANKS, _nranks),
    CapCase("--bytes (bytes)", MAX_SIZE_BYTES, _size_bytes),
    CapCase("estimate --ranks (ranks)", MAX_WORLD_RANKS, _estimate_ranks),
)
"""Every cap applied in the readers this suite owns."""
