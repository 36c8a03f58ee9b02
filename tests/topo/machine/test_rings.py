"""The best ring through a group: the slowest hop of the best Hamiltonian cycle, not the worst pair."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from linkscope.topo.cost.params import CostModel
from linkscope.topo.machine.rings import best_chain, best_ring, ring_hops
from linkscope.topo.model.host import Host
from linkscope.topo.samples import load_sample
from support.layout import NVLINK_PAIRS_4, host_from_matrix


def _bandwidth(host_name: str) -> tuple[Host, Callable[[int, int], float]]:
    host = load_sample(host_name).host
    model = CostModel()
    return host, lambda a, b: model.gpu_hop(host, a, b).bandwidth_gbps


def test_hybrid_cube_mesh_has_an_nvlink_only_ring() -> None:
    """DGX-1: pairs 0-5, 0-6... are SYS, yet an 8-GPU ring over NVLink (even over NV2 only) exists."""
    host, bandwidth = _bandwidth("dgx1-v100")
    assert host.link(0, 5).token == "SYS"
    ring = best_ring(range(8), bandwidth)
    assert sorted(ring.order) == list(range(8))
    assert all(host.link(a, b).token == "NV2" for a, b in ring_hops(ring))
    assert ring.bottleneck_gbps == pytest.approx(2 * 20.0)
    worst_pair = min(bandwidth(a, b) for a, b in itertools.combinations(range(8), 2))
    assert ring.bottleneck_gbps > 3 * worst_pair, "a worst-pair rule would be badly wrong here"


def test_nvlink_pairs_force_a_four_gpu_ring_across_sys() -> None:
    host = host_from_matrix(NVLINK_PAIRS_4)
    model = CostModel()
    ring = best_ring(range(4), lambda a, b: model.gpu_hop(host, a, b).bandwidth_gbps)
    tokens = sorted(host.link(a, b).token for a, b in ring_hops(ring))
    assert tokens == ["NV12", "NV12", "SYS", "SYS"]
    chain = best_chain(range(4), lambda a, b: model.gpu_hop(host, a, b).bandwidth_gbps)
    assert len(ring_hops(chain)) == 3 and not chain.closed


def test_single_gpu_and_pair() -> None:
    assert best_ring([3], lambda a, b: 1.0).bottleneck_gbps == float("inf")
    assert best_ring([0, 1], lambda a, b: 7.0).bottleneck_gbps == 7.0


def _brute_force(count: int, matrix: list[list[float]], closed: bool) -> float:
    best = 0.0
    for order in itertools.permutations(range(count)):
        if closed and order[0] != 0:
            continue
        hops = list(itertools.pairwise(order)) + ([(order[-1], order[0])] if closed else [])
        best = max(best, min(matrix[a][b] for a, b in hops))
    return best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("closed", [True, False])
def test_exact_search_matches_brute_force(seed: int, closed: bool) -> None:
    rng = random.Random(seed)
    count = rng.randint(3, 7)
    matrix = [[0.0] * count for _ in range(count)]
    for a, b in itertools.combinations(range(count), 2):
        matrix[a][b] = matrix[b][a] = rng.choice([5.0, 20.0, 40.0, 150.0])
    found = (best_ring if closed else best_chain)(range(count), lambda a, b: matrix[a][b])
    assert found.bottleneck_gbps == _brute_force(count, matrix, closed)
    assert min(matrix[a][b] for a, b in ring_hops(found)) == found.bottleneck_gbps


def test_large_groups_use_the_heuristic_and_still_find_a_fast_ring() -> None:
    """16 GPUs whose fast links form one hidden cycle (a shuffled order): the heuristic must find it."""
    cycle = list(range(16))
    random.Random(7).shuffle(cycle)
    fast = {frozenset((cycle[i], cycle[(i + 1) % 16])) for i in range(16)}

    def bandwidth(a: int, b: int) -> float:
        return 100.0 if frozenset((a, b)) in fast else 1.0

    ring = best_ring(range(16), bandwidth)
    assert ring.bottleneck_gbps == 100.0
