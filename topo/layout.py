"""Parallel layout -> process groups, the way Megatron-LM and PyTorch DeviceMesh build them.

Megatron (`--order`, default `tp-cp-ep-dp-pp`): the first dimension varies fastest, so with
tp=2 dp=4 pp=2 on 16 ranks the TP groups are [0,1],[2,3]..., DP [0,2,4,6],[1,3,5,7],[8,...],
PP [0,8],[1,9].... Dense groups (tp, cp, dp, pp) come from the order with ep=1 and
world = tp*cp*dp*pp; expert groups (ep) come from the same order with cp=1 and the expert
data-parallel size world/(tp*ep*pp), as Megatron-Core's second rank generator does.
DeviceMesh (`--mesh dp=4,tp=8`): row-major, the last dimension varies fastest, and every named
dimension is an axis of its own (world = product of all of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from topo.errors import InputError

DIMENSIONS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Parallel dimensions linkscope knows: tensor, context, expert, data and pipeline parallel."""

DIMENSION_NAMES: dict[str, str] = {
    "tp": "tensor parallel",
    "cp": "context parallel",
    "ep": "expert parallel",
    "dp": "data parallel",
    "pp": "pipeline parallel",
}

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's default rank order (first dimension varies fastest)."""


@dataclass(frozen=True)
class Layout:
    """A resolved parallel layout: every dimension's size, the rank order and the world size."""

    sizes: tuple[tuple[str, int], ...]
    """All five dimensions in DIMENSIONS order, with their sizes (1 when unused)."""
    world_size: int
    order: tuple[str, ...] = ()
    """Megatron order, first fastest; empty when `mesh` is used."""
    mesh: tuple[str, ...] = ()
    """DeviceMesh dimension names, outermost first (last varies fastest); empty for an order."""

    def size(self, dim: str) -> int:
        """The size of dimension `dim` (1 when unused)."""
        for name, value in self.sizes:
            if name == dim:
                return value
        raise KeyError(dim)

    @property
    def full_order(self) -> tuple[str, ...]:
        """The order with every dimension, the ones it leaves out (all of size 1) appended."""
        return self.order + tuple(dim for dim in DIMENSIONS if dim not in self.order)

    @property
    def order_string(self) -> str:
        """The order as typed on the command line (`tp-cp-ep-dp-pp`) or the mesh (`dp=4,tp=8`)."""
        if self.mesh:
            return ",".join(f"{name}={self.size(name)}" for name in self.mesh)
        return "-".join(self.order)


def parse_order(text: str) -> tuple[str, ...]:
    """Split an order string `tp-cp-ep-dp-pp` into dimension names; InputError on unknown or repeated names."""
    names = tuple(part.strip().lower() for part in text.split("-"))
    for name in names:
        if name not in DIMENSIONS:
            raise InputError(f"--order: unknown dimension {name!r} in {text!r} (known: {', '.join(DIMENSIONS)})")
    if len(set(names)) != len(names):
        raise InputError(f"--order: a dimension appears twice in {text!r}")
    return names


