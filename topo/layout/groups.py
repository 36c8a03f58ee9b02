"""Process groups of a resolved :class:`~topo.layout.spec.Layout`, as Megatron-LM and DeviceMesh build them, and
the layouts Megatron-Core refuses at start-up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from linkscope.topo.layout.spec import DIMENSIONS, TRAINING_SCRIPT_ORDERS, Layout

Axes = tuple[tuple[int, bool], ...]
"""A grid's axes larger than one, fastest first: (size, whether groups run along it)."""


def _masked_groups(shape: Sequence[int], mask: Sequence[bool], built: dict[Axes, list[list[int]]]) -> list[list[int]]:
    """Groups of a grid whose axis 0 varies fastest: the ranks that differ only along the masked axes.

    Inside a group the first masked axis varies fastest; groups come in ascending order of first rank. Grids
    alike once their axes of one are left out (the dense and the expert grid without experts) build the same
    groups, so `built` hands back the ones built before (shared, as the mesh's etp and tp are).
    """
    axes = tuple((size, masked) for size, masked in zip(shape, mask, strict=True) if size > 1)
    if axes in built:
        return built[axes]
    members, bases = [0], [0]
    stride = 1
    for size, masked in axes:
        if masked:
            members = [member + step * stride for step in range(size) for member in members]
        else:
            bases = [base + step * stride for step in range(size) for base in bases]
        stride *= size
    step = members[1] if len(members) > 1 else 1
    if members == list(range(0, step * len(members), step)):  # one masked axis (or contiguous ones): ranges, at C speed
        span = step * len(members)
        groups = [[base] for base in bases] if span == 1 else [list(range(base, base + span, step)) for base in bases]
    else:
        groups = [[base + member for member in members] for base in bases]
    built[axes] = groups
    return groups


def _grid_groups(names: Sequence[str], sizes: dict[str, int], wanted: Sequence[str],
                 built: dict[Axes, list[list[int]]]) -> list[list[int]]:
    """Groups of the grid `names` (first fastest) along the axes `wanted`."""
    return _masked_groups([sizes[name] for name in names], [name in wanted for name in names], built)


def dense_sizes(layout: Layout) -> dict[str, int]:
    """Megatron's dense generator: tp, cp, dp, pp with ep = 1."""
    return {"tp": layout.size("tp"), "cp": layout.size("cp"), "ep": 1, "dp": layout.size("dp"), "pp": layout.size("pp")}


def expert_sizes(layout: Layout) -> dict[str, int]:
    """Megatron's expert generator: tp = etp, ep, dp = expert-dp, pp with cp = 1."""
    return {"tp": layout.size("etp"), "cp": 1, "ep": layout.size("ep"), "dp": layout.size("edp"), "pp": layout.size("pp")}


def build_groups(layout: Layout) -> dict[str, list[list[int]]]:
    """The process groups of every dimension, as lists of global ranks, in the framework's order.

    Megatron: tp, cp, ep, dp, pp, and the expert grid's etp and edp; `dp_cp` (the dense gradient
    group) when cp > 1. Mesh: the canonical five, every mesh dimension by its own name, and the
    gradient groups `fsdp` / `replicate` when the roles call for them.
    """
    if layout.mesh:
        return _mesh_groups(layout)
    order = layout.full_order
    dense, expert = dense_sizes(layout), expert_sizes(layout)
    built: dict[Axes, list[list[int]]] = {}
    groups = {dim: _grid_groups(order, dense, (dim,), built) for dim in ("tp", "cp", "dp", "pp")}
    groups["ep"] = _grid_groups(order, expert, ("ep",), built)
    result = {dim: groups[dim] for dim in DIMENSIONS}
    result["etp"] = _grid_groups(order, expert, ("tp",), built)
    result["edp"] = _grid_groups(order, expert, ("dp",), built)
    if layout.size("cp") > 1:
        result["dp_cp"] = _grid_groups(order, dense, ("cp", "dp"), built)
    count = layout.optimizer_instances
    if count > 1:
        for name, whole in (("dp_cp", result.get("dp_cp", result["dp"])), ("edp", result["edp"])):
            intra = len(whole[0]) // count
            result[f"{name}_intra"] = [group[start:start + intra] for group in whole for start in range(0, len(group), intra)]
            result[f"{name}_inter"] = [group[offset::intra] for group in whole for offset in range(intra)]
    return result


