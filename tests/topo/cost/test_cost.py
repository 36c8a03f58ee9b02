"""The alpha-beta cost model: link parameters, algorithms, group pricing, overrides and calibration."""

from __future__ import annotations

import math

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.collectives import collective_cost, uniform_links
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel, load_cost_overrides
from linkscope.topo.layout.placement import Placement
from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
from linkscope.topo.samples import load_sample
from support.layout import NVLINK_PAIRS_4, host_from_matrix

GIB = 1 << 30


@pytest.mark.parametrize(
    ("ranks", "nodes", "expected_ms"),
    [(8, 1, 6.28), (8, 8, 150.4), (32, 32, 166.7)],
)
def test_domain_worked_example(ranks: int, nodes: int, expected_ms: float) -> None:
    """DOMAIN.md: 1 GiB ring all_reduce; NVLink 1 us / 300 GB/s, network 5 us / 12.5 GB/s."""
    links = uniform_links(ranks, nodes, (1.0, 300.0), (5.0, 12.5))
    cost = collective_cost("all_reduce", links, GIB, "ring")
    assert round(cost.time_s * 1e3, 2 if expected_ms < 10 else 1) == expected_ms


def test_ring_formula_by_hand() -> None:
    """all_gather over 4 ranks: 3 steps of (alpha + B/4 / beta)."""
    links = uniform_links(4, 1, (2.0, 100.0), (5.0, 10.0))
    expected = 3 * (2e-6 + (4e6 / 4) / 100e9)
    assert collective_cost("all_gather", links, 4_000_000, "ring").time_s == pytest.approx(expected)


def test_bus_bandwidth_follows_nccl_tests() -> None:
    links = uniform_links(8, 1, (0.0, 100.0), (5.0, 10.0))
    all_reduce = collective_cost("all_reduce", links, GIB, "ring")
    assert all_reduce.busbw_gbps == pytest.approx(all_reduce.algbw_gbps * 2 * 7 / 8)
    assert all_reduce.busbw_gbps == pytest.approx(100.0), "with no latency, busbw is the link bandwidth"
    gather = collective_cost("all_gather", links, GIB, "ring")
    assert gather.busbw_gbps == pytest.approx(gather.algbw_gbps * 7 / 8)


def test_tree_wins_small_messages_across_nodes_and_ring_wins_large() -> None:
    links = uniform_links(64, 64, (1.0, 300.0), (5.0, 25.0))
    assert collective_cost("all_reduce", links, 1024).algo == "tree"
    assert collective_cost("all_reduce", links, GIB).algo == "ring"


def test_hierarchical_by_hand() -> None:
    """2 nodes x 4 GPUs: RS inside (3 steps of B/4), all_reduce of B/4 across 2 nodes, AG inside."""
    links = uniform_links(8, 2, (1.0, 200.0), (5.0, 20.0))
    size = 8_000_000
    inside = 3 * (1e-6 + (size / 4) / 200e9)
    across = 2 * 1 * (5e-6 + (size / 4 / 2) / 20e9)
    assert collective_cost("all_reduce", links, size, "hierarchical").time_s == pytest.approx(2 * inside + across)


def test_all_to_all_by_hand() -> None:
    """16 ranks on 2 nodes of 8: each rank sends B/16 to each peer; 8*8*B/16 bytes leave each node over 8 rails."""
    links = uniform_links(16, 2, (1.0, 300.0), (5.0, 50.0))
    size = 16_000_000
    inside = (size / 16) / 300e9
    leaving = 8 * 8 * (size / 16) / (8 * 50e9)
    cost = collective_cost("all_to_all", links, size)
    assert cost.algo == "pairwise"
    assert cost.time_s == pytest.approx(5e-6 + max(inside, leaving))


def test_broadcast_and_send_recv_by_hand() -> None:
    links = uniform_links(4, 1, (2.0, 100.0), (5.0, 10.0))
    assert collective_cost("broadcast", links, 10**9, "ring").time_s == pytest.approx(3 * 2e-6 + 1e9 / 100e9)
    assert collective_cost("send_recv", links, 10**9).time_s == pytest.approx(2e-6 + 1e9 / 100e9)


def test_send_recv_across_nodes_rides_one_rail() -> None:
    """A point-to-point transfer between nodes leaves on one GPU's NIC, not on all 8 of its node's rails."""
    links = uniform_links(16, 2, (1.0, 300.0), (5.0, 12.5))
    cost = collective_cost("send_recv", links, GIB)
    assert cost.time_s == pytest.approx(5e-6 + GIB / 12.5e9)  # 85.90 ms, not GIB / 100e9 = 10.74 ms
    assert cost.algbw_gbps < 12.5


