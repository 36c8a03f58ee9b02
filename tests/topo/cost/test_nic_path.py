"""GPU<->NIC expectations follow the path: the GPU's PCIe link, the NIC's, the socket link a SYS path crosses."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.cost.expect import row_expectations
from linkscope.topo.cost.params import INTER_SOCKET_ASSUMED, INTER_SOCKET_GBPS, NIC_EFFICIENCY, CostModel
from linkscope.topo.formats.source import load_source
from linkscope.topo.machine.links import PCIE_PATH_FACTOR, PCIE_TYPICAL_FRACTION, PCIE_X16_GBPS
from linkscope.topo.model.host import Host, LinkKind
from linkscope.topo.model.measurements import CollectiveResult, Measurements
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.paths import REAL

ADROIT = REAL / "topo" / "a100-pcie-4gpu-adroit-node-sys-1nic-space-tab-header-comma-affinity.txt"
"""4 A100 PCIe, one mlx5_0: GPU0 and GPU1 reach it through NODE, GPU2 and GPU3 through SYS (read by hand)."""
L40S = REAL / "topo" / "l40s-8gpu-pcie-node-sys-1nic-pass-case.txt"
"""8 L40S, one NIC0, SYS to every GPU (read by hand)."""
SOCKET_GBPS = INTER_SOCKET_GBPS[INTER_SOCKET_ASSUMED]


def _at_rate(host: Host, gbit: float) -> Host:
    """The host with its NICs at a line rate the topology text does not say (a synthetic variant)."""
    return dataclasses.replace(host, nics=tuple(dataclasses.replace(nic, rate_gbit_per_s=gbit) for nic in host.nics))


def test_a_cross_socket_nic_caps_at_the_socket_link_and_a_near_one_does_not() -> None:
    """Adroit with a 200 Gb/s NIC: NODE GPUs get the NIC's 23.25 GB/s less the path's share; SYS GPUs the socket link's
    rate (NCCL's figure for the assumed CPU), and the label and the assumption say so."""
    host = _at_rate(load_source(str(ADROIT)).host, 200.0)
    model = CostModel()
    near, _ = model.nic_hop(host, 0)
    far, _ = model.nic_hop(host, 2)
    assert near.limit == "network" and near.bandwidth_gbps == pytest.approx(
        25 * NIC_EFFICIENCY["InfiniBand"] * PCIE_PATH_FACTOR[LinkKind.NODE])
    assert far.limit == "inter-socket" and far.bandwidth_gbps == pytest.approx(SOCKET_GBPS)
    assert "via SYS" in far.label and "across sockets" in far.label
    assert "socket link" in far.assumed and INTER_SOCKET_ASSUMED in far.assumed
    assert far.bandwidth_gbps < near.bandwidth_gbps


def test_a_slow_nic_across_sockets_is_still_bound_by_the_nic() -> None:
    """The real Adroit text names no NIC rate (100 Gb/s assumed): 12.5 x 0.93 through the CPUs is under the socket
    link, so the NIC, not the socket link, sets it; SYS still below NODE."""
    host = load_source(str(ADROIT)).host
    model = CostModel()
    far, near = model.nic_hop(host, 3)[0], model.nic_hop(host, 1)[0]
    assert far.limit == "network" and far.bandwidth_gbps == pytest.approx(
        12.5 * NIC_EFFICIENCY["InfiniBand"] * PCIE_PATH_FACTOR[LinkKind.SYS])
    assert far.bandwidth_gbps < near.bandwidth_gbps


def test_every_gpu_of_a_box_whose_only_nic_is_across_sockets_gets_the_socket_link() -> None:
    """L40S box, one NIC SYS to all 8 GPUs; at 400 Gb/s every rail is the socket link's."""
    host = _at_rate(load_source(str(L40S)).host, 400.0)
    hops = [CostModel().nic_hop(host, gpu)[0] for gpu in range(8)]
    assert all(hop.limit == "inter-socket" and hop.bandwidth_gbps == pytest.approx(SOCKET_GBPS) for hop in hops)


def test_a_gpu_trained_to_x8_bounds_its_rail_at_its_pcie_link() -> None:
    """Degraded DGX H100 sample: GPU 3 on PCIe Gen5 x8 (typical 63 x 8/16 x 0.82) under a 400 Gb/s NIC's 46.5."""
    host = load_sample("dgx-h100-degraded").host
    hop, _ = CostModel().nic_hop(host, 3)
    assert hop.limit == "gpu-pcie" and "GPU on PCIe Gen5 x8" in hop.label
    assert hop.bandwidth_gbps == pytest.approx(PCIE_X16_GBPS[5] / 2 * PCIE_TYPICAL_FRACTION)
    assert CostModel().nic_hop(host, 2)[0].limit == "network"


def _nic0_on(host: Host, generation: int, width: int) -> Host:
    first = dataclasses.replace(host.nics[0], pcie_gen_max=generation, pcie_width_max=width)
    return dataclasses.replace(host, nics=(first, *host.nics[1:]))


def test_a_nic_on_a_narrow_pcie_link_bounds_the_rail_when_the_snapshot_read_it() -> None:
    """Synthetic: mlx5_0 of the DGX H100 sample read as PCIe Gen4 x8 (sysfs max_link_speed/width): 31.5 / 2 x 0.82
    under its 46.5 GB/s; read as Gen5 x16 it is not the narrow part, and nothing about it is assumed."""
    host = load_sample("dgx-h100").host
    narrow, name = CostModel().nic_hop(_nic0_on(host, 4, 8), 0)
    assert name == "mlx5_0" and narrow.limit == "nic-pcie" and "NIC on PCIe Gen4 x8" in narrow.label
    assert narrow.bandwidth_gbps == pytest.approx(PCIE_X16_GBPS[4] / 2 * PCIE_TYPICAL_FRACTION)
    wide, _ = CostModel().nic_hop(_nic0_on(host, 5, 16), 0)
    assert wide.limit == "network" and "NIC PCIe" not in wide.assumed
    assert "NIC PCIe links no narrower" in CostModel().nic_hop(host, 0)[0].assumed


def _two_node_row(snapshot: Snapshot, per_host: int) -> dict[str, object]:
    ranks = 2 * per_host
    result = CollectiveResult("all_reduce", 8 << 30, "float", 1e6, 8.6, 16.1, ranks)
    rows = row_expectations(Measurements("nccl-tests", collectives=(result,)), snapshot).all()
    return rows[0].to_json()


@pytest.mark.parametrize(
    ("snapshot", "per_host", "limited_by", "part"),
    [
        (load_sample("dgx-h100"), 8, "network", "network"),
        (load_sample("dgx-h100-degraded"), 8, "pcie", "gpu-pcie"),
        (Snapshot((_at_rate(load_source(str(ADROIT)).host, 200.0),)), 4, "pcie", "inter-socket"),
    ],
    ids=["nics", "gpu-x8", "cross-socket"],
)
def test_a_multi_node_row_names_the_part_of_the_network_path_that_limits_it(
        snapshot: Snapshot, per_host: int, limited_by: str, part: str) -> None:
    """Two hosts of each box: `limited_by` is pcie where the narrowest GPU<->NIC path is PCIe-bound, and
    `limiting_part` says which part; the note says what was assumed of the NICs' PCIe links."""
    row = _two_node_row(snapshot, per_host)
    assert row["limited_by"] == limited_by and row["limiting_part"] == part
    assert "assumed: NIC PCIe links no narrower than the NICs' rates (not read)" in str(row["note"])


def test_a_row_inside_one_node_has_no_limiting_network_part() -> None:
    result = CollectiveResult("all_reduce", 8 << 30, "float", 1e6, 8.6, 15.0, 8)
    row = row_expectations(Measurements("nccl-tests", collectives=(result,)), load_sample("dgx-h100")).all()[0]
    assert row.limited_by == "nvlink" and row.to_json()["limiting_part"] is None
