"""The cost model as NCCL runs: rings over disjoint NVLinks, NVLS and NVLS-tree, CollNet, host-memory PCIe."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.cost.channels import disjoint_rings
from linkscope.topo.cost.collectives import GroupLinks, algorithm_times, collective_cost, uniform_links
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import HOST_MEMORY_GBPS, HOST_PATH_FRACTION, NVLS_ALLREDUCE_FRACTION, CostModel
from linkscope.topo.layout.placement import Placement
from linkscope.topo.machine.links import pcie_speed
from linkscope.topo.model.host import Host, P2PStatus
from linkscope.topo.samples import load_sample
from support.layout import NVLINK_PAIRS_4, host_from_matrix

GIB = 1 << 30


def _links(host: Host, ranks: int, nodes: int = 1, model: CostModel | None = None) -> GroupLinks:
    per_node = ranks // nodes
    placement = Placement((host,) * nodes, (0,) * nodes, tuple(r // per_node for r in range(ranks)),
                          tuple(r % per_node for r in range(ranks)), "test")
    return GroupPricer(placement, model or CostModel()).links(range(ranks))


def test_hybrid_cube_mesh_runs_rings_over_disjoint_links() -> None:
    """DGX-1: the NV2 bonds form one cycle and the NV1 links another; each carries a ring each way,
    so 8 GPUs get 2 x 40 + 2 x 20 = 120 GB/s over 6 one-link rings, three times one ring's 40."""
    host = load_sample("dgx1-v100").host
    links = _links(host, 8)
    assert links.intra_gbps == pytest.approx(120.0)
    assert links.intra_rings == 6
    assert set(links.links_used) == {"NV1", "NV2"}
    cost = collective_cost("all_reduce", links, 8 * GIB, "ring")
    assert cost.busbw_gbps == pytest.approx(120.0, rel=1e-3) and cost.channels == 6


def test_disjoint_rings_use_every_link_once() -> None:
    host = load_sample("dgx1-v100").host

    def count(a: int, b: int) -> int:
        link = host.link(a, b)
        return link.nvlink_count

    found = disjoint_rings(range(8), count, lambda a, b: 20.0 * count(a, b))
    assert found is not None and found.widths == (2, 1)
    used: dict[tuple[int, int], int] = {}
    for cycle, width in zip(found.cycles, found.widths, strict=True):
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            key = (min(a, b), max(a, b))
            used[key] = used.get(key, 0) + width
    assert all(used[key] <= count(*key) for key in used), "no link carries more rings than it has lanes"
    assert sum(used.values()) == 24, "all 24 NVLinks of the mesh carry a ring"


def test_a_full_mesh_of_nv2_bonds_holds_three_rings() -> None:
    """4 V100s with NV2 to every peer (6 links each): three one-link cycles use every link, 120 GB/s;
    the widest cycle first would take one two-link cycle and strand the rest (80)."""
    host = host_from_matrix(["X NV2 NV2 NV2", "NV2 X NV2 NV2", "NV2 NV2 X NV2", "NV2 NV2 NV2 X"],
                            gpu_name="Tesla V100-SXM2-16GB")
    links = _links(host, 4)
    assert links.intra_gbps == pytest.approx(120.0) and links.intra_rings == 6


def test_nvswitch_boxes_run_one_ring_on_the_gpus_links() -> None:
    """On NVSwitch the NV18 of every pair is the GPU's whole port count: a second ring shares it."""
    links = _links(load_sample("dgx-h100").host, 8)
    assert links.intra_rings == 1 and links.intra_gbps == pytest.approx(18 * 20.6)


def test_nvlink_pairs_box_has_no_nvlink_only_ring_of_four() -> None:
    host = host_from_matrix(NVLINK_PAIRS_4)
    assert _links(host, 4).intra_rings == 1
    assert _links(host, 4).intra_class == "SYS"


def test_nvls_wins_large_all_reduce_on_hopper_and_rings_win_small() -> None:
    links = _links(load_sample("dgx-h100").host, 8)
    assert links.nvls_gbps == pytest.approx(NVLS_ALLREDUCE_FRACTION[4] * 18 * 20.6)
    large = collective_cost("all_reduce", links, 8 * GIB)
    assert large.algo == "nvls"
    assert large.busbw_gbps == pytest.approx(480, rel=0.02)
    assert large.algbw_gbps == pytest.approx(275, rel=0.02)
    assert collective_cost("all_reduce", links, 64 * 1024).algo == "ring"
    assert collective_cost("all_gather", links, 8 * GIB).algo == "ring", "NVLS all_gather is slower than a ring"
    # NCCL's Simple protocol starts a ring of 8 in 8.4 + 14 x 3.4 = 56 us (tuning.cc): 0.1% of 8 GiB at 370.8 GB/s
    assert collective_cost("all_reduce", links, 8 * GIB, "ring").busbw_gbps == pytest.approx(370.8 * (1 - 0.0012), rel=5e-4)


def test_no_nvls_before_hopper_nor_on_uniform_links() -> None:
    a100 = _links(load_sample("dgx-a100").host, 8)
    assert a100.nvls_gbps == 0
    assert "nvls" not in algorithm_times("all_reduce", a100, GIB)
    with pytest.raises(InputError, match="not available"):
        collective_cost("all_reduce", a100, GIB, "nvls")
    assert uniform_links(8, 1, (1.0, 300.0), (5.0, 12.5)).nvls_gbps == 0