def test_network_label_counts_the_rails_it_adds_up() -> None:
    """A ring over 4 GPUs of each of 2 DGX H100 nodes gets 4 x 46.5 GB/s: the label says 4 rails, not one NIC."""
    host = load_sample("dgx-h100").host
    placement = Placement((host, host), (0, 0), (0,) * 4 + (1,) * 4, (0, 2, 4, 6) * 2, "test")
    links = GroupPricer(placement, CostModel()).links(range(8))
    assert links.net_rails == 4
    assert links.node_net_gbps == pytest.approx(4 * 46.5)
    assert links.rank_net_gbps == pytest.approx(46.5)
    assert links.bottleneck_label == "4 NIC rails (e.g. mlx5_0 400 Gb/s InfiniBand)"
    assert links.net_description == "4 NIC rails per node (e.g. mlx5_0 400 Gb/s InfiniBand; ~46 GB/s each, 186 GB/s together)"
    one = GroupPricer(Placement((host, host), (0, 0), (0, 1), (0, 0), "test"), CostModel()).links(range(2))
    assert one.net_rails == 1 and one.bottleneck_label == "mlx5_0 400 Gb/s InfiniBand"
    assert one.net_description == "mlx5_0 400 Gb/s InfiniBand (46 GB/s)"


def test_all_to_all_on_a_pcie_box_shares_each_gpus_pcie_link() -> None:
    """8 L40S without NVLink: each GPU sends 7 pieces of B/8 through its one PCIe Gen4 x16 link (25.83 GB/s);
    the slowest pair alone (SYS, 15.5 GB/s, one piece) would say 4x less."""
    host = load_sample("pcie-l40s-8").host
    links = GroupPricer(Placement((host,), (0,), (0,) * 8, tuple(range(8)), "test"), CostModel()).links(range(8))
    assert links.egress_gbps == pytest.approx(25.83)
    size = 8_000_000
    expected = 5e-6 + 7 * (size / 8) / 25.83e9  # SYS alpha 5 us; 276.0 us, not 5 us + 1e6 / 15.5e9 = 69.5 us
    assert collective_cost("all_to_all", links, size).time_s == pytest.approx(expected)


def test_equally_near_nics_are_dealt_out_to_the_gpus_that_share_them() -> None:
    """DGX A100: GPUs 0 and 1 sit under one PCIe switch with mlx5_0 and mlx5_1 (both PXB): one NIC each."""
    host = load_sample("dgx-a100").host
    names = [CostModel().nic_hop(host, gpu)[1] for gpu in range(8)]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]


def test_gpus_sharing_a_nic_split_its_bandwidth() -> None:
    """DGX-1: 2 GPUs per 100 Gb/s NIC (11.625 GB/s through NCCL). Every DP group [g, 8+g] runs at once,
    so GPU 0's group gets half of mlx5_0; so does a pipeline hop from GPU 0 to the next node."""
    host = load_sample("dgx1-v100").host
    placement = Placement((host, host), (0, 0), (0,) * 8 + (1,) * 8, tuple(range(8)) * 2, "test")
    pricer = GroupPricer(placement, CostModel())
    links = pricer.links([0, 8])
    assert links.rank_net_gbps == pytest.approx(11.625 / 2)
    assert links.node_net_gbps == pytest.approx(11.625 / 2)
    assert links.bottleneck_label == "mlx5_0 100 Gb/s InfiniBand, shared by 2 GPUs"
    both = pricer.links([0, 1, 8, 9])  # a group using both GPUs of the NIC gets all of it
    assert both.node_net_gbps == pytest.approx(11.625) and both.net_rails == 1
    assert pricer.chain_links([0, 8]).intra_gbps == pytest.approx(11.625 / 2)


@pytest.mark.parametrize(
    ("gbps", "text"),
    [(372.0, "372 GB/s"), (46.5, "46 GB/s"), (5.8125, "5.8 GB/s"), (0.1308, "0.131 GB/s"), (math.inf, "unbounded")],
)
def test_bandwidths_for_people_never_round_to_zero(gbps: float, text: str) -> None:
    """A 2.5 Gb/s NIC shared by 2 GPUs is 0.131 GB/s, which a finding must not print as `0 GB/s`."""
    assert format_gbps(gbps) == text


def test_unavailable_algorithm_is_bad_input() -> None:
    with pytest.raises(InputError, match="not available"):
        collective_cost("all_reduce", uniform_links(8, 1, (1.0, 300.0), (5.0, 12.5)), GIB, "hierarchical")
    with pytest.raises(InputError, match="unknown operation"):
        collective_cost("allsum", uniform_links(8, 1, (1.0, 300.0), (5.0, 12.5)), GIB)


