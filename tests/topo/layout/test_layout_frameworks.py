"""Groups and refusals against the frameworks' documented rules, with a reference built independently here.

Megatron-Core (parallel_state.py): ranks form a grid whose first order dimension varies fastest; a
group set along some dimensions holds the ranks that agree on every other coordinate. The dense
grid has (tp, cp, dp, pp) with ep = 1, the expert grid (etp, ep, expert-dp, pp) with cp = 1 and
expert-dp = world / (etp * ep * pp). initialize_model_parallel refuses (1) world not divisible by
etp*ep*pp, (2) an order not ending in pp when pp > 1 and dp != expert-dp, (3) pipeline groups that
differ between the two grids. DeviceMesh: row-major, the last dimension varies fastest.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.groups import build_groups, megatron_refusal, order_needs
from linkscope.topo.layout.spec import DIMENSIONS, parse_mesh, resolve_layout
from support.layout import reference_groups


def full(order: list[str]) -> list[str]:
    return order + [dim for dim in DIMENSIONS if dim not in order]


sizes_strategy = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 3, 4]), "cp": st.sampled_from([1, 2, 3]), "ep": st.sampled_from([1, 2, 3, 4]),
    "etp": st.sampled_from([1, 2, 3, 4]), "pp": st.sampled_from([1, 2, 3]), "dp": st.sampled_from([1, 2, 4, 6]),
})


@settings(max_examples=300, deadline=None)
@given(sizes_strategy, st.permutations(list(DIMENSIONS)), st.integers(min_value=0, max_value=4))
def test_megatron_groups_and_refusals_match_the_documented_rules(sizes: dict[str, int], order: list[str],
                                                                  dropped: int) -> None:
    """Random (tp, cp, ep, etp, pp, dp, order): the groups are the reference's, and each refusal is the rule's."""
    order = [dim for index, dim in enumerate(order) if index >= dropped or sizes[dim] > 1]  # partial orders too
    tp, cp, ep, etp, pp, dp = (sizes[key] for key in ("tp", "cp", "ep", "etp", "pp", "dp"))
    world = tp * cp * dp * pp
    given_sizes = [(dim, sizes[dim]) for dim in DIMENSIONS]
    text = "-".join(order)
    expert_dp_size = world // (etp * ep * pp) if world % (etp * ep * pp) == 0 else 1
    left_out = any(sizes[dim] > 1 and dim not in order for dim in DIMENSIONS) or (etp > 1 and "tp" not in order) \
        or (expert_dp_size > 1 and "dp" not in order)  # Megatron's expert grid needs dp in the order too
    if world % (etp * ep * pp) or left_out:
        with pytest.raises(InputError, match=r"etp\*ep\*pp|leaves out"):
            resolve_layout(given_sizes, world, text, etp=etp)
        return
    layout = resolve_layout(given_sizes, world, text, etp=etp)
    groups = build_groups(layout)
    grid = full(order)
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    expert_dp = world // (etp * ep * pp)
    expert = {"tp": etp, "cp": 1, "ep": ep, "dp": expert_dp, "pp": pp}
    for dim in ("tp", "cp", "dp", "pp"):
        assert groups[dim] == reference_groups(grid, dense, {dim}), dim
    assert groups["ep"] == reference_groups(grid, expert, {"ep"})
    assert groups["etp"] == reference_groups(grid, expert, {"tp"})
    assert groups["edp"] == reference_groups(grid, expert, {"dp"})
    if cp > 1:
        assert groups["dp_cp"] == reference_groups(grid, dense, {"dp", "cp"})
    else:
        assert "dp_cp" not in groups
    not_pp_last = pp > 1 and order[-1] != "pp" and dp != expert_dp
    pp_differs = reference_groups(grid, dense, {"pp"}) != reference_groups(grid, expert, {"pp"})
    reason = megatron_refusal(layout)
    if not_pp_last:
        assert reason is not None and "pp-last" in reason
    elif pp_differs:
        assert reason is not None and "Pipeline parallel groups" in reason
    else:
        assert reason is None


def test_megatron_expert_grid_by_hand() -> None:
    """16 ranks, tp 2, etp 1, ep 4, pp 2, default order: expert grid etp 1 x ep 4 x edp 2 x pp 2."""
    layout = resolve_layout([("tp", 2), ("ep", 4), ("pp", 2)], 16, etp=1)
    groups = build_groups(layout)
    assert groups["ep"] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert groups["edp"][:2] == [[0, 4], [1, 5]]
    assert groups["etp"] == [[rank] for rank in range(16)]
    assert groups["dp"][:2] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert groups["pp"][:2] == [[0, 8], [1, 9]]
    assert megatron_refusal(layout) is None


def test_pp_not_last_with_unequal_expert_dp_is_refused_with_megatrons_reason() -> None:
    layout = resolve_layout([("tp", 2), ("ep", 2), ("pp", 2)], 16, "tp-cp-ep-pp-dp")
    reason = megatron_refusal(layout)
    assert reason is not None
    assert "When not using pp-last rank ordering, the data parallel size of the attention and moe layers" in reason
    assert megatron_refusal(resolve_layout([("tp", 2), ("pp", 2)], 16, "tp-cp-ep-pp-dp")) is None


def test_pipeline_groups_that_differ_between_the_grids_are_refused() -> None:
    """tp-pp-cp-ep-dp with tp 2, cp 2, etp 4: dense pp stride 2, expert pp stride 4, dp == expert dp."""
    layout = resolve_layout([("tp", 2), ("cp", 2), ("pp", 2), ("dp", 2)], 16, "tp-pp-cp-ep-dp", etp=4)
    assert layout.size("dp") == layout.size("edp") == 2
    reason = megatron_refusal(layout)
    assert reason is not None and "Pipeline parallel groups are expected to be the same" in reason


@pytest.mark.parametrize(
    ("order", "sizes", "needs"),
    [
        ("tp-cp-ep-dp-pp", [("tp", 2), ("pp", 2)], "training script (its default order)"),
        ("tp-dp-pp", [("tp", 2), ("pp", 2)], "training script (its default order)"),
        ("tp-pp-dp", [("tp", 2), ("pp", 2)], "--use-tp-pp-dp-mapping"),
        ("dp-tp-pp", [("tp", 2), ("pp", 2)], "megatron-core only"),
    ],
)
def test_which_launcher_builds_an_order(order: str, sizes: list[tuple[str, int]], needs: str) -> None:
    assert needs in order_needs(resolve_layout(sizes, 16, order))


def test_vpp_needs_a_pipeline() -> None:
    with pytest.raises(InputError, match="greater than 1 with interleaved schedule"):
        resolve_layout([("tp", 2)], 8, vpp=2)


def test_world_above_the_limit_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="more than the 524,288"):
        resolve_layout([("tp", 8)], 8 * 1_000_000)


def mesh_reference(mesh: list[tuple[str, int]], along: set[str]) -> list[list[int]]:
    """DeviceMesh: the rank at coordinates (c0, c1, ...) is row-major, last dimension fastest."""
    names = [name for name, _ in reversed(mesh)]
    return reference_groups(names, dict(mesh), along)


NAMES = ["dp_replicate", "dp_shard", "cp", "tp", "pp", "ep", "dp"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True),
       st.lists(st.sampled_from([1, 2, 3, 4]), min_size=5, max_size=5))
def test_device_mesh_groups_match_row_major_last_fastest(names: list[str], values: list[int]) -> None:
    mesh = list(zip(names, values, strict=False))
    world = math.prod(size for _, size in mesh)
    layout = resolve_layout([], world, mesh=parse_mesh(",".join(f"{name}={size}" for name, size in mesh)))
    groups = build_groups(layout)
    for name, _ in mesh:
        if name != "dp":  # the canonical dp flattens every data-parallel dimension (checked below)
            assert groups[name] == mesh_reference(mesh, {name}), name
    data = {name for name in names if name in ("dp", "dp_shard", "dp_replicate")}
    assert groups["dp"] == mesh_reference(mesh, data)
    if "dp_shard" in names:
        shard = {"dp_shard"} | ({"cp"} if "cp" in names else set())
        assert groups["fsdp"] == mesh_reference(mesh, shard)
        if math.prod(size for name, size in mesh if name in ("dp", "dp_replicate")) > 1:
            assert groups["replicate"] == mesh_reference(mesh, data - {"dp_shard"})


def test_torchtitan_mesh_prices_fsdp_and_replicate() -> None:
    """dp_replicate=2,dp_shard=4,cp=2,tp=2: FSDP over dp_shard x cp (8 ranks), HSDP all_reduce over 2."""
    layout = resolve_layout([], 32, mesh=parse_mesh("dp_replicate=2,dp_shard=4,cp=2,tp=2"))
    kinds = {(group.dim, group.size, group.style, group.shard_factor) for group in layout.gradient_groups()}
    assert kinds == {("fsdp", 8, "shard", 1), ("replicate", 2, "replicate", 8)}
    groups = build_groups(layout)
    assert groups["tp"][0] == [0, 1] and groups["cp"][0] == [0, 2]
    assert groups["fsdp"][0] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert groups["replicate"][0] == [0, 16]


@pytest.mark.parametrize(
    ("mesh", "roles", "fragment"),
    [
        ("rows=2,tp=4", (), "no role for dimension 'rows'"),
        ("edp=2,tp=4", (), "name of a group linkscope derives"),
        ("rows=2,tp=4", (("cols", "fsdp"),), "not a dimension of --mesh"),
    ],
)
def test_bad_meshes_name_the_problem(mesh: str, roles: tuple[tuple[str, str], ...], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        resolve_layout([], 8, mesh=parse_mesh(mesh), mesh_roles=roles)


def test_mesh_roles_name_what_a_dimension_does() -> None:
    layout = resolve_layout([], 8, mesh=parse_mesh("rep=2,shard=4"), mesh_roles=(("rep", "replicate"), ("shard", "fsdp")))
    assert {group.dim for group in layout.gradient_groups()} == {"fsdp", "replicate"}
    assert build_groups(layout)["shard"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_torch_device_mesh_agrees_where_torch_is_installed() -> None:
    """Cross-check the mesh groups with torch's own layout code (the groups init_device_mesh creates)."""
    torch = pytest.importorskip("torch")
    try:
        from torch.distributed._mesh_layout import _MeshLayout
    except ImportError:
        pytest.skip("this torch has no _MeshLayout")
    for shape in itertools.product([1, 2, 3], [2, 4], [1, 2]):
        mesh = torch.arange(math.prod(shape)).view(shape)
        whole = _MeshLayout.from_sizes_strides(tuple(mesh.size()), tuple(mesh.stride()))
        layout = resolve_layout([], mesh.numel(), mesh=parse_mesh(f"pp={shape[0]},dp={shape[1]},tp={shape[2]}"))
        groups = build_groups(layout)
        for axis, name in enumerate(("pp", "dp", "tp")):
            expected = _MeshLayout([whole[axis]]).remap_to_tensor(mesh.flatten()).reshape(-1, shape[axis]).tolist()
            assert sorted(groups[name]) == sorted(expected), (shape, name)


def test_distributed_optimizer_instances_split_the_gradient_group_as_megatron_does() -> None:
    """dp 4 in 2 instances: shards inside consecutive halves of each dp x cp group, all_reduce across them."""
    layout = resolve_layout([("tp", 8)], 32, optimizer_instances=2)
    groups = build_groups(layout)
    assert groups["dp"][0] == [0, 8, 16, 24]
    assert groups["dp_cp_intra"][:2] == [[0, 8], [16, 24]]
    assert groups["dp_cp_inter"][:2] == [[0, 16], [8, 24]]
    kinds = {(group.dim, group.size, group.style, group.shard_factor) for group in layout.gradient_groups()}
    assert ("dp_cp_intra", 2, "optimizer", 1) in kinds and ("dp_cp_inter", 2, "replicate", 2) in kinds


def test_optimizer_instances_must_divide_the_gradient_groups() -> None:
    with pytest.raises(InputError, match="Data parallel size should be divisible by partial DistOpt shard factor"):
        resolve_layout([("tp", 8)], 32, optimizer_instances=3)
    with pytest.raises(InputError, match="Expert data parallel size should be divisible"):
        resolve_layout([("tp", 2), ("ep", 4)], 16, optimizer_instances=4)  # dp 8, expert dp 2
