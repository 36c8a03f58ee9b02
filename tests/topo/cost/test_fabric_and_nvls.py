"""NIC efficiency by fabric (what the snapshot says of each port) and NVLS gain by group size, against the published
runs they come from (tests/topo/cost/test_published.py holds the whole table)."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.cost.collectives import collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import NIC_EFFICIENCY, NIC_EFFICIENCY_SOURCES, CostModel, nic_efficiency, nic_fabric
from linkscope.topo.formats.source import load_source
from linkscope.topo.layout.placement import Placement
from linkscope.topo.model.host import Host, Nic


@pytest.mark.parametrize(("nic", "fabric"), [
    (Nic("mlx5_0", netdev="ibp24s0", link_layer="InfiniBand", rate_gbit_per_s=400), "InfiniBand"),
    (Nic("mlx5_0", netdev="ens7np0", link_layer="Ethernet", rate_gbit_per_s=400), "RoCE"),
    (Nic("mlx5_3", netdev="gpu3rdma0", link_layer="Ethernet", rate_gbit_per_s=400), "gIB"),
    (Nic("rdmap79s0", rate_gbit_per_s=100), "EFA"),
    (Nic("efa_0"), "EFA"),
    (Nic("mlx5_0"), None),
])
def test_the_fabric_is_what_the_snapshot_says_of_the_port(nic: Nic, fabric: str | None) -> None:
    assert nic_fabric(nic) == fabric
    share, said = nic_efficiency(nic)
    assert said == (fabric or "InfiniBand assumed") and share == NIC_EFFICIENCY[fabric or "InfiniBand"]


def test_every_fabric_has_its_published_source_and_infiniband_reaches_the_most() -> None:
    assert set(NIC_EFFICIENCY) == set(NIC_EFFICIENCY_SOURCES) == {"InfiniBand", "RoCE", "gIB", "EFA"}
    assert max(NIC_EFFICIENCY, key=NIC_EFFICIENCY.__getitem__) == "InfiniBand"


def _two_nodes_one_gpu_each(host: Host) -> float:
    placement = Placement((host, host), (0, 0), (0, 1), (0, 0), "block")
    return collective_cost("all_reduce", GroupPricer(placement, CostModel()).links(range(2)), 8 << 30, "auto").busbw_gbps


def test_one_400g_nic_per_node_prices_by_its_fabric_and_says_it() -> None:
    """google/dranet's 2 pods x (1 H200 + one 400G gIB NIC) reached 31.9 GB/s; InfiniBand NDR reaches ~46.5."""
    host = load_source("sample:dgx-h100").host
    gib = dataclasses.replace(host, nics=tuple(dataclasses.replace(nic, link_layer="Ethernet", netdev=f"gpu{i}rdma0")
                                               for i, nic in enumerate(host.nics)))
    assert _two_nodes_one_gpu_each(host) == pytest.approx(50 * NIC_EFFICIENCY["InfiniBand"], rel=1e-3)
    assert _two_nodes_one_gpu_each(gib) == pytest.approx(50 * NIC_EFFICIENCY["gIB"], rel=1e-3)
    assert abs(_two_nodes_one_gpu_each(gib) / 31.89 - 1) <= 0.20
    hop, _ = CostModel().nic_hop(gib, 0)
    assert "gIB" in hop.label


@pytest.mark.parametrize(("gpus", "published"), [(2, 368.0), (3, 368.0), (4, 368.0), (5, 420.0), (6, 440.0), (7, 460.0),
                                                 (8, 480.0)])
def test_nvls_gains_nothing_up_to_4_gpus_and_its_full_gain_at_8(gpus: int, published: float) -> None:
    """NVIDIA/nccl #1455, 8x H100, NCCL_ALGO=NVLS: busbw 365-370 from 2 to 4 GPUs (as rings), 420, 440, 460, 480."""
    host = load_source("sample:dgx-h100").host
    placement = Placement((host,), (0,), (0,) * gpus, tuple(range(gpus)), "block")
    links = GroupPricer(placement, CostModel()).links(range(gpus))
    nvls = collective_cost("all_reduce", links, 4 << 30, "nvls").busbw_gbps
    ring = collective_cost("all_reduce", links, 4 << 30, "ring").busbw_gbps
    assert abs(nvls / published - 1) <= 0.03
    assert (nvls <= ring * 1.01) == (gpus <= 4)


def test_the_b200_hgx_sample_is_nvidias_hgx_b200() -> None:
    host = load_source("sample:b200-hgx").host
    assert len(host.gpus) == 8 and {gpu.name for gpu in host.gpus} == {"NVIDIA B200"}
    assert {link.token for link in host.links} == {"NV18"}
    compute = [nic for nic in host.nics if nic.rate_gbit_per_s == 400]
    assert len(compute) == 8 and all(host.gpu_nic[gpu][gpu] == "PIX" for gpu in range(8))
    placement = Placement((host,), (0,), (0,) * 8, tuple(range(8)), "block")
    ring = collective_cost("all_reduce", GroupPricer(placement, CostModel()).links(range(8)), 8 << 30, "ring")
    assert ring.busbw_gbps == pytest.approx(18 * 40.1 * 0.997, rel=0.01)  # NCCL's SM100 NVLink constant, 18 links