def test_nvlink_hop_uses_ncclss_per_link_constants() -> None:
    """H100 NV18 = 18 x 20.6 GB/s; A100 NV12 = 12 x 20 = 240, capped at 235 as NCCL's tuner caps sm80 rings:
    what NCCL rings measure, not line rate."""
    model = CostModel()
    h100 = load_sample("dgx-h100").host
    a100 = load_sample("dgx-a100").host
    assert model.gpu_hop(h100, 0, 1).bandwidth_gbps == pytest.approx(18 * 20.6)
    assert model.gpu_hop(a100, 0, 1).bandwidth_gbps == pytest.approx(235.0)
    assert model.gpu_hop(h100, 0, 1).link_class == "NV"


def test_nic_hop_is_the_nearest_nic() -> None:
    host = load_sample("dgx-h100").host
    hop, name = CostModel().nic_hop(host, 3)
    assert name == "mlx5_3" and hop.link_class == "NET"
    assert hop.bandwidth_gbps == pytest.approx(400 / 8 * 0.93)


def _one_host(host_name: str, positions: tuple[int, ...]) -> Placement:
    host = load_sample(host_name).host
    return Placement((host,), (0,), (0,) * len(positions), positions, "test")


def test_group_pricer_memoises_identical_shapes() -> None:
    host = load_sample("dgx-h100").host
    placement = Placement((host,) * 2, (0, 0), (0, 0, 1, 1), (0, 1, 0, 1), "test")
    pricer = GroupPricer(placement, CostModel())
    assert pricer.links([0, 1]) is pricer.links([2, 3])
    across = pricer.links([0, 2])
    assert across.nodes == 2 and across.bottleneck_class == "NET"


def test_nvlink_pair_group_across_sockets_is_priced_on_sys() -> None:
    host = host_from_matrix(NVLINK_PAIRS_4)
    pricer = GroupPricer(Placement((host,), (0,), (0, 0), (0, 2), "test"), CostModel())
    assert pricer.links([0, 1]).intra_class == "SYS"


def test_overrides_file() -> None:
    model = load_cost_overrides('{"alpha_us": {"NV": 2}, "bandwidth_gbps": {"SYS": 3.5}, "nvlink_gbps_per_link": {"4": 25}}',
                                "params.json")
    h100 = load_sample("dgx-h100").host
    assert model.gpu_hop(h100, 0, 1).bandwidth_gbps == pytest.approx(18 * 25)
    assert model.gpu_hop(h100, 0, 1).alpha_us == 2
    assert model.gpu_hop(host_from_matrix(NVLINK_PAIRS_4), 0, 2).bandwidth_gbps == 3.5


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[1]", "expected a JSON object"),
        ('{"alpha": {}}', "unknown key 'alpha'"),
        ('{"alpha_us": {"QPI": 1}}', "unknown link class"),
        ('{"bandwidth_gbps": {"NV": -1}}', "positive number"),
        ("{", "not JSON"),
        ('{"nvlink_gbps_per_link": {"x": 1}}', "generation"),
    ],
)
def test_bad_override_files(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        load_cost_overrides(text, "params.json")


def test_calibration_from_peer_copies_and_collectives() -> None:
    host = load_sample("dgx-h100").host
    measured = Measurements(
        source="bench",
        peer_copies=(PeerCopy(0, 1, unidir_gbps=390.0, latency_us=2.5),),
        collectives=(CollectiveResult("all_reduce", 1 << 30, "bf16", 1.0, 100.0, 300.0, 8),),
    )
    model = calibrate(CostModel(), measured, host)
    assert model.pair_alpha_us[(0, 1)] == 2.5
    pricer = GroupPricer(_one_host("dgx-h100", tuple(range(8))), model)
    predicted = collective_cost("all_reduce", pricer.links(range(8)), 1 << 30)
    assert predicted.busbw_gbps == pytest.approx(300.0, rel=1e-3), "the 8-GPU all_reduce now predicts the measured busbw"
    assert not math.isclose(CostModel().gpu_hop(host, 2, 3).bandwidth_gbps, model.gpu_hop(host, 2, 3).bandwidth_gbps)


def test_calibration_of_the_network_from_a_two_node_collective() -> None:
    host = load_sample("dgx-h100").host
    measured = Measurements("bench", collectives=(CollectiveResult("all_reduce", 1 << 30, "bf16", 1.0, 50.0, 100.0, 16),))
    model = calibrate(CostModel(), measured, host)
    assert set(model.class_scale) == {"NET"}
    placement = Placement((host,) * 2, (0, 0), tuple(r // 8 for r in range(16)), tuple(r % 8 for r in range(16)), "test")
    predicted = collective_cost("all_reduce", GroupPricer(placement, model).links(range(16)), 1 << 30)
    assert predicted.busbw_gbps == pytest.approx(100.0, rel=1e-3)
