"""Health rules (`linkscope doctor`): each fires on a machine made for it and stays silent on a healthy one."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.health.environment import parse_env_file
from linkscope.topo.model.host import Link, LinkKind, P2PStatus
from linkscope.topo.model.measurements import Measurements, PeerCopy
from linkscope.topo.samples import load_sample, sample_names
from support.health import codes, health, one, recording_of, with_capabilities, with_gpu, with_host

H100 = load_sample("dgx-h100")
DEGRADED = load_sample("dgx-h100-degraded")
NODE0_CPUS = frozenset(list(range(0, 56)) + list(range(112, 168)))
NODE1_CPUS = frozenset(list(range(56, 112)) + list(range(168, 224)))


@pytest.mark.parametrize("name", [name for name in sample_names() if name not in ("dgx-h100-degraded", "h100-cluster-mixed")])
def test_healthy_samples_give_no_finding(name: str) -> None:
    assert health(name) == ()


def test_degraded_gpu_has_fewer_links_and_a_narrow_pcie_link() -> None:
    findings = health(DEGRADED)
    assert codes(findings) == ["nvlink-fewer-links", "pcie-width-reduced"]
    links = one(findings, "nvlink-fewer-links")
    assert links.severity == "error" and links.gpus == (3,)
    assert "GPU3: 16 of 18 NVLinks up (ports 16, 17 down); its pairs show NV16" in links.evidence
    width = one(findings, "pcie-width-reduced")
    assert width.gpus == (3,) and width.evidence == ("GPU3: x8 of x16 (bus 00000000:42:00.0)",)


def test_fewer_links_read_from_pair_counts_when_ports_are_unknown() -> None:
    """An `nvidia-smi topo -m` text has no ports: NV16 pairs among NV18 still give GPU3 away."""
    no_ports = with_host(DEGRADED, gpus=tuple(dataclasses.replace(g, nvlinks=()) for g in DEGRADED.host.gpus))
    assert one(health(no_ports), "nvlink-fewer-links").gpus == (3,)


def test_direct_nvlink_mesh_with_uneven_pairs_is_not_short() -> None:
    """DGX-1 pairs have NV1 or NV2, but every V100 has its six links up."""
    assert "nvlink-fewer-links" not in codes(health("dgx1-v100"))


def test_ports_down_on_every_gpu_alike_are_links_down_not_fewer_links() -> None:
    gpus = tuple(dataclasses.replace(g, nvlinks=tuple(dataclasses.replace(p, active=p.link < 16) for p in g.nvlinks))
                 for g in H100.host.gpus)
    findings = health(with_host(H100, gpus=gpus))
    assert codes(findings) == ["nvlink-links-down"] * 8
    assert findings[0].evidence == ("GPU0: ports 16, 17 inactive, 16 active",)


def test_degraded_gpu_is_not_reported_twice() -> None:
    assert "nvlink-links-down" not in codes(health(DEGRADED))


def test_error_counters_that_grow_in_a_recording() -> None:
    errors = {"crc_flit": 0, "crc_data": 0, "replay": 5, "recovery": 0}
    first = {2: {"nvlink_errors": tuple(errors.items())}}
    last = {2: {"nvlink_errors": tuple({**errors, "replay": 125, "crc_flit": 3}.items())}}
    recorded = dataclasses.replace(H100, recording=recording_of(H100.host, [first, first, last]))
    finding = one(health(recorded), "nvlink-errors-growing")
    assert finding.gpus == (2,) and finding.evidence == ("GPU2: crc_flit +3, replay +120 in 2 s",)


def test_error_counters_that_stay_put_are_silent() -> None:
    steady = {gpu.index: {"nvlink_errors": (("replay", 7),)} for gpu in H100.host.gpus}
    recorded = dataclasses.replace(H100, recording=recording_of(H100.host, [steady, steady, steady]))
    assert health(recorded) == ()


def test_fabric_not_ready() -> None:
    finding = one(health(with_capabilities(H100, nvlink_fabric="In Progress")), "nvlink-fabric-incomplete")
    assert finding.severity == "error" and finding.gpus == tuple(range(8)) and "In Progress" in finding.message


def test_idle_gpus_at_gen1_are_not_a_fault() -> None:
    idle = with_host(H100, gpus=tuple(dataclasses.replace(g, pcie_gen_current=1) for g in H100.host.gpus))
    assert health(idle) == ()


def test_gen1_under_load_in_a_recording() -> None:
    busy = {4: {"pcie_gen_current": 1, "pcie_tx_gbps": 3.2, "pcie_rx_gbps": 0.1}}
    resting = {4: {"pcie_gen_current": 1}}
    recorded = dataclasses.replace(H100, recording=recording_of(H100.host, [resting, busy, resting]))
    finding = one(health(recorded), "pcie-gen-low-under-load")
    assert finding.gpus == (4,) and finding.evidence == ("GPU4: Gen1 of Gen5 at t = 1 s with 3.3 GB/s on PCIe",)


def test_gen1_without_traffic_in_a_recording_is_silent() -> None:
    resting = {index: {"pcie_gen_current": 1, "pcie_tx_gbps": 0.01} for index in range(8)}
    recorded = dataclasses.replace(H100, recording=recording_of(H100.host, [resting, resting]))
    assert health(recorded) == ()


def test_nearest_nic_on_another_numa_node() -> None:
    nics = tuple(dataclasses.replace(nic, numa_node=1) if nic.name == "mlx5_0" else nic for nic in H100.host.nics)
    finding = one(health(with_host(H100, nics=nics)), "nic-numa-mismatch")
    assert finding.gpus == (0,) and finding.evidence == ("GPU0 on NUMA node 0, nearest NIC mlx5_0 on node 1",)


def test_process_bound_away_from_its_gpu() -> None:
    finding = one(health(H100, cpu_binding=NODE1_CPUS, local_rank=0), "cpu-binding-far")
    assert finding.gpus == (0,) and "LOCAL_RANK 0's GPU" in finding.message


def test_process_bound_near_its_gpu_or_unbound_is_silent() -> None:
    assert health(H100, cpu_binding=NODE0_CPUS, local_rank=0) == ()
    assert health(H100, cpu_binding=NODE0_CPUS | NODE1_CPUS) == ()
    assert health(H100, cpu_binding=NODE1_CPUS) == (), "without LOCAL_RANK, node-1 CPUs still reach GPUs 4-7"


def test_cpu_binding_follows_cuda_order() -> None:
    """CUDA_VISIBLE_DEVICES=4,... makes local rank 0 run on GPU 4, which node 1's CPUs serve."""
    assert health(H100, cpu_binding=NODE1_CPUS, local_rank=0, cuda_order=(4, 5, 6, 7)) == ()
    assert one(health(H100, cpu_binding=NODE0_CPUS, local_rank=0, cuda_order=(4, 5, 6, 7)), "cpu-binding-far").gpus == (4,)


