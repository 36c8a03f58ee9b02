"""Findings on the built-in samples: each code, the hybrid cube mesh, the NVLink-pairs box, suggestions."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.source import load_source
from linkscope.topo.layout.placement import RankMapEntry
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample


def _check(sample: str | Snapshot, suggest: bool = False, **fields: object) -> CheckReport:
    snapshot = load_sample(sample) if isinstance(sample, str) else sample
    return check_layout(snapshot, CheckRequest(**fields), suggest=suggest)  # type: ignore[arg-type]


def _codes(report: CheckReport) -> set[str]:
    return {finding.code for finding in report.findings}


def _finding(report: CheckReport, code: str) -> LayoutFinding:
    return next(finding for finding in report.findings if finding.code == code)


def test_a_good_layout_has_no_findings() -> None:
    report = _check("dgx-h100", sizes=(("tp", 8), ("pp", 4)), nodes=8)
    assert report.findings == ()
    assert report.layout is not None and report.layout.size("dp") == 2
    assert {cost.dim for cost in report.costs} == {"tp", "dp", "pp"}
    assert next(cost for cost in report.costs if cost.dim == "tp").link_label == "NV18"


def test_tp_crosses_node_when_the_order_strides_it() -> None:
    report = _check("dgx-h100", sizes=(("tp", 8),), nodes=2, order="dp-tp-pp")
    finding = _finding(report, "tp-crosses-node")
    assert finding.severity == "error" and finding.dim == "tp"
    assert finding.ranks == (0, 2, 4, 6, 8, 10, 12, 14)
    assert "mlx5" in finding.link
    assert finding.cost_s is not None and finding.best_cost_s is not None and finding.best_cost_s < finding.cost_s
    assert "--order tp-dp-pp" in finding.fix
    # 4 GPUs per node reach the network over 4 rails of ~46.5 GB/s: the 186 GB/s is their sum, and says so
    assert "4 NIC rails per node (e.g. mlx5_0 400 Gb/s InfiniBand; ~46 GB/s each, 186 GB/s together)" in finding.message


def test_best_alternative_waits_for_the_slowest_group_of_the_fix() -> None:
    """Degraded DGX H100, tp 2 strided across 2 nodes. Putting tp first gives pairs (0,1) on NV18 but (2,3) on
    NV16 (16 x 20.6 = 329.6 GB/s); the step waits for (2,3), so the best alternative is priced on it:
    8b preset, dp 8 -> 64 micro-batches, 4 x 32 x 64 = 8192 all_reduces of 64 MiB, each NCCL's Simple ring of 2:
    8.4 us + 2 x 3.4 us (tuning.cc) + 2 x 32 MiB / 329.6 GB/s."""
    report = _check("dgx-h100-degraded", sizes=(("tp", 2),), nodes=2, order="dp-tp-pp")
    finding = _finding(report, "tp-crosses-node")
    expected = 8192 * (8.4e-6 + 2 * 3.4e-6 + 2 * (64 * 2**20 / 2) / 329.6e9)  # 1.792 s (the NV18 pair alone: 1.607 s)
    assert finding.best_cost_s == pytest.approx(expected)
    fixed = _check("dgx-h100-degraded", sizes=(("tp", 2),), nodes=2, order="tp-dp-pp")
    assert next(cost for cost in fixed.costs if cost.dim == "tp").time_s == pytest.approx(expected)


def test_tp_crosses_node_with_cyclic_distribution() -> None:
    report = _check("dgx-h100", sizes=(("tp", 8),), nodes=2, distribution="cyclic")
    assert "tp-crosses-node" in _codes(report)


def test_tp_larger_than_a_node_must_shrink() -> None:
    report = _check("dgx-h100", sizes=(("tp", 16),), nodes=2)
    assert "--tp 8" in _finding(report, "tp-crosses-node").fix


def test_hybrid_cube_mesh_tp8_rides_nvlink_only() -> None:
    """DGX-1: some pairs are SYS, but the best 8-GPU ring is all NVLink, so no tp-slow-link; NCCL lays six
    one-link rings over the NV2 and NV1 cycles, and the label says so."""
    report = _check("dgx1-v100", sizes=(("tp", 8),))
    assert "tp-slow-link" not in _codes(report)
    assert report.costs[0].link_label == "6 rings over NV2 + NV1"


def test_nvlink_pairs_box_tp4_must_shrink() -> None:
    """NVLink only in pairs: every 4-GPU ring crosses SYS, and no permutation helps."""
    report = _check("a100-pcie-nvbridge-4", sizes=(("tp", 4),))
    finding = _finding(report, "tp-slow-link")
    assert finding.severity == "warning" and finding.link == "SYS"
    assert "must shrink" in finding.message and "--tp 2" in finding.fix
    assert finding.best_cost_s is not None and finding.best_cost_s < (finding.cost_s or 0)


def test_nvlink_pairs_box_tp2_permutation_avoids_sys() -> None:
    report = _check("a100-pcie-nvbridge-4", suggest=True, sizes=(("tp", 2),), visible_devices=(0, 2, 1, 3))
    finding = _finding(report, "tp-slow-link")
    assert "another permutation avoids it" in finding.message
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in finding.fix
    assert report.suggestion is not None
    assert dict(report.suggestion.env)["CUDA_VISIBLE_DEVICES"] in ("0,1,2,3", "1,0,3,2", "2,3,0,1")
    assert report.suggestion.speedup > 5


def test_pcie_box_tp8_spans_sockets() -> None:
    report = _check("pcie-l40s-8", sizes=(("tp", 8),))
    finding = _finding(report, "tp-slow-link")
    assert finding.link == "SYS" and "--tp 4" in finding.fix


def test_pcie_box_tp4_inside_a_socket_is_fine() -> None:
    assert "tp-slow-link" not in _codes(_check("pcie-l40s-8", sizes=(("tp", 4),)))


def test_ep_crosses_node() -> None:
    report = _check("dgx-h100", sizes=(("tp", 2), ("ep", 8)), nodes=2, model="8x7b")
    finding = _finding(report, "ep-crosses-node")
    assert finding.severity == "warning" and finding.ranks == (0, 2, 4, 6, 8, 10, 12, 14)
    assert finding.best_cost_s is not None and finding.cost_s is not None and finding.best_cost_s < finding.cost_s / 2


def test_group_imbalance_on_the_hybrid_cube_mesh() -> None:
    """tp=2 in order: pairs 0-1 ride NV1, pairs 2-3 ride NV2, so half the groups straggle."""
    report = _check("dgx1-v100", sizes=(("tp", 2),))
    finding = _finding(report, "group-imbalance")
    assert finding.dim == "tp" and finding.ranks == (0, 1) and finding.link == "NV1"


def test_degraded_box_imbalances_tp4_but_is_not_slow() -> None:
    report = _check("dgx-h100-degraded", sizes=(("tp", 4),))
    assert "group-imbalance" in _codes(report)
    assert "tp-slow-link" not in _codes(report)
    assert _finding(report, "group-imbalance").link == "NV16"


def test_dp_not_rail_aligned_with_a_rank_map() -> None:
    """Node 2 lists its GPUs in reverse, so DP peers sit on different rails."""
    entries = [RankMapEntry(rank, "n1", rank) for rank in range(8)]
    entries += [RankMapEntry(8 + local, "n2", 7 - local) for local in range(8)]
    report = _check("dgx-h100", sizes=(("tp", 2), ("dp", 8)), rank_map=tuple(entries))
    finding = _finding(report, "dp-not-rail-aligned")
    assert finding.severity == "info"


def test_dp_is_rail_aligned_with_block_placement() -> None:
    assert "dp-not-rail-aligned" not in _codes(_check("dgx-h100", sizes=(("tp", 2),), nodes=2))


def _far_nic_box() -> Snapshot:
    snapshot = load_sample("dgx-h100")
    host = snapshot.host
    far = tuple(tuple("SYS" for _ in row) for row in host.gpu_nic)
    return dataclasses.replace(snapshot, hosts=(dataclasses.replace(host, gpu_nic=far),))


def test_nic_far_from_gpu_when_traffic_leaves_the_node() -> None:
    report = _check(_far_nic_box(), sizes=(("tp", 8),), nodes=2)
    finding = _finding(report, "nic-far-from-gpu")
    assert finding.dim == "dp" and "SYS" in finding.message
    assert finding.best_cost_s is not None and finding.cost_s is not None and finding.best_cost_s < finding.cost_s


def test_nic_far_from_gpu_is_quiet_on_one_node() -> None:
    assert "nic-far-from-gpu" not in _codes(_check(_far_nic_box(), sizes=(("tp", 8),)))


def test_layout_mismatch_visible_device_missing() -> None:
    report = _check("dgx-h100", sizes=(("tp", 2),), visible_devices=(0, 9))
    assert [finding.code for finding in report.findings] == ["layout-mismatch"]
    assert report.findings[0].severity == "error" and report.fails("error")


def test_layout_mismatch_two_ranks_on_one_gpu() -> None:
    entries = (RankMapEntry(0, "a", 0), RankMapEntry(1, "a", 0))
    report = _check("dgx-h100", sizes=(("tp", 2),), rank_map=entries)
    assert report.findings[0].code == "layout-mismatch" and report.findings[0].ranks == (0, 1)


def test_suggestion_puts_tp_first() -> None:
    """TP 8 strided over 2 nodes rides 4 rails per node; TP first keeps it on NV18. The gain is what NCCL's own
    latencies leave it: a ring of 8 over NVLink takes 41-56 us to start with LL128/Simple (tuning.cc), about what
    2 network steps add across the nodes, so the gain is the bandwidth's, not a 1 us-per-hop latency's."""
    report = _check("dgx-h100", suggest=True, sizes=(("tp", 8),), nodes=2, order="dp-tp-pp")
    assert report.suggestion is not None
    assert report.suggestion.flags == ("--order tp-dp-pp",)
    assert report.suggestion.speedup > 1.1


def test_no_suggestion_when_the_layout_is_already_best() -> None:
    assert _check("dgx-h100", suggest=True, sizes=(("tp", 8), ("pp", 2)), nodes=2).suggestion is None


def test_json_contract() -> None:
    data = _check("a100-pcie-nvbridge-4", sizes=(("tp", 4),)).to_json()
    assert data["groups"]["tp"] == [[0, 1, 2, 3]]
    finding = data["findings"][0]
    assert {"code", "severity", "dim", "ranks", "message"} <= set(finding)
    assert finding["severity"] in ("error", "warning", "info")


def test_bad_input_raises() -> None:
    with pytest.raises(InputError, match="does not fit"):
        _check("dgx-h100", sizes=(("tp", 8), ("dp", 4)))


def test_real_hybrid_cube_mesh_fixture() -> None:
    """The recorded `nvidia-smi topo -m` of a DGX-1-style V100 box: NVLink-only TP ring, one NIC far from half the GPUs."""
    snapshot = load_source("tests/fixtures/real/topo/v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt")
    assert "tp-slow-link" not in _codes(_check(snapshot, sizes=(("tp", 8),)))
    report = _check(snapshot, sizes=(("tp", 8),), nodes=2)
    finding = _finding(report, "nic-far-from-gpu")
    placement = dict(enumerate(report.placement))
    assert {placement[rank][1] for rank in finding.ranks} == {0, 1, 4, 5, 6, 7}, "NODE and SYS paths to mlx5_0"
    assert len(finding.ranks) == 12


@settings(max_examples=40, deadline=None)
@given(
    sample=st.sampled_from(["dgx-h100", "dgx1-v100", "a100-pcie-nvbridge-4", "pcie-l40s-8", "consumer-2gpu"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2]),
    ep=st.sampled_from([1, 2]),
    nodes=st.sampled_from([1, 2, 3]),
    order=st.permutations(["tp", "cp", "ep", "dp", "pp"]),
    distribution=st.sampled_from(["block", "cyclic"]),
)
def test_any_layout_gives_a_report_or_one_input_error(sample: str, tp: int, pp: int, ep: int, nodes: int, order: list[str],
                                                      distribution: str) -> None:
    """Whatever the flags, check_layout returns a report (groups covering the world) or raises InputError."""
    try:
        report = _check(sample, suggest=True, sizes=(("tp", tp), ("pp", pp), ("ep", ep)), nodes=nodes,
                        order="-".join(order), distribution=distribution, model="8x7b")
    except InputError:
        return
    assert report.layout is not None
    world = report.layout.world_size
    for groups in report.groups.values():
        assert sorted(rank for group in groups for rank in group) == list(range(world))
    assert len(report.placement) == world
    assert all(finding.severity in ("error", "warning", "info") for finding in report.findings)


def test_the_report_carries_each_groups_priced_ring() -> None:
    """The ring the costs assume travels with the report (the app draws it): NVLink-only on the DGX-1
    hybrid cube mesh, and chains per node, nodes in order, for a group across nodes."""
    from linkscope.topo.checks.check import check_layout
    from linkscope.topo.checks.request import CheckRequest
    from linkscope.topo.cost.groups import block_order_ring
    from linkscope.topo.samples import load_sample

    mesh = load_sample("dgx1-v100")
    report = check_layout(mesh, CheckRequest(sizes=(("tp", 8),)))
    ring = report.ring("tp", 0)
    assert ring == (0, 4, 7, 6, 5, 1, 2, 3)
    assert all(mesh.host.link(a, b).kind.name == "NVLINK" for a, b in zip(ring, ring[1:] + ring[:1], strict=True))
    assert report.ring("dp", 3) == (3,)
    two_nodes = block_order_ring(mesh, list(range(16)))
    assert sorted(two_nodes[:8]) == list(range(8)) and sorted(two_nodes[8:]) == list(range(8, 16))
    assert block_order_ring(mesh, list(range(8))) == ring


def test_health_findings_follow_the_snapshot_checked_not_the_last_one() -> None:
    """check keeps the last snapshot's health findings between layouts; another snapshot (even an equal copy
    with one GPU degraded) gets its own, and going back gives the first ones again."""
    healthy, degraded = load_sample("dgx-h100"), load_sample("dgx-h100-degraded")
    request = CheckRequest(sizes=(("tp", 8),))
    first = check_layout(healthy, request).findings
    assert check_layout(healthy, CheckRequest(sizes=(("tp", 4),))).findings == ()
    on_degraded = check_layout(degraded, request).findings
    assert on_degraded and on_degraded != first
    assert check_layout(healthy, request).findings == first
    copy = dataclasses.replace(healthy, hosts=degraded.hosts)
    assert check_layout(copy, request).findings == on_degraded



def test_layers_that_do_not_split_over_the_pipeline_are_megatrons_refusal() -> None:
    """Megatron-Core's get_num_layers_to_build asserts num_layers % pp == 0 (even split) and, interleaved,
    (num_layers / pp) % vpp == 0; judged for a model the user named, not for the preset linkscope assumed."""
    uneven = _check("dgx-h100", sizes=(("tp", 8), ("pp", 8)), nodes=8, model="405b")  # 126 layers
    finding = _finding(uneven, "layers-not-divisible")
    assert finding.severity == "warning" and "126 layers" in finding.message
    assert finding.fix.startswith("--pp 2 (dp takes the rest)") and "--decoder-first-pipeline-num-layers" in finding.fix
    interleaved = _check("dgx-h100", sizes=(("tp", 8), ("pp", 4)), nodes=8, model="70b", vpp=3)  # 20 per rank
    assert "20 per pipeline rank" in _finding(interleaved, "layers-not-divisible").message
    assert _finding(interleaved, "layers-not-divisible").fix == "--vpp 2 or 4 or 5 or 10 or 20"
    for fine in (_check("dgx-h100", sizes=(("tp", 8), ("pp", 4)), nodes=8, model="70b", vpp=2),
                 _check("dgx-h100", sizes=(("tp", 8), ("pp", 3)), nodes=3),  # 8b preset assumed, not given
                 _check("dgx-h100", sizes=(("tp", 8), ("pp", 8)), nodes=8, model="8b")):  # 32 layers over 8
        assert "layers-not-divisible" not in _codes(fine)
    assert "layers-not-divisible" in _codes(_check("dgx-h100", sizes=(("tp", 8), ("pp", 3)), nodes=3, model="8b"))


def test_health_findings_name_the_dimension_they_slow() -> None:
    """A missing NIC, off-rail traffic or a narrow PCIe link on an NVLink box slow the groups that leave the
    node (dp here), not TP inside it; lost NVLinks slow TP."""
    report = _check("h100-cluster-mixed", sizes=(("tp", 8), ("dp", 4)), nodes=1)
    dims = {finding.code: finding.dim for finding in report.findings}
    assert dims["nvlink-fewer-links"] == "tp"
    assert dims["host-nic-missing"] == "dp" and dims["host-off-rail"] == "dp" and dims["pcie-width-reduced"] == "dp"
    one_node = _check("dgx-h100-degraded", sizes=(("tp", 8),))
    assert {f.code: f.dim for f in one_node.findings}["pcie-width-reduced"] == ""  # no group leaves the node


def test_every_layout_rule_is_in_the_registry_with_one_signature() -> None:
    """check_layout runs RULES, each a function of the LayoutContext alone (as doctor's rules take the HealthContext)."""
    import inspect

    from linkscope.topo.checks import health_rules, layout_rules, link_rules
    from linkscope.topo.checks.rules import RULES

    public = [function for module in (layout_rules, link_rules, health_rules)
              for name, function in inspect.getmembers(module, inspect.isfunction)
              if function.__module__ == module.__name__ and not name.startswith("_") and name != "snapshot_health"]
    assert set(public) == set(RULES)
    for rule in RULES:
        assert list(inspect.signature(rule).parameters) == ["ctx"], rule.__name__