def _mesh_groups(layout: Layout) -> dict[str, list[list[int]]]:
    fastest_first = list(reversed(layout.mesh))
    shape = [dim.size for dim in fastest_first]
    built: dict[Axes, list[list[int]]] = {}

    def along(wanted: set[str]) -> list[list[int]]:
        return _masked_groups(shape, [dim.name in wanted for dim in fastest_first], built)

    def role_dims(*roles: str) -> set[str]:
        return {dim.name for dim in layout.mesh if dim.role in roles}

    result = {dim: along(role_dims(*(("dp", "fsdp", "replicate") if dim == "dp" else (dim,)))) for dim in DIMENSIONS}
    result["etp"] = result["tp"]
    result["edp"] = result["dp"]
    for dim in layout.mesh:
        if dim.name not in result:
            result[dim.name] = along({dim.name})
    for gradient in layout.gradient_groups():
        if gradient.dim != "dp":
            wanted = role_dims("fsdp", "cp") if gradient.dim == "fsdp" else role_dims("dp", "replicate")
            if gradient.dim == "dp_cp":
                wanted |= role_dims("cp")
            result[gradient.dim] = along(wanted)
    return result


MEGATRON_VERSIONS = "megatron-core v0.15.3 and main alike"
"""Where the start-up rules below were read: initialize_model_parallel in megatron/core/parallel_state.py at
v0.15.3 and on main (2026), which decide alike for the layouts linkscope builds (main's gtp_remat_size and
expert_gtp_remat_size, which linkscope does not model, default to 1 and then change nothing)."""


def megatron_refusal(layout: Layout) -> str | None:
    """Megatron-Core's reason for refusing this layout at start-up (initialize_model_parallel), or None.

    Two rules, asserted after both rank grids are built: an order string that does not end in pp needs
    dp == expert-dp (when pp > 1); and the pipeline groups of the dense and the expert grid must be the same
    (a pipeline group along an axis is set by the pp size and the product of the axes before it).
    """
    if layout.mesh or layout.size("pp") < 2:
        return None
    dp, edp = layout.size("dp"), layout.size("edp")
    if layout.order[-1] != "pp" and dp != edp:
        return ("When not using pp-last rank ordering, the data parallel size of the attention and moe layers "
                f"must be the same (dp {dp}, expert dp {edp}; {MEGATRON_VERSIONS})")
    before = layout.full_order[: layout.full_order.index("pp")]
    dense, expert = dense_sizes(layout), expert_sizes(layout)
    dense_stride = math.prod(dense[dim] for dim in before)
    expert_stride = math.prod(expert[dim] for dim in before)
    if dense_stride != expert_stride:
        return ("Pipeline parallel groups are expected to be the same for Non-Expert and Expert part (pipeline "
                f"stride {dense_stride} in the dense grid, {expert_stride} in the expert grid; {MEGATRON_VERSIONS})")
    return None


def effective_order(layout: Layout) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Per grid (dense, expert), the order's dimensions larger than 1: two orders with the same build the same groups."""
    dense, expert = dense_sizes(layout), expert_sizes(layout)
    return (tuple(dim for dim in layout.full_order if dense[dim] > 1),
            tuple(dim for dim in layout.full_order if expert[dim] > 1))


def order_needs(layout: Layout) -> str:
    """Which launcher can start this layout: the training script (and with which flag), or megatron-core."""
    if layout.mesh:
        names = ", ".join(repr(dim.name) for dim in layout.mesh)
        shape = ", ".join(str(dim.size) for dim in layout.mesh)
        return f"torch init_device_mesh(device, ({shape}), mesh_dim_names=({names}))"
    effective = effective_order(layout)
    for order, launcher in TRAINING_SCRIPT_ORDERS.items():
        candidate = replace(layout, order=tuple(order.split("-")))
        if effective_order(candidate) == effective:
            return launcher
    return (f"megatron-core only: initialize_model_parallel(order={layout.order_string!r}) "
            f"(the training script takes {' or '.join(TRAINING_SCRIPT_ORDERS)})")