def test_a_degraded_gpu_slows_nvls_for_the_whole_group() -> None:
    """GPU 3 of the degraded sample has 16 of 18 NVLinks: NVLS runs at its pace."""
    links = _links(load_sample("dgx-h100-degraded").host, 8)
    assert links.nvls_gbps == pytest.approx(NVLS_ALLREDUCE_FRACTION[4] * 16 * 20.6)


def test_nvls_tree_across_two_nodes_rides_every_rail() -> None:
    """2 DGX H100: NVLS inside each node pipelined with 8 x 46.5 GB/s of rails; NVLS (275) limits."""
    links = _links(load_sample("dgx-h100").host, 16, nodes=2)
    cost = collective_cost("all_reduce", links, 9 * GIB)
    assert cost.algo == "nvls_tree"
    assert cost.algbw_gbps == pytest.approx(links.nvls_gbps, rel=0.01)
    assert any(label.startswith("mlx5_7") for label in cost.links_used)
    assert "nvls" not in algorithm_times("all_reduce", links, GIB), "NVLS across nodes needs SHARP in the network"


def test_collnet_only_where_the_snapshot_says_sharp() -> None:
    host = load_sample("dgx-a100").host
    plain = _links(host, 16, nodes=2)
    assert not plain.collnet and "collnet" not in algorithm_times("all_reduce", plain, GIB)
    sharp_host = dataclasses.replace(host, capabilities=dataclasses.replace(host.capabilities, sharp=True))
    sharp = _links(sharp_host, 16, nodes=2)
    assert sharp.collnet
    collnet = collective_cost("all_reduce", sharp, 8 * GIB, "collnet")
    ring = collective_cost("all_reduce", sharp, 8 * GIB, "ring")
    assert collnet.time_s < ring.time_s, "each node sends its buffer once instead of 2(n-1)/n times"
    assert collective_cost("all_reduce", sharp, 8 * GIB).algo == "collnet"


def test_pcie_without_p2p_goes_through_host_memory() -> None:
    """RTX 4090s without P2P: each ring hop is staged through host memory at ~2/3 of the PCIe copy rate."""
    host = load_sample("consumer-2gpu").host
    hop = CostModel().gpu_hop(host, 0, 1)
    assert hop.via_host
    assert hop.bandwidth_gbps == pytest.approx(HOST_PATH_FRACTION * pcie_speed(host.gpus[0]).typical_gbps)
    with_p2p = dataclasses.replace(host, links=tuple(dataclasses.replace(link, p2p=P2PStatus("OK", "OK"))
                                                     for link in host.links))
    assert not CostModel().gpu_hop(with_p2p, 0, 1).via_host
    assert CostModel().gpu_hop(with_p2p, 0, 1).bandwidth_gbps > hop.bandwidth_gbps


def test_eight_gpus_through_host_memory_are_bound_by_it() -> None:
    """8 Gen5 GPUs without P2P: 8 flows each way share the host's memory, so 8 GPUs do not beat 4."""
    host = load_sample("pcie-l40s-8").host
    gpus = tuple(dataclasses.replace(gpu, name="NVIDIA GeForce RTX 5090", pcie_gen_max=None) for gpu in host.gpus)
    none = P2PStatus("NS", "NS")
    host = dataclasses.replace(host, gpus=gpus, links=tuple(dataclasses.replace(link, p2p=none) for link in host.links))
    eight, four = _links(host, 8), _links(host, 4)
    assert eight.intra_gbps == pytest.approx(HOST_MEMORY_GBPS / 16)
    assert eight.intra_gbps < four.intra_gbps


def test_the_worked_example_keeps_one_ring_on_uniform_links() -> None:
    """--intra/--inter links have one ring and no NVLS: the DOMAIN figures stay exact."""
    links = uniform_links(8, 1, (1.0, 300.0), (5.0, 12.5))
    assert links.intra_rings == 1
    assert round(collective_cost("all_reduce", links, GIB).time_s * 1e3, 2) == 6.28


def test_pxn_sends_through_an_nvlink_peer_next_to_the_nic() -> None:
    """GPU 1 reaches mlx5_0 through the CPU (NODE), but its NVLink peer GPU 0 sits under the NIC's switch:
    NCCL's PXN moves the data over NVLink to GPU 0 and out, without the CPU path's loss."""
    rows = ["X NV12", "NV12 X"]
    pxn = host_from_matrix(rows, nic_tokens=["PIX", "NODE"], nic_gbit=200.0)
    hop, name = CostModel().nic_hop(pxn, 1)
    assert name == "mlx5_0" and "via PXN (GPU 0)" in hop.label
    assert hop.bandwidth_gbps == pytest.approx(CostModel().nic_hop(pxn, 0)[0].bandwidth_gbps)
    no_nvlink = host_from_matrix(["X PHB", "PHB X"], nic_tokens=["PIX", "NODE"], nic_gbit=200.0)
    far, _ = CostModel().nic_hop(no_nvlink, 1)
    assert "via NODE" in far.label and far.bandwidth_gbps < hop.bandwidth_gbps
