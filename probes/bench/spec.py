"""What a collective benchmark run is asked to do, shared by the command line, the spawner and
the worker (also when the worker runs under torchrun), so the options are parsed in one place.

No torch here: the command line builds and checks a spec before any worker starts.
"""

from __future__ import annotations

import argparse

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_SIZE_STEPS
from linkscope.topo.common.numbers import comma_items, whole_number
from linkscope.topo.common.sizes import geometric_sizes, parse_size_bytes
from linkscope.topo.layout.groups import build_groups
from linkscope.topo.layout.spec import DIMENSIONS, parse_sizes, resolve_layout
from linkscope.topo.model.busbw import BUS_FACTOR_OPS, PRICED_OPS

DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}



@frozen
class GroupSpec:
    """One process group the op runs in: a label (`world`, `tp0`...), its dimension and global ranks."""

    label: str
    dim: str
    ranks: tuple[int, ...]


@frozen
class CollectiveSpec:
    """A collective sweep: ops x sizes, run concurrently in every group of each dimension."""

    ops: tuple[str, ...]
    sizes_bytes: tuple[int, ...]
    dtype: str
    warmup: int
    iters: int
    backend: str
    world_size: int
    dims: tuple[tuple[str, tuple[GroupSpec, ...]], ...]
    """Per dimension (run one after another), the groups that run at the same time."""
    check: bool = True
    """Run the correctness pass (the `wrong` column)."""

    @property
    def steps(self) -> int:
        """Number of (dimension, op, size) rows rank 0 reports progress for."""
        return len(self.dims) * len(self.ops) * len(self.sizes_bytes)


def size_sweep(min_bytes: int, max_bytes: int, factor: int) -> tuple[int, ...]:
    """nccl-tests' sweep: min, min*factor, ... while not above max (always at least `min`)."""
    if min_bytes < 1:
        raise InputError(f"--min-bytes: must be at least 1, got {min_bytes}")
    if max_bytes < min_bytes:
        raise InputError(f"--max-bytes {max_bytes} is smaller than --min-bytes {min_bytes}")
    if factor < 2:
        raise InputError(f"--factor: must be at least 2, got {factor}")
    sizes = geometric_sizes(min_bytes, max_bytes, factor, MAX_SIZE_STEPS)
    if len(sizes) > MAX_SIZE_STEPS:
        raise InputError(f"--min-bytes/--max-bytes/--factor give more than {MAX_SIZE_STEPS} sizes")
    return tuple(sizes)


def parse_ops(text: str) -> tuple[str, ...]:
    """Split `all_reduce,all_gather` into op names; InputError naming an unknown one."""
    ops = comma_items(text, "--ops")
    for op in ops:
        if op not in PRICED_OPS:
            hint = " (reduce is not benchmarked; use all_reduce)" if op in BUS_FACTOR_OPS else ""
            raise InputError(f"--ops: unknown collective {op!r}{hint} (known: {', '.join(PRICED_OPS)})")
    return ops


def layout_groups(layout_text: str | None, world_size: int) -> tuple[tuple[str, tuple[GroupSpec, ...]], ...]:
    """The groups to run in: the whole world, or every dimension larger than 1 of `--layout`."""
    if not layout_text:
        return (("world", (GroupSpec("world", "world", tuple(range(world_size))),)),)
    sizes = parse_sizes(layout_text, "--layout")
    named = layout_world_size(layout_text)
    if world_size % named:
        raise InputError(f"--layout {layout_text}: its sizes multiply to {named}, which does not divide the "
                         f"{world_size} processes (--nproc)")
    try:
        layout = resolve_layout(sizes, capacity=world_size)
    except InputError as exc:
        raise InputError(f"--layout {layout_text} on {world_size} processes: {exc}") from None
    if layout.world_size != world_size:
        raise InputError(f"--layout {layout_text}: covers {layout.world_size} ranks, but --nproc is {world_size}")
    dims = []
    for dim, groups in build_groups(layout).items():
        if dim in DIMENSIONS and layout.size(dim) > 1:
            specs = tuple(GroupSpec(f"{dim}{index}", dim, tuple(ranks)) for index, ranks in enumerate(groups))
            dims.append((dim, specs))
    if not dims:
        raise InputError(f"--layout {layout_text}: every dimension has size 1, so there is no group to run in")
    return tuple(dims)


def layout_world_size(layout_text: str) -> int:
    """The number of ranks `--layout` names (the product of its sizes)."""
    size = 1
    for _, value in parse_sizes(layout_text, "--layout"):
        size *= value
    return size