def _with_link(snapshot_link: Link) -> object:
    links = tuple(snapshot_link if (link.a, link.b) == (snapshot_link.a, snapshot_link.b) else link
                  for link in H100.host.links)
    return with_host(H100, links=links)


def test_nvlink_pair_without_peer_access_is_an_error() -> None:
    snapshot = _with_link(Link(0, 1, LinkKind.NVLINK, 18, 4, P2PStatus("NS", "NS", "NS", "NS")))
    finding = one(health(snapshot), "p2p-off")  # type: ignore[arg-type]
    assert finding.severity == "error" and finding.gpus == (0, 1)


def test_p2p_disabled_by_registry_key() -> None:
    snapshot = _with_link(Link(2, 3, LinkKind.NVLINK, 18, 4, P2PStatus("DR", "DR", "OK", "NS")))
    finding = one(health(snapshot), "p2p-off")  # type: ignore[arg-type]
    assert "registry key (DR)" in finding.evidence[0]


def test_pcie_pair_without_p2p_where_its_class_has_it() -> None:
    l40s = load_sample("pcie-l40s-8")
    links = tuple(dataclasses.replace(link, p2p=P2PStatus("NS", "NS", "NS", "NS")) if (link.a, link.b) == (0, 1) else link
                  for link in l40s.host.links)
    finding = one(health(with_host(l40s, links=links)), "p2p-off")
    assert finding.severity == "warning" and finding.gpus == (0, 1)


def test_no_p2p_by_design_is_silent() -> None:
    """GeForce cards and SYS pairs never have P2P: nothing to fix."""
    assert health("consumer-2gpu") == () and health("pcie-l40s-8") == ()


def test_translating_iommu_with_pcie_peer_traffic() -> None:
    l40s = load_sample("pcie-l40s-8")
    finding = one(health(with_capabilities(l40s, iommu_enabled=True, iommu_mode="DMA-FQ")), "iommu-translates-p2p")
    assert "default domain DMA-FQ" in finding.evidence[0] and 0 in finding.gpus


def test_passthrough_iommu_is_silent() -> None:
    assert health(with_capabilities(load_sample("pcie-l40s-8"), iommu_enabled=True, iommu_mode="identity")) == ()


def test_mig_enabled() -> None:
    assert one(health(with_gpu(H100, 2, mig_enabled=True)), "mig-enabled").gpus == (2,)


def test_peermem_missing_beside_rdma_nics() -> None:
    finding = one(health(with_capabilities(H100, gpudirect_rdma=False)), "peermem-missing")
    assert "mlx5_0" in finding.evidence[0]


def test_peermem_missing_without_rdma_nics_is_silent() -> None:
    assert health(with_capabilities(load_sample("consumer-2gpu"), gpudirect_rdma=False)) == ()


