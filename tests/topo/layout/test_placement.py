"""Ranks -> (node, GPU): torchrun block order, Slurm cyclic, CUDA_VISIBLE_DEVICES, explicit rank maps."""

from __future__ import annotations

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.placement import (
    LayoutMismatch,
    RankMapEntry,
    cluster_hosts,
    parse_visible_devices,
    place_from_rank_map,
    place_ranks,
)
from support.layout import NVLINK_PAIRS_4, host_from_matrix, snapshot_of

HOST = host_from_matrix(NVLINK_PAIRS_4)


def test_block_order_fills_nodes_in_turn() -> None:
    """torchrun: RANK = node * nproc_per_node + LOCAL_RANK."""
    hosts, classes = cluster_hosts(snapshot_of(HOST), 2)
    placement = place_ranks(hosts, classes, 8, "block")
    assert placement.pairs() == ((0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3))


def test_cyclic_deals_ranks_round_robin() -> None:
    hosts, classes = cluster_hosts(snapshot_of(HOST), 2)
    placement = place_ranks(hosts, classes, 8, "cyclic")
    assert placement.pairs() == ((0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3))


def test_visible_devices_permute_local_ranks() -> None:
    hosts, classes = cluster_hosts(snapshot_of(HOST), 1)
    placement = place_ranks(hosts, classes, 4, "block", parse_visible_devices("0,2,1,3"))
    assert placement.gpu_of_rank == (0, 2, 1, 3)
    assert "CUDA_VISIBLE_DEVICES=0,2,1,3" in placement.description


def test_fewer_visible_devices_shrink_the_node() -> None:
    hosts, classes = cluster_hosts(snapshot_of(HOST), 2)
    placement = place_ranks(hosts, classes, 4, "block", (3, 2))
    assert placement.pairs() == ((0, 3), (0, 2), (1, 3), (1, 2))


def test_a_visible_device_the_host_lacks_is_a_mismatch() -> None:
    hosts, classes = cluster_hosts(snapshot_of(HOST), 1)
    with pytest.raises(LayoutMismatch, match="names GPU 7"):
        place_ranks(hosts, classes, 2, "block", (0, 7))


@pytest.mark.parametrize(("text", "fragment"), [("0,a", "not a GPU index"), ("0,1,0", "appears twice"), ("", "not a GPU index")])
def test_bad_visible_devices(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        parse_visible_devices(text)


def test_world_larger_than_the_nodes_is_bad_input() -> None:
    hosts, classes = cluster_hosts(snapshot_of(HOST), 1)
    with pytest.raises(InputError, match="does not fit 1 node"):
        place_ranks(hosts, classes, 8, "block")


def test_multi_host_snapshot_is_the_cluster() -> None:
    other = host_from_matrix(NVLINK_PAIRS_4, name="b")
    hosts, classes = cluster_hosts(snapshot_of(HOST, other), 1)
    assert [host.hostname for host in hosts] == ["box", "b"]
    assert classes == (0, 0), "identical hosts share a class"
    with pytest.raises(InputError, match="already describes 2 hosts"):
        cluster_hosts(snapshot_of(HOST, other), 3)


def test_rank_map_places_ranks_by_host_name_order() -> None:
    entries = [RankMapEntry(0, "n1", 1), RankMapEntry(1, "n2", 0), RankMapEntry(2, "n1", 0), RankMapEntry(3, "n2", 3)]
    placement = place_from_rank_map(snapshot_of(HOST), entries, 4)
    assert placement.pairs() == ((0, 1), (1, 0), (0, 0), (1, 3))


@pytest.mark.parametrize(
    ("entries", "world", "fragment"),
    [
        ([RankMapEntry(0, "n1", 0), RankMapEntry(1, "n1", 0)], 2, "both mapped to GPU 0"),
        ([RankMapEntry(0, "n1", 0), RankMapEntry(1, "n1", 9)], 2, "GPU 9 of n1"),
        ([RankMapEntry(0, "n1", 0), RankMapEntry(2, "n1", 1)], 2, "no entry for rank 1"),
        ([RankMapEntry(0, "n1", 0)], 2, "has 1 ranks but the layout's world size is 2"),
    ],
)
def test_rank_map_mismatches(entries: list[RankMapEntry], world: int, fragment: str) -> None:
    with pytest.raises(LayoutMismatch, match=fragment):
        place_from_rank_map(snapshot_of(HOST), entries, world)


def test_checks_that_place_ranks_alike_share_one_placement() -> None:
    """The app re-checks one cluster on every keystroke of its Ranks form: layouts of the same world size on the same
    hosts are placed once, and their reports carry the same (node, GPU) tuple, which the rank map keeps."""
    from linkscope.topo.checks.check import check_layout
    from linkscope.topo.checks.request import CheckRequest

    snapshot = snapshot_of(HOST)
    hosts, classes = cluster_hosts(snapshot, 2)
    placement = place_ranks(hosts, classes, 8, "block")
    assert place_ranks(hosts, classes, 8, "block") is placement and placement.pairs() is placement.pairs()
    assert place_ranks(hosts, classes, 4, "block").world_size == 4
    first = check_layout(snapshot, CheckRequest(sizes=(("tp", 4),), nodes=2))
    second = check_layout(snapshot, CheckRequest(sizes=(("tp", 2),), nodes=2))
    assert second.placement is first.placement and first.groups["tp"] != second.groups["tp"]
