"""Megatron-Core's start-up decisions, layout by layout: every layout of a grid is started (or refused) by a
reference written here from what `initialize_model_parallel` (megatron/core/parallel_state.py) does, and
linkscope must decide alike. Read at v0.15.3 and on main (NVIDIA/Megatron-LM, 2026): with main's new
`gtp_remat_size` and `expert_gtp_remat_size` at their default 1 (linkscope models neither), both versions
take the same decisions, in this order:

1. world % (tp*pp*cp) must be 0 ("world_size (W) is not divisible by M");
2. the dense grid (tp, cp, dp, pp; ep 1) is built from the order; a dimension larger than 1 missing from the
   order is a RuntimeError ("... but you haven't specified the order");
3. world % (etp*ep*pp) must be 0 (etp defaults to tp);
4. the expert grid (etp, ep, expert-dp, pp; cp 1) is built from the same order, with the same RuntimeError;
5. "When not using pp-last rank ordering, the data parallel size of the attention and moe layers must be the
   same": the order string ends in pp, or pp == 1, or dp == expert-dp;
6. "Pipeline parallel groups are expected to be the same for Non-Expert and Expert part".

And megatron/training/arguments.py (both versions): with ep > 1 the model must have experts, "Number of
experts should be a multiple of expert model parallel_size" -- judged only for a model the user gives.
"""

from __future__ import annotations

import itertools

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.groups import megatron_refusal
from linkscope.topo.layout.spec import DIMENSIONS, resolve_layout
from support.layout import reference_groups


def _pp_groups(order: list[str], sizes: dict[str, int]) -> list[list[int]]:
    """The pipeline groups of a grid (Megatron appends the dimensions the order leaves out, all of size 1)."""
    return reference_groups(order + [dim for dim in DIMENSIONS if dim not in order], sizes, {"pp"})


def megatron_startup(world: int, tp: int, cp: int, ep: int, etp: int | None, pp: int, order: str) -> str | None:
    """What initialize_model_parallel does with the layout: None when it starts, else the step that stops it."""
    names = order.split("-")
    if world % (tp * pp * cp):
        return "world not divisible"
    dp = world // (tp * pp * cp)
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    if any(size > 1 and dim not in names for dim, size in dense.items()):
        return "order leaves out a dimension"
    expert_tp = tp if etp is None else etp
    if world % (expert_tp * ep * pp):
        return "expert world not divisible"
    expert_dp = world // (expert_tp * ep * pp)
    expert = {"tp": expert_tp, "cp": 1, "ep": ep, "dp": expert_dp, "pp": pp}
    if any(size > 1 and dim not in names for dim, size in expert.items()):
        return "order leaves out a dimension"
    if not (order.endswith("pp") or pp == 1 or expert_dp == dp):
        return "When not using pp-last rank ordering"
    if _pp_groups(names, dense) != _pp_groups(names, expert):
        return "Pipeline parallel groups are expected to be the same"
    return None


def linkscope_startup(world: int, tp: int, cp: int, ep: int, etp: int | None, pp: int, order: str) -> str | None:
    """linkscope's decision on the same layout: its InputError (it cannot even build the groups) or its refusal."""
    try:
        layout = resolve_layout([("tp", tp), ("cp", cp), ("ep", ep), ("pp", pp)], world, order, etp=etp)
    except InputError as exc:
        return f"InputError: {exc}"
    return megatron_refusal(layout)


ORDERS = ["-".join(order) for order in itertools.permutations(DIMENSIONS)] + [
    "tp-dp-pp", "tp-pp-dp", "tp-ep-dp-pp", "tp-cp-dp-pp", "dp-pp", "tp-ep-pp"]
"""Every order of the five dimensions, and orders that leave some out (Megatron appends those of size 1)."""
LAYOUTS = [(world, tp, cp, ep, etp, pp) for world in (16, 48, 64) for tp in (1, 2, 4) for cp in (1, 2)
           for ep in (1, 2, 4) for etp in (None, 1, 2) for pp in (1, 2, 4)]


@pytest.mark.parametrize("order", ORDERS)
def test_every_layout_starts_or_is_refused_as_megatron_does(order: str) -> None:
    checked = disagreements = 0
    for world, tp, cp, ep, etp, pp in LAYOUTS:
        megatron = megatron_startup(world, tp, cp, ep, etp, pp, order)
        ours = linkscope_startup(world, tp, cp, ep, etp, pp, order)
        checked += 1
        if megatron is None:
            agree = ours is None
        elif megatron in ("world not divisible", "expert world not divisible", "order leaves out a dimension"):
            agree = ours is not None and ours.startswith("InputError")
        else:
            agree = ours is not None and megatron in ours and "v0.15.3" in ours and "main" in ours
        if not agree:
            disagreements += 1
            assert agree, (order, world, tp, cp, ep, etp, pp, megatron, ours)
    assert checked == len(LAYOUTS) and not disagreements


def test_the_grid_holds_layouts_of_every_decision() -> None:
    """The cross-check is not vacuous: it holds layouts Megatron starts and layouts each rule stops."""
    decisions = {megatron_startup(*layout, order) for layout in LAYOUTS for order in ORDERS}
    assert decisions == {None, "world not divisible", "expert world not divisible", "order leaves out a dimension",
                         "When not using pp-last rank ordering", "Pipeline parallel groups are expected to be the same"}