@pytest.mark.parametrize(("env", "code", "severity"), [
    ({"NCCL_P2P_DISABLE": "1"}, "env-p2p-disabled", "warning"),
    ({"NCCL_SHM_DISABLE": "1"}, "env-shm-disabled", "warning"),
    ({"NCCL_IB_DISABLE": "1"}, "env-ib-disabled", "warning"),
    ({"NCCL_P2P_LEVEL": "LOC"}, "env-p2p-level", "warning"),
    ({"NCCL_P2P_LEVEL": "bogus"}, "env-p2p-level", "warning"),
    ({"NCCL_NET_GDR_LEVEL": "LOC"}, "env-net-gdr-level", "info"),
    ({"NCCL_SOCKET_IFNAME": "eth"}, "env-socket-ifname", "warning"),
    ({"NCCL_SOCKET_IFNAME": "ibp"}, "env-socket-ifname", "info"),
    ({"NCCL_IB_HCA": "mlx5_0,mlx5_1"}, "env-ib-hca", "info"),
    ({"NCCL_IB_HCA": "=mlx5_99"}, "env-ib-hca", "warning"),
])
def test_environment_that_changes_nccl_paths(env: dict[str, str], code: str, severity: str) -> None:
    finding = one(health(H100, env=env), code)
    assert finding.severity == severity
    assert finding.evidence[0] == "=".join(next(iter(env.items())))


@pytest.mark.parametrize("env", [
    {"NCCL_P2P_DISABLE": "0"}, {"NCCL_P2P_LEVEL": "SYS"}, {"NCCL_NET_GDR_LEVEL": "PIX"}, {"NCCL_IB_HCA": "mlx5"},
    {"NCCL_SOCKET_IFNAME": "^docker,lo"}, {"NCCL_DEBUG": "INFO"},
])
def test_environment_that_leaves_nccl_alone(env: dict[str, str]) -> None:
    assert health(H100, env=env) == ()


def test_p2p_level_below_pcie_pairs_that_have_p2p() -> None:
    """On the L40S box, PIX keeps the pairs under one switch and drops the NODE pairs (0-2, 0-3, ...)."""
    finding = one(health("pcie-l40s-8", env={"NCCL_P2P_LEVEL": "PIX"}), "env-p2p-level")
    assert finding.severity == "info" and "NODE" in finding.message and "PIX" not in finding.message.split("over")[1]


def test_ib_disabled_without_rdma_nics_is_only_info() -> None:
    assert one(health("consumer-2gpu", env={"NCCL_IB_DISABLE": "1"}), "env-ib-disabled").severity == "info"


def test_cuda_order_that_reorders_gpus() -> None:
    finding = one(health(H100, cuda_order=(1, 0, 2, 3), env={"CUDA_VISIBLE_DEVICES": "1,0,2,3"}),
                  "env-cuda-visible-reordered")
    assert finding.gpus == (1, 0, 2, 3) and "CUDA_VISIBLE_DEVICES=1,0,2,3" in finding.evidence
    assert health(H100, cuda_order=(0, 2, 4, 6), env={"CUDA_VISIBLE_DEVICES": "0,2,4,6"}) == ()


def test_worse_than_baseline() -> None:
    finding = one(health(DEGRADED, baseline=H100), "worse-than-baseline")
    assert finding.gpus == (0, 1, 2, 3, 4, 5, 6, 7)
    assert "GPU3 NVLinks up: 18 -> 16" in finding.evidence and "GPU3 PCIe width: 16 -> 8" in finding.evidence
    assert "worse-than-baseline" not in codes(health(H100, baseline=H100))


def test_measured_bandwidth_below_the_baseline_beyond_noise() -> None:
    def measured(gbps: float) -> Measurements:
        return Measurements("linkscope bench p2p", peer_copies=(PeerCopy(0, 1, unidir_gbps=gbps),))

    baseline = dataclasses.replace(H100, measurements=measured(390.0))
    slow = one(health(H100, baseline=baseline, measurements=measured(300.0)), "worse-than-baseline")
    assert slow.evidence == ("peer copy GPU0->GPU1 GB/s: 390.0 -> 300.0",)
    assert health(H100, baseline=baseline, measurements=measured(370.0)) == (), "5% is noise"


def test_env_file_lines() -> None:
    text = "# job env\nexport NCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME='ibp'\n\nNCCL_DEBUG=\"INFO\"\n"
    assert parse_env_file(text, "job.env") == {"NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "ibp", "NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize(("text", "where"), [("A=1\nthis is not\n", "job.env:2"), ("X='open\n", "job.env:1")])
def test_env_file_bad_line_names_file_and_line(text: str, where: str) -> None:
    with pytest.raises(InputError, match=where):
        parse_env_file(text, "job.env")


def test_long_evidence_is_cut_with_a_count() -> None:
    """All 28 NVLink pairs without peer access: 11 pairs listed, then how many more."""
    links = tuple(dataclasses.replace(link, p2p=P2PStatus("NS", "NS", "NS", "NS")) for link in H100.host.links)
    finding = one(health(with_host(H100, links=links)), "p2p-off")
    assert len(finding.evidence) == 12 and finding.evidence[-1] == "... and 17 more"
    assert finding.message.startswith("28 GPU pair(s)")
