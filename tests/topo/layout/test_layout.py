"""Layout -> process groups: Megatron order strings and DeviceMesh, golden values from the docs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.groups import build_groups
from linkscope.topo.layout.spec import DIMENSIONS, parse_mesh, parse_order, parse_sizes, resolve_layout


def test_megatron_documented_example() -> None:
    """Megatron-LM's example: 16 ranks, tp=2 dp=4 pp=2, default order tp-cp-ep-dp-pp."""
    layout = resolve_layout([("tp", 2), ("dp", 4), ("pp", 2)], capacity=16)
    groups = build_groups(layout)
    assert groups["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert groups["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert groups["pp"] == [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]
    assert groups["cp"] == [[rank] for rank in range(16)]


def test_dp_is_inferred_from_the_world_size() -> None:
    layout = resolve_layout([("tp", 2), ("pp", 2)], capacity=16)
    assert layout.size("dp") == 4 and layout.world_size == 16


def test_order_with_dp_before_tp_strides_tp() -> None:
    layout = resolve_layout([("tp", 2), ("dp", 2)], capacity=4, order="dp-tp")
    groups = build_groups(layout)
    assert groups["tp"] == [[0, 2], [1, 3]]
    assert groups["dp"] == [[0, 1], [2, 3]]


def test_expert_groups_use_megatrons_second_generator() -> None:
    """Experts: same order with cp=1 and expert-dp = world/(tp*ep*pp); here ep strides over tp."""
    layout = resolve_layout([("tp", 2), ("ep", 2)], capacity=8)
    groups = build_groups(layout)
    assert groups["ep"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert groups["dp"] == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_device_mesh_is_row_major_last_fastest() -> None:
    layout = resolve_layout([], capacity=32, mesh=parse_mesh("dp=4,tp=8"))
    groups = build_groups(layout)
    assert groups["tp"][:2] == [list(range(8)), list(range(8, 16))]
    assert groups["dp"][:2] == [[0, 8, 16, 24], [1, 9, 17, 25]]
    assert layout.order_string == "dp=4,tp=8"


def test_world_smaller_than_cluster_uses_the_first_ranks() -> None:
    layout = resolve_layout([("tp", 2), ("dp", 2)], capacity=16)
    assert layout.world_size == 4


@pytest.mark.parametrize(
    ("sizes", "capacity", "kwargs", "fragment"),
    [
        ([("tp", 3)], 8, {}, "cannot infer dp"),
        ([("tp", 3)], 8, {}, r"tp\*cp\*pp must be one of 1, 2, 4, 8"),
        ([("tp", 8), ("dp", 4)], 16, {}, "does not fit the cluster of 16"),
        ([("tp", 2), ("ep", 3), ("dp", 4)], 8, {}, r"world_size \(8\) is not divisible by .* etp\*ep\*pp = 2\*3\*1 = 6"),
        ([("tp", 2), ("dp", 4)], 8, {"etp": 3}, r"etp\*ep\*pp = 3\*1\*1 = 3"),
        ([("tp", 2), ("ep", 2)], 8, {"order": "tp-dp"}, "leaves out ep"),
        ([("tp", 1), ("dp", 4)], 8, {"order": "dp", "etp": 2}, "leaves out tp"),
        ([("tp", 2)], 8, {"order": "tp-xp-dp"}, "unknown dimension 'xp'"),
        ([("tp", 2)], 8, {"order": "tp-dp-tp"}, "appears twice"),
        ([("tp", 2), ("pp", 2)], 8, {"order": "tp-dp"}, "leaves out pp"),
        ([("zz", 2)], 8, {}, "unknown dimension 'zz'"),
        ([("tp", 2)], 8, {"vpp": 2}, "interleaved schedule"),
        ([("tp", 2)], 8, {"mesh_roles": (("tp", "tp"),)}, "give --mesh too"),
        ([("tp", 4)], 8, {"mesh": (("dp", 2), ("tp", 8))}, "contradicts --mesh tp=8"),
        ([("pp", 2)], 8, {"mesh": (("dp", 2), ("tp", 4))}, "not a dimension of --mesh"),
        ([], 8, {"mesh": (("dp", 4), ("tp", 8))}, "does not fit the cluster of 8"),
    ],
)
def test_bad_layouts_name_the_problem(sizes: list[tuple[str, int]], capacity: int, kwargs: dict, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        resolve_layout(sizes, capacity, **kwargs)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("dp=4,tp", "not NAME=SIZE"), ("dp=4,tp=x", "not an integer"), ("dp=0", "below the minimum 1"), ("dp=2,dp=2", "twice"),
     ("2x=2", "not a dimension name")],
)
def test_bad_mesh_strings(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        parse_mesh(text)


def test_parse_sizes_knows_only_the_five_dimensions() -> None:
    with pytest.raises(InputError, match="unknown dimension 'foo'"):
        parse_sizes("foo=2", "--layout")


def test_parse_order_accepts_partial_orders() -> None:
    assert parse_order("tp-dp-pp") == ("tp", "dp", "pp")


@settings(max_examples=60, deadline=None)
@given(
    st.permutations(list(DIMENSIONS)),
    st.sampled_from([1, 2]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
)
def test_every_dimension_partitions_the_world(order: list[str], tp: int, cp: int, dp: int, pp: int) -> None:
    """Whatever the order, each dimension's groups cover every rank exactly once, with the right sizes."""
    world = tp * cp * dp * pp
    layout = resolve_layout([("tp", tp), ("cp", cp), ("dp", dp), ("pp", pp)], world, order="-".join(order))
    for dim, groups in build_groups(layout).items():
        flat = sorted(rank for group in groups for rank in group)
        assert flat == list(range(world))
        assert {len(group) for group in groups} == {layout.size(dim)}
