"""On-call verdicts on real nccl-tests files: the limiting part of the path, verdicts both ways, judged counts."""

from __future__ import annotations

from linkscope.topo.cost.expect import judged_counts, row_expectations, severities, summary, worst_rows
from linkscope.topo.cost.params import CostModel
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import load_source
from linkscope.topo.model.measurements import CollectiveResult, Measurements
from linkscope.topo.samples import load_sample
from support.paths import REAL

NCCL = REAL / "nccl_tests"
KVM_2NODE = NCCL / "h200-2node-16gpu-kvm-vm-degraded-all_reduce.txt"
BARE_2NODE = NCCL / "h200-2node-16gpu-baremetal-all_reduce.txt"
GB200_72 = NCCL / "gb200-nvl72-full-rack-72rank-tail-only-last-rank-line-all_reduce.txt"


def _read(path: object) -> Measurements:
    return read_measurements(path.read_text(), str(path))  # type: ignore[attr-defined]


def test_a_two_node_all_reduce_at_a_tenth_is_blamed_on_the_network_not_nvlink() -> None:
    """The KVM run's largest rows reach ~52-58 GB/s busbw over 2 hosts x 8 H200 (read by hand): about one
    400 Gb/s NIC where eight rails should carry it. The limit is the network path, not NV18."""
    rows = row_expectations(_read(KVM_2NODE), load_sample("dgx-h100")).all()
    large = [row for row in rows if row.size_bytes >= 1 << 30]
    assert large and all(row.limited_by == "network" for row in large)
    assert all(row.link != "NV18" and "NIC" in row.link for row in large)
    assert all(row.path[0] == "NV18" and row.path[-1].startswith("NET 8x mlx5_") for row in large)
    assert all("about one NIC's worth" in row.note and "of 8 rails" in row.note for row in large)
    assert all(row.placement == "16 ranks: 2 hosts x 8 GPUs from the rank lines" for row in rows)
    worst = worst_rows(rows)
    assert worst and worst[0].size_bytes == 8153726976  # the largest buffer decides, not the 32 MiB row


def test_the_healthy_two_node_run_is_ok_and_still_network_limited() -> None:
    """Bare metal, same hardware: 458-489 GB/s busbw (read by hand) is what 8 rails deliver: ok, network path."""
    rows = row_expectations(_read(BARE_2NODE), load_sample("dgx-h100")).all()
    assert rows and all(row.verdict == "ok" and row.limited_by == "network" for row in rows)
    assert all("about one NIC" not in row.note for row in rows)


def test_a_72_rank_nvl72_run_is_priced_in_its_nvlink_domain_and_fits() -> None:
    """846.82 GB/s peak busbw over 72 ranks (read by hand): inside one NVL72 NVLink domain, as estimate prices it,
    not 72 hosts over InfiniBand (which made the ratio ~22 and the verdict `ok`)."""
    rows = row_expectations(_read(GB200_72), load_sample("gb200-nvl72")).all()
    assert len(rows) == 10
    assert all(row.limited_by == "nvlink" and "NET" not in " ".join(row.path) for row in rows)
    assert all(row.ratio is not None and 0.5 < row.ratio <= 1.25 for row in rows)
    assert all("1 NVLink domain x 72 GPUs" in row.placement and "assumed" in row.placement for row in rows)


def test_a_run_far_above_its_model_is_faster_than_model_never_ok() -> None:
    """The same 72-rank run priced on 9 copies of an 8-GPU H100 box (over InfiniBand) is 2x the model: the model
    or the placement is wrong, a warning naming the assumed placement."""
    rows = row_expectations(_read(GB200_72), load_sample("dgx-h100")).all()
    fast = [row for row in rows if row.verdict == "faster than model"]
    assert fast and not any(row.verdict == "ok" and (row.ratio or 0) > 1.25 for row in rows)
    assert all("the model or the assumed placement is wrong" in row.note and "assumed" in row.note for row in fast)
    assert "warning" in severities(rows)


def test_nothing_judged_is_never_clean() -> None:
    """12 ranks with no host named fill no whole 8-GPU DGX host: not placed, so not judged; the summary says so
    and it is a warning (synthetic: every real file here places)."""
    rows = [CollectiveResult("all_reduce", size << 20, "float", 1000.0, 10.0, 18.3, 12) for size in (64, 256)]
    expected = row_expectations(Measurements("nccl-tests", collectives=tuple(rows)), load_sample("dgx-h100")).collectives
    counts = judged_counts(expected)
    assert counts["judged"] == 0 and counts["not_judged"] == 2
    assert summary(expected).startswith("NOTHING JUDGED") and "not placed" in summary(expected)
    assert severities(expected) == ["warning"]


def test_a_gpu_to_nic_expectation_follows_the_path_and_the_narrower_pcie_end() -> None:
    """On the degraded DGX H100 sample GPU 3's PCIe link trained to x8: its rail is bounded by that x8 link (about
    half of a 400 Gb/s NIC's worth), while GPU 2, on x16, gets the NIC's rate; the label names the narrow end."""
    host = load_sample("dgx-h100-degraded").host
    model = CostModel()
    narrow, _ = model.nic_hop(host, 3)
    wide, _ = model.nic_hop(host, 2)
    assert "GPU on PCIe Gen5 x8" in narrow.label and "x8" not in wide.label
    assert narrow.bandwidth_gbps < 0.7 * wide.bandwidth_gbps


def test_gpu_to_nic_paths_across_the_cpu_say_so() -> None:
    """The real 3-GPU workstation: GPUs 0 and 1 reach the NICs through NODE, GPU 2 through PHB (read by hand)."""
    host = load_source(str(REAL / "topo" / "rtx-a6000-3gpu-nv4-pair-phb-2nic.txt")).host
    model = CostModel()
    assert "via NODE" in model.nic_hop(host, 0)[0].label and "via PHB" in model.nic_hop(host, 2)[0].label


def test_a_gpu_named_only_graphics_device_is_an_unknown_model_not_another_machine() -> None:
    """The NVL72 rank line names its GPU `NVIDIA Graphics Device` (read by hand): no model, so the measurements may be
    judged on the GB200 sample with a note, not refused as another kind of machine."""
    from linkscope.topo.model.provenance import UNKNOWN, check_identity

    measured = _read(GB200_72)
    assert measured.identity is not None and measured.identity.gpu_model == "NVIDIA Graphics Device"
    verdict = check_identity(measured.identity, load_sample("gb200-nvl72"))
    assert verdict.relation == UNKNOWN and not verdict.refused and "Graphics Device" in verdict.message
