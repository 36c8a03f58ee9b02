"""`linkscope check` and the frameworks' rules: expert grid, gradient groups, Megatron's refusals, nonsense refused."""

from __future__ import annotations

import json
import math

import pytest

from linkscope.topo.checks.suggest import candidate_layouts
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.layout.groups import megatron_refusal
from linkscope.topo.layout.spec import resolve_layout
from support.layout import assert_one_line_error, run_cli


def strict_json(text: str) -> dict:
    """Parse as RFC 8259 JSON: Infinity and NaN are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def check_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code, out, err = run_cli(["check", *argv, "--json"], capsys)
    assert err == "", err
    return code, strict_json(out)


def test_context_parallel_gradients_are_priced_over_dp_times_cp(capsys: pytest.CaptureFixture[str]) -> None:
    """--tp 4 --cp 2 on 8 GPUs: dp is 1, but Megatron reduces the gradients over the dp x cp group [0,4], [1,5]..."""
    code, data = check_json(["sample:dgx-h100", "--tp", "4", "--cp", "2"], capsys)
    assert code == 0
    assert data["groups"]["dp_cp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    gradient = next(cost for cost in data["costs"] if cost["dim"] == "dp_cp")
    assert {op["op"] for op in gradient["ops"]} == {"reduce_scatter", "all_gather"}
    assert gradient["time_s"] > 0
    assert not any(cost["dim"] == "dp" for cost in data["costs"])


def test_expert_groups_come_from_the_expert_grid(capsys: pytest.CaptureFixture[str]) -> None:
    """16 ranks, tp 4 (dense dp 4), etp 2 ep 4 (expert dp 16/8 = 2): etp, ep, edp as Megatron's second generator."""
    argv = ["sample:dgx-h100", "--nodes", "2", "--tp", "4", "--etp", "2", "--ep", "4", "--model", "8x7b"]
    _, data = check_json(argv, capsys)
    groups = data["groups"]
    assert groups["tp"][0] == [0, 1, 2, 3] and groups["dp"][0] == [0, 4, 8, 12]
    assert groups["etp"][0] == [0, 1]
    assert groups["ep"][:2] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert groups["edp"][0] == [0, 8]
    dims = {cost["dim"] for cost in data["costs"]}
    assert {"tp", "etp", "ep", "dp", "edp"} <= dims
    _, text, _ = run_cli(["check", *argv], capsys)
    assert "etp (expert" in text and "edp (expert" in text


def test_a_layout_megatron_refuses_is_an_error_finding_and_the_suggestion_is_accepted(
        capsys: pytest.CaptureFixture[str]) -> None:
    """tp-cp-ep-pp-dp with pp 2 and expert dp (2) != dp (4): Megatron's start-up assertion, quoted."""
    argv = ["sample:dgx-h100", "--nodes", "2", "--tp", "2", "--pp", "2", "--ep", "2", "--model", "8x7b",
            "--order", "tp-cp-ep-pp-dp", "--suggest"]
    code, data = check_json(argv, capsys)
    assert code == 1
    finding = next(finding for finding in data["findings"] if finding["code"] == "layout-rejected-by-megatron")
    assert finding["severity"] == "error" and "pp-last rank ordering" in finding["message"]
    assert "--order tp-cp-ep-dp-pp" in finding["fix"]
    suggestion = data["suggestion"]
    assert suggestion is not None and suggestion["order"].endswith("pp")
    assert "training script" in suggestion["needs"]


def test_suggestions_never_propose_a_refused_order(capsys: pytest.CaptureFixture[str]) -> None:
    """tp-ep-pp-dp with pp 2 and expert dp != dp is refused; of the 24 orders of (tp, ep, pp, dp) the search only
    considers those Megatron accepts, and the one it returns is one of them."""
    layout = resolve_layout([("tp", 2), ("ep", 2), ("pp", 2)], 16, "tp-ep-pp-dp")
    assert megatron_refusal(layout) is not None
    candidates = candidate_layouts(layout)
    assert 0 < len(candidates) < 24
    assert all(megatron_refusal(candidate) is None for candidate in candidates)
    argv = ["sample:dgx-h100", "--nodes", "2", "--tp", "2", "--pp", "2", "--ep", "2", "--model", "8x7b",
            "--order", "tp-ep-pp-dp", "--suggest"]
    _, data = check_json(argv, capsys)
    order = data["suggestion"]["order"]
    suggested = resolve_layout([("tp", 2), ("ep", 2), ("pp", 2)], 16, order)
    assert megatron_refusal(suggested) is None


def test_an_idle_gpu_is_a_warning_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = check_json(["sample:dgx-h100", "--tp", "2", "--dp", "2"], capsys)
    assert code == 1
    finding = next(finding for finding in data["findings"] if finding["code"] == "layout-underfills")
    assert finding["severity"] == "warning"
    assert "uses 4 of the 8 GPUs" in finding["message"] and "GPUs 4,5,6,7" in finding["message"]
    assert "--dp 4" in finding["fix"]