def parse_mesh(text: str, flag: str = "--mesh") -> tuple[tuple[str, int], ...]:
    """Parse a DeviceMesh shape `dp=4,tp=8` (outermost first); InputError naming `flag` and the bad part."""
    entries: list[tuple[str, int]] = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep:
            raise InputError(f"{flag}: {part.strip()!r} is not NAME=SIZE (example: dp=4,tp=8)")
        if name not in DIMENSIONS:
            raise InputError(f"{flag}: unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
        entries.append((name, parse_positive_int(value.strip(), f"{flag} {name}")))
    names = [name for name, _ in entries]
    if len(set(names)) != len(names):
        raise InputError(f"{flag}: a dimension appears twice in {text!r}")
    return tuple(entries)


def parse_sizes(text: str, flag: str) -> tuple[tuple[str, int], ...]:
    """Parse `tp=8,pp=4` given as `flag` into (name, size) pairs (the syntax of a mesh, order irrelevant)."""
    return parse_mesh(text, flag)


def parse_positive_int(text: str, field: str) -> int:
    """`text` as a whole number >= 1; InputError naming `field` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{field}: {text!r} is not a whole number") from None
    if value < 1:
        raise InputError(f"{field}: must be at least 1, got {value}")
    return value


def resolve_layout(
    sizes: Sequence[tuple[str, int]],
    capacity: int,
    order: str = DEFAULT_ORDER,
    mesh: Sequence[tuple[str, int]] | None = None,
) -> Layout:
    """Resolve sizes against a cluster of `capacity` GPUs: infer dp, check that everything fits.

    Raises InputError for unknown dimensions, sizes that do not multiply to the world size,
    an expert-parallel size that does not divide the data-parallel ranks, or a world size
    larger than the cluster.
    """
    given: dict[str, int] = {}
    for name, value in sizes:
        if name not in DIMENSIONS:
            raise InputError(f"unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
        if value < 1:
            raise InputError(f"--{name}: must be at least 1, got {value}")
        given[name] = value
    if mesh is not None:
        return _resolve_mesh(given, tuple(mesh), capacity)
    names = parse_order(order)
    tp, cp, ep, pp = (given.get(dim, 1) for dim in ("tp", "cp", "ep", "pp"))
    if "dp" in given:
        dp = given["dp"]
    else:
        fixed = tp * cp * pp
        if capacity % fixed:
            raise InputError(
                f"cannot infer dp: tp*cp*pp = {fixed} does not divide the {capacity} GPUs of the cluster (give --dp or --nodes)"
            )
        dp = capacity // fixed
    world = tp * cp * dp * pp
    if world > capacity:
        raise InputError(f"world size tp*cp*dp*pp = {world} does not fit the cluster of {capacity} GPUs (raise --nodes)")
    if (cp * dp) % ep:
        raise InputError(f"--ep {ep} does not divide the cp*dp = {cp * dp} ranks that experts are spread over")
    resolved = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
    for dim, value in resolved.items():
        if value > 1 and dim not in names:
            raise InputError(f"--order {order!r} leaves out {dim}, whose size is {value}")
    return Layout(tuple((dim, resolved[dim]) for dim in DIMENSIONS), world, order=names)


def _resolve_mesh(given: dict[str, int], mesh: tuple[tuple[str, int], ...], capacity: int) -> Layout:
    mesh_sizes = dict(mesh)
    for name, value in given.items():
        if name in mesh_sizes and mesh_sizes[name] != value:
            raise InputError(f"--{name} {value} contradicts --mesh {name}={mesh_sizes[name]}")
        if name not in mesh_sizes and value > 1:
            raise InputError(f"--{name} {value} is not a dimension of --mesh (add {name}=... to it)")
    world = math.prod(mesh_sizes.values())
    if world > capacity:
        raise InputError(f"--mesh world size {world} does not fit the cluster of {capacity} GPUs (raise --nodes)")
    sizes = tuple((dim, mesh_sizes.get(dim, 1)) for dim in DIMENSIONS)
    return Layout(sizes, world, mesh=tuple(name for name, _ in mesh))


def _axis_groups(axis_sizes: Sequence[int], axis: int, world: int) -> list[list[int]]:
    """Groups along `axis` of a grid whose axis 0 varies fastest, in ascending order of first rank."""
    stride = math.prod(axis_sizes[:axis])
    size = axis_sizes[axis]
    block = stride * size
    span = range(0, block, stride)
    return [[outer + inner + step for step in span] for outer in range(0, world, block) for inner in range(stride)]


def build_groups(layout: Layout) -> dict[str, list[list[int]]]:
    """The process groups of every dimension, as lists of global ranks, in the framework's order."""
    world = layout.world_size
    if layout.mesh:
        axes = list(reversed(layout.mesh))
        sizes = [layout.size(name) for name in axes]
        groups = {name: _axis_groups(sizes, axes.index(name), world) for name in axes}
        for dim in DIMENSIONS:
            if dim not in groups:
                groups[dim] = [[rank] for rank in range(world)]
        return {dim: groups[dim] for dim in DIMENSIONS}
    order = layout.full_order
    dense = [1 if dim == "ep" else layout.size(dim) for dim in order]
    groups = {dim: _axis_groups(dense, order.index(dim), world) for dim in DIMENSIONS if dim != "ep"}
    tp, ep, pp = layout.size("tp"), layout.size("ep"), layout.size("pp")
    expert = [
        1 if dim == "cp" else world // (tp * ep * pp) if dim == "dp" else layout.size(dim) for dim in order
    ]
    groups["ep"] = _axis_groups(expert, order.index("ep"), world)
    return {dim: groups[dim] for dim in DIMENSIONS}