def add_collective_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep options shared by `linkscope bench collectives` and the torchrun worker."""
    parser.add_argument("--ops", default=",".join(PRICED_OPS), metavar="OPS",
                        help="comma-separated collectives (default: all six)")
    parser.add_argument("--min-bytes", default="8", metavar="SIZE",
                        help="smallest size, nccl-tests style: 8, 64K, 1M (default 8)")
    parser.add_argument("--max-bytes", default=None, metavar="SIZE", help="largest size (default 1G with nccl, 16M with gloo)")
    parser.add_argument("--factor", type=whole_number(0), default=2, metavar="N",
                        help="size multiplier between steps (default 2)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="element type (default float32)")
    parser.add_argument("--warmup", type=whole_number(0), default=5, metavar="N", help="untimed iterations per size (default 5)")
    parser.add_argument("--iters", type=whole_number(0), default=20, metavar="N",
                        help="timed iterations per size, one sync at the end (default 20)")
    parser.add_argument("--layout", default=None, metavar="LAYOUT", help="run in every group of a layout at once, e.g. tp=4,dp=2")
    parser.add_argument("--no-check", action="store_true", help="skip the correctness pass (wrong = null)")


def check_sweep_flags(args: argparse.Namespace) -> None:
    """The sweep options that need no backend or process count; InputError on a bad value."""
    if args.warmup < 0:
        raise InputError(f"--warmup: must be 0 or more, got {args.warmup}")
    if args.iters < 1:
        raise InputError(f"--iters: must be at least 1, got {args.iters}")
    parse_ops(args.ops)
    min_bytes = parse_size_bytes(args.min_bytes, "--min-bytes")
    if args.max_bytes is not None:
        size_sweep(min_bytes, parse_size_bytes(args.max_bytes, "--max-bytes"), args.factor)
    if args.layout is not None:
        layout_world_size(args.layout)


def spec_from_args(args: argparse.Namespace, backend: str, world_size: int) -> CollectiveSpec:
    """Build and check a spec from parsed options; InputError on a bad value."""
    check_sweep_flags(args)
    max_text = args.max_bytes or ("1G" if backend == "nccl" else "16M")
    sizes = size_sweep(parse_size_bytes(args.min_bytes, "--min-bytes"), parse_size_bytes(max_text, "--max-bytes"), args.factor)
    return CollectiveSpec(
        ops=parse_ops(args.ops),
        sizes_bytes=sizes,
        dtype=args.dtype,
        warmup=args.warmup,
        iters=args.iters,
        backend=backend,
        world_size=world_size,
        dims=layout_groups(args.layout, world_size),
        check=not args.no_check,
    )


BUFFER_COPIES = 3
"""A collective case holds about three buffers of its size (send, receive, the expected result)."""
FREE_MEMORY_SHARE = 0.8
"""Share of the free memory a sweep may use (the rest stays for NCCL, the allocator, other programs)."""


def sizes_that_fit(sizes_bytes: list[int], free_bytes: int, memory: str = "GPU") -> tuple[list[int], str | None]:
    """Drop the sizes whose buffers would not fit in FREE_MEMORY_SHARE of `free_bytes` (of `memory`,
    GPU or host); a note when any was dropped."""
    budget_bytes = int(FREE_MEMORY_SHARE * free_bytes / BUFFER_COPIES)
    kept = [size for size in sizes_bytes if size <= budget_bytes]
    if len(kept) == len(sizes_bytes):
        return sizes_bytes, None
    return kept, f"sizes above {budget_bytes} B skipped: not enough free {memory} memory for their buffers"


PER_RANK_OPS: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_to_all")
"""Ops whose size is split over the ranks (each rank sends or receives size / n)."""
PER_RANK_ALIGN_BYTES = 16
"""nccl-tests rounds each rank's share of a split op down to a multiple of 16 bytes."""


def op_elements(op: str, size_bytes: int, dtype: str, nranks: int) -> int:
    """Elements of one rank's share for split ops (PER_RANK_OPS), of the whole buffer for the others,
    rounded as nccl-tests rounds them; 0 when the size is too small for one."""
    element_bytes = DTYPE_BYTES[dtype]
    if op not in PER_RANK_OPS:
        return size_bytes // element_bytes
    align = PER_RANK_ALIGN_BYTES // element_bytes
    return size_bytes // element_bytes // nranks // align * align