def test_check_states_what_the_times_rest_on(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = check_json(["sample:dgx-h100", "--tp", "8"], capsys)
    basis = " ".join(data["assumptions"])
    assert "8b preset" in basis and "sequence length 8192" in basis and "global batch 512" in basis
    assert "micro-batch 1" in basis


def test_expert_parallel_without_a_model_assumes_a_mixture_of_experts(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = check_json(["sample:dgx-h100", "--tp", "2", "--ep", "4"], capsys)
    assert any("8x7b preset" in note for note in data["assumptions"])
    assert any(cost["dim"] == "ep" for cost in data["costs"])


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--tp", "2", "--ep", "4", "--experts", "6"], ("Number of experts should be a multiple", "--ep 4")),
        (["--tp", "2", "--ep", "2", "--model", "8b"], ("num_experts must be given", "--experts N")),
        (["--tp", "3"], ("tp*cp*pp must be one of 1, 2, 4, 8",)),
        (["--tp", "8", "--nodes", "100000000"], ("--nodes 100,000,000", "524,288")),
        (["--tp", "8", "--nodes", "100000"], ("800,000 ranks", "524,288")),
        (["--tp", "2", "--etp", "3"], ("etp*ep*pp = 3*1*1 = 3",)),
        (["--tp", "2", "--vpp", "2"], ("interleaved schedule",)),
        (["--tp", "8", "--nodes", "4", "--optimizer-instances", "3"], ("partial DistOpt shard factor",)),
        (["--tp", "8", "--nodes", "4", "--optimizer-instances", "2", "--zero", "0"], ("needs Megatron's distributed",)),
        (["--mesh", "rows=2,tp=4"], ("--mesh-roles rows=ROLE",)),
        (["--mesh", "rows=2,tp=4", "--mesh-roles", "rows=diagonal"], ("'diagonal' is not a role",)),
    ],
)
def test_nonsense_is_one_line(argv: list[str], fragments: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", "sample:dgx-h100", *argv], capsys)
    assert out == ""
    assert_one_line_error(code, err, *fragments)
    assert "give --dp" not in err


def test_torchtitan_mesh_prices_fsdp_and_hsdp(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sample:dgx-h100", "--nodes", "4", "--mesh", "dp_replicate=2,dp_shard=4,cp=2,tp=2"]
    code, data = check_json(argv, capsys)
    assert code == 0
    assert data["groups"]["dp_shard"][0] == [0, 4, 8, 12]
    assert data["groups"]["fsdp"][0] == [0, 2, 4, 6, 8, 10, 12, 14]
    ops = {(cost["dim"], op["op"], op["calls_per_step"]) for cost in data["costs"] for op in cost["ops"]}
    assert ("fsdp", "all_gather", 2) in ops and ("fsdp", "reduce_scatter", 1) in ops
    assert ("replicate", "all_reduce", 1) in ops
    _, text, _ = run_cli(["check", *argv], capsys)
    assert "dp_replicate=replicate" in text and "dp_shard (mesh" in text


def test_json_writer_turns_non_finite_numbers_into_null() -> None:
    text = json_text({"speedup": math.inf, "rows": [1.5, -math.inf, (math.nan, 2)]}, compact=True)
    assert text == '{"speedup":null,"rows":[1.5,null,[null,2]]}'
    assert strict_json(json_text({"a": math.inf}))["a"] is None


@pytest.mark.parametrize(("argv", "reason"), [
    (["--nodes", "64", "--ep", "2", "--pp", "2", "--dp", "256", "--order", "tp-cp-ep-pp-dp"],
     "When not using pp-last rank ordering, the data parallel size of the attention and moe layers must be the same"),
    (["--nodes", "2", "--tp", "2", "--cp", "2", "--ep", "2", "--pp", "2", "--order", "tp-ep-pp-cp-dp"],
     "Pipeline parallel groups are expected to be the same for Non-Expert and Expert part"),
])
def test_the_layouts_megatron_refuses_at_start_up_are_refused_with_its_reason_and_versions(
        argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = check_json(["sample:dgx-h100", *argv], capsys)
    refused = [finding for finding in data["findings"] if finding["code"] == "layout-rejected-by-megatron"]
    assert code == 1 and len(refused) == 1
    assert reason in refused[0]["message"] and "megatron-core v0.15.3 and main alike" in refused[0]["message"]


def test_an_assumed_preset_never_refuses_a_layout_a_given_model_does(capsys: pytest.CaptureFixture[str]) -> None:
    """--tp 8 --ep 3 --pp 3 on 9 nodes: Megatron starts it with a model whose experts 3 divides. With no model given
    the 8x7b preset's 8 experts are not the user's: the layout is checked (with 9 experts assumed, and said); with
    --experts 8 it is the user's model, and Megatron's arguments refuse it."""
    code, data = check_json(["sample:dgx-h100", "--nodes", "9", "--tp", "8", "--ep", "3", "--pp", "3"], capsys)
    assert code in (0, 1) and data["groups"]["ep"][0] == [0, 8, 16]
    assert any("8x7b preset with 9 experts instead of its 8" in line for line in data["assumptions"])
    code, _, err = run_cli(["check", "sample:dgx-h100", "--nodes", "9", "--tp", "8", "--ep", "3", "--pp", "3",
                              "--experts", "8"], capsys)
    assert_one_line_error(code, err, "Number of experts should be a multiple of expert model parallel_size")
