"""`linkscope plan`: degrees, traffic, bubble and memory of the design worksheet; its outputs and errors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from linkscope.topo.checks.plan import memory_per_gpu_bytes, plan_layout
from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.volumes import pipeline_bubble, preset, step_traffic
from linkscope.topo.samples import load_sample
from support.layout import assert_one_line_error, run_cli


def test_pipeline_bubble_formula() -> None:
    assert pipeline_bubble(4, 16) == pytest.approx(3 / 19)
    assert pipeline_bubble(1, 16) == 0.0


def test_volumes_by_hand() -> None:
    """8B, tp 2, pp 2, dp 4: TP all_reduce of b*s*h*2 bytes, 4 per layer per micro-batch; DP RS+AG of params/(tp*pp)."""
    model = preset("8b")
    traffic = {(t.dim, t.op): t for t in step_traffic(model, {"tp": 2, "pp": 2, "dp": 4})}
    tp = traffic[("tp", "all_reduce")]
    assert tp.size_bytes == 1 * 8192 * 4096 * 2
    assert tp.calls_per_step == 4 * 16 * (512 // 4)
    assert traffic[("dp", "reduce_scatter")].size_bytes == int(8e9 / 4 * 2)
    assert traffic[("pp", "send_recv")].calls_per_step == 2 * 128
    assert ("dp", "all_reduce") not in traffic, "ZeRO-1 turns the DP all_reduce into RS + AG"


def test_expert_parallel_shards_the_expert_gradients() -> None:
    """8x7B (45.1B of 46.7B params in experts), tp 2, ep 8, dp 8 on 16 ranks: the dense 1.6B/2 are reduced over
    dp, the expert 45.1B/(etp*ep) = 45.1B/16 over expert-dp = 16/(2*8) = 1 rank (nothing to reduce)."""
    traffic = {(t.dim, t.op): t for t in step_traffic(preset("8x7b"), {"tp": 2, "ep": 8, "dp": 8})}
    assert traffic[("dp", "reduce_scatter")].size_bytes == pytest.approx(1.6e9 / 2 * 2, rel=1e-6)
    assert not any(dim == "edp" for dim, _ in traffic), "expert-dp is 16/(2*8) = 1: no expert gradient traffic"


def test_expert_gradients_run_over_expert_dp() -> None:
    """tp 2, ep 4, dp 8 (64 ranks): expert-dp = 64/(2*4) = 8, with 45.1B/(2*4) expert params per rank."""
    traffic = {(t.dim, t.op): t for t in step_traffic(preset("8x7b"), {"tp": 2, "ep": 4, "dp": 32})}
    assert traffic[("edp", "reduce_scatter")].size_bytes == pytest.approx(45.1e9 / 8 * 2, rel=1e-6)
    assert traffic[("dp", "reduce_scatter")].size_bytes == pytest.approx(1.6e9 / 2 * 2, rel=1e-6)
    wide = {(t.dim, t.op): t for t in step_traffic(preset("8x7b"), {"tp": 2, "ep": 4, "dp": 32, "etp": 1})}
    assert wide[("edp", "reduce_scatter")].size_bytes == pytest.approx(45.1e9 / 4 * 2, rel=1e-6)


def test_context_parallel_gradients_run_over_dp_times_cp() -> None:
    """tp 4, cp 2 on 8 ranks: dp is 1 but the gradients are reduced over the dp x cp group of 2 (Megatron's dp-cp)."""
    traffic = {(t.dim, t.op): t for t in step_traffic(preset("8b"), {"tp": 4, "cp": 2, "dp": 1})}
    assert traffic[("dp_cp", "reduce_scatter")].size_bytes == pytest.approx(8e9 / 4 * 2, rel=1e-6)
    assert not any(dim == "dp" for dim, _ in traffic)


def test_sequence_parallel_and_fsdp_change_the_collectives() -> None:
    model = preset("8b")
    ops = {(t.dim, t.op, t.calls_per_step) for t in step_traffic(replace(model, sequence_parallel=True, zero_stage=3),
                                                                  {"tp": 2, "dp": 4})}
    assert ("tp", "all_gather", 4 * 32 * 128) in ops and ("tp", "reduce_scatter", 4 * 32 * 128) in ops
    assert ("dp", "all_gather", 2) in ops


def test_70b_on_64_h100s_keeps_tp_in_a_node() -> None:
    plan = plan_layout(load_sample("dgx-h100"), 64, preset("70b"))
    sizes = {degree.dim: degree.size for degree in plan.degrees}
    assert sizes["tp"] == 8 and sizes["tp"] * sizes["pp"] * sizes["dp"] == 64
    assert plan.memory_per_gpu_bytes <= 0.6 * plan.memory_total_bytes
    assert plan.memory_per_gpu_bytes == pytest.approx(memory_per_gpu_bytes(preset("70b"), 8, sizes["pp"], sizes["dp"]))
    tp_row = next(row for row in plan.traffic if row.dim == "tp")
    assert tp_row.actual == "NV18" and tp_row.risk == "ok"
    assert plan.bubble == pytest.approx((sizes["pp"] - 1) / (plan.microbatches + sizes["pp"] - 1))
    assert not any(finding.severity == "error" for finding in plan.report.findings)


@pytest.mark.parametrize(
    ("zero_stage", "bytes_per_param"),
    [(0, 16.0), (1, 4 + 12 / 4), (2, 2 + 14 / 4), (3, 16 / 4)],
)
def test_model_state_memory_per_zero_stage(zero_stage: int, bytes_per_param: float) -> None:
    """8B, tp 2, pp 1, dp 4: plain DP keeps all 16 bytes/param; ZeRO-1/2/3 shard Adam, then grads, then all."""
    model = replace(preset("8b"), zero_stage=zero_stage)
    activations = 34 * 8192 * 1 * 4096 * 32 / 2
    expected = 8e9 / 2 * bytes_per_param + activations
    assert memory_per_gpu_bytes(model, 2, 1, 4) == pytest.approx(expected)


def test_nvlink_pairs_box_plans_tp_2_at_most() -> None:
    plan = plan_layout(load_sample("a100-pcie-nvbridge-4"), 4, preset("8b"))
    assert next(degree.size for degree in plan.degrees if degree.dim == "tp") <= 2


def test_bad_gpu_counts() -> None:
    with pytest.raises(InputError, match="not a whole number of 8-GPU nodes"):
        plan_layout(load_sample("dgx-h100"), 12)


def test_cli_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["plan", "sample:dgx-h100", "--gpus", "64", "--model", "70b"], capsys)
    assert code == 0 and "Pipeline bubble" in out and "NV18" in out
    code, out, _ = run_cli(["plan", "sample:dgx-h100", "--gpus", "64", "--model", "70b", "--markdown"], capsys)
    assert code == 0 and "| dim | degree | placement | reason |" in out
    code, out, _ = run_cli(["plan", "sample:dgx-h100", "--gpus", "64", "--model", "8x7b", "--json"], capsys)
    data = json.loads(out)
    assert {degree["dim"] for degree in data["degrees"]} >= {"tp", "ep", "dp"}
    assert any(row["op"] == "all_to_all" for row in data["traffic"])


def test_cli_pins_and_model_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["plan", "sample:dgx-a100", "--gpus", "16", "--tp", "4", "--hidden", "4096", "--layers", "32",
                            "--params", "7B", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert next(d["size"] for d in data["degrees"] if d["dim"] == "tp") == 4
    assert data["model"]["params"] == 7e9


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [(["--gpus", "12"], "8-GPU nodes"), (["--gpus", "0"], "--gpus"), (["--gpus", "8", "--tp", "0"], "--tp"),
     (["--gpus", "8", "--model", "huge"], "unknown preset"), ([], "--gpus")],
)
def test_cli_bad_input(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["plan", "sample:dgx-h100", *argv], capsys)
    assert_one_line_error(code, err, fragment)


def test_a_model_too_big_is_refused() -> None:
    """405B on 8 H100s needs ~821 GiB per GPU at best: refused, with the need and the budget."""
    with pytest.raises(InputError, match=r"does not fit on 8 GPUs.*821 GiB per GPU.*47.8 GiB budget"):
        plan_layout(load_sample("dgx-h100"), 8, preset("405b"))


def test_a_model_too_big_is_one_line_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["plan", "sample:consumer-2gpu", "--gpus", "2", "--model", "405b"], capsys)
    assert out == ""
    assert_one_line_error(code, err, "does not fit on 2 GPUs", "use more GPUs or a smaller model")


def test_a_model_that_fits_only_when_split_is_split() -> None:
    """70B fits on 64 H100s, but not on 8: the first plans, the second is refused."""
    assert plan_layout(load_sample("dgx-h100"), 64, preset("70b")).memory_per_gpu_bytes < 0.6 * 80 * 1024**3
    with pytest.raises(InputError, match="does not fit"):
        plan_layout(load_sample("dgx-h100"), 8, preset("70b"))


def test_plan_refuses_more_gpus_than_it_handles(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["plan", "sample:dgx-h100", "--gpus", "8000000"], capsys)
    assert out == ""
    assert_one_line_error(code, err, "--gpus 8,000,000", "524,288")


def test_plan_vpp_shrinks_the_bubble_and_needs_a_pipeline() -> None:
    """70B on 64 H100s with pp 4 and 2 virtual stages: (p-1)/(v*m+p-1)."""
    plain = plan_layout(load_sample("dgx-h100"), 64, preset("70b"), {"pp": 4})
    interleaved = plan_layout(load_sample("dgx-h100"), 64, preset("70b"), {"pp": 4}, vpp=2)
    assert interleaved.bubble == pytest.approx(3 / (2 * interleaved.microbatches + 3))
    assert interleaved.bubble < plain.bubble
    with pytest.raises(InputError, match="no pipeline"):
        plan_layout(load_sample("dgx-h100"), 8, preset("8b"), {"pp": 1}, vpp=2)
