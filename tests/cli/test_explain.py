"""`linkscope explain`: the cost model backwards, and `estimate --sweep`."""

from __future__ import annotations

import json

import pytest

from linkscope.commands.estimate_sweep import sweep_rows, sweep_sizes
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_WORLD_RANKS
from linkscope.topo.cost.collectives import uniform_links
from linkscope.topo.cost.explain import explain, implied_gbps, parse_duration_s, what_if_scenarios
from support.bench import cli_main

GIB = 1 << 30


def test_worked_example_150_ms_is_a_ring_over_the_network_one_rank_per_node() -> None:
    """DOMAIN worked example: 1 GiB all_reduce over 8 ranks; 150 ms fits a 12.5 GB/s network, one rank per node;
    in one NVLink node (1 us, 300 GB/s) it would take 6.28 ms."""
    fits = explain("all_reduce", GIB, 8, 0.150, what_if_scenarios(8, (1.0, 300.0), (5.0, 12.5), (2.0, 25.8)))
    best = fits[0]
    assert best.scenario.links.nodes == 8 and best.scenario.links.gpus_per_node == 1
    assert best.cost.algo == "ring" and best.cost.time_s == pytest.approx(0.1504, abs=0.0005)
    assert best.implied_gbps == pytest.approx(12.5, rel=0.01) and best.verdict == "ok"
    nvlink = min(fits, key=lambda each: each.cost.time_s)
    assert nvlink.scenario.links.nodes == 1 and nvlink.cost.time_s == pytest.approx(0.00628, abs=0.00005)


def test_cli_worked_example_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "150ms"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Best explained by ranks 1 per node on 8 nodes over the network" in out
    assert "ring predicts 150.4 ms" in out and "12.5 GB/s on the network" in out and "6.277 ms" in out
    assert cli_main(["explain", "allreduce", "--bytes", "1G", "--ranks", "8", "--time", "0.15s", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best"]["link"] == "the network" and data["best"]["algo"] == "ring"
    assert data["observed_busbw_gbps"] == pytest.approx(12.53, abs=0.01) and data["layout"] is None
    assert len(data["scenarios"]) == 5  # 8, 4, 2, 1 per node and one node over PCIe


def test_with_a_source_the_time_points_at_a_slow_link_or_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """On a DGX H100 one node of 8 rides NV18: 150 ms is far below it (exit 1); the model's own time fits."""
    argv = ["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "sample:dgx-h100", "--json", "--time"]
    assert cli_main([*argv, "150ms"]) == 1
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["link"] == "NV18" and layout["verdict"] == "far below"
    assert layout["implied_gbps"] == pytest.approx(12.5, rel=0.05)
    fast_s = layout["predicted_s"]
    assert cli_main([*argv, f"{fast_s * 1.1}s"]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["verdict"] == "ok" and layout["fits"] is True
    # faster than NV18 allows: not slow, but the model or the placement is wrong, a warning as in `import --fail-on`
    assert cli_main([*argv, f"{fast_s / 10}s"]) == 1
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["verdict"] == "faster than model" and layout["fits"] is False


def test_placement_flags_spread_the_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["explain", "all_reduce", "--bytes", "1G", "--ranks", "16", "--time", "20ms", "sample:dgx-h100", "--json"]
    assert cli_main(argv) in (0, 1)
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["placement"].startswith("16 ranks: 2 hosts x 8 GPUs assumed") and layout["assumed"] is True
    assert cli_main([*argv, "--nodes", "4"]) in (0, 1)  # the hosts the user gives are the placement, not assumed
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["placement"] == "16 ranks: 4 hosts x 4 GPUs from --nodes 4" and layout["assumed"] is False
    assert cli_main([*argv[:-1], "--nodes", "1"]) == 2  # 16 ranks do not fit one 8-GPU node
    assert "do not fit" in capsys.readouterr().err


def test_explain_places_ranks_as_every_judgement_of_a_measured_figure_does(capsys: pytest.CaptureFixture[str]) -> None:
    """One placement: explain's line is the one `place_measured` gives import --expect for the same ranks and hosts."""
    from linkscope.topo.layout.measured import place_measured
    from linkscope.topo.samples import load_sample

    argv = ["explain", "all_reduce", "--bytes", "1G", "--ranks", "16", "--time", "20ms", "sample:dgx-h100", "--nodes",
            "2", "--json"]
    assert cli_main(argv) == 1  # 101 GB/s busbw over 2 DGX H100 nodes is far below their 8 NIC rails
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["placement"] == place_measured(16, load_sample("dgx-h100"), nodes=2).line
    assert layout["limited_by"] == "network"


def test_too_fast_for_any_latency_has_no_implied_bandwidth() -> None:
    links = uniform_links(8, 8, (1.0, 300.0), (5.0, 12.5))
    assert implied_gbps("all_reduce", links, GIB, 1e-6) is None


@pytest.mark.parametrize(("text", "seconds"), [("150ms", 0.15), ("150 ms", 0.15), ("0.15s", 0.15), ("40us", 4e-5),
                                               ("2", 2.0), ("5e-3s", 5e-3)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration_s(text, "--time") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-1ms", "0", "10 min", "nan"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InputError, match="--time"):
        parse_duration_s(text, "--time")


def test_explain_bad_input_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["explain", "all_reduce", "--bytes", "1G", "--ranks", "1", "--time", "1ms"],
                 ["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "1ms", "--nodes", "2"],
                 ["explain", "warp_drive", "--bytes", "1G", "--ranks", "8", "--time", "1ms"],
                 ["explain", "all_reduce", "a", "b", "--bytes", "1G", "--ranks", "8", "--time", "1ms"]):
        assert cli_main(argv) == 2, argv
        assert capsys.readouterr().err.count("\n") == 1


def test_sweep_sizes_double() -> None:
    assert sweep_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    with pytest.raises(InputError, match="--sweep"):
        sweep_sizes("8K:1K")


def test_sweep_hierarchical_gains_most_at_small_sizes() -> None:
    """Latency-bound small sizes gain most from hierarchical; large ones approach the bandwidth floor."""
    links = uniform_links(32, 4, (1.0, 300.0), (5.0, 12.5))
    rows = sweep_rows("all_reduce", links, sweep_sizes("1K:1G"))
    gain = [row["algorithms"]["ring"]["time_s"] / row["algorithms"]["hierarchical"]["time_s"] for row in rows]
    assert gain[0] > 5 and gain[-1] < 1.2 and gain == sorted(gain, reverse=True)


def test_estimate_sweep_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["estimate", "all_reduce", "--ranks", "32", "--nodes", "4", "--sweep", "1K:1M", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["size_bytes"] for row in data["sizes"]] == [1024 << i for i in range(11)]
    assert set(data["sizes"][0]["algorithms"]) == {"ring", "tree", "hierarchical"}
    assert cli_main(["estimate", "all_reduce", "--ranks", "32", "--nodes", "4", "--sweep", "1K:1M"]) == 0
    out = capsys.readouterr().out
    assert "# ring" in out and "= hierarchical" in out and "cheapest" in out
    assert cli_main(["estimate", "all_reduce", "--ranks", "8"]) == 2
    assert "--bytes SIZE or --sweep" in capsys.readouterr().err


def test_a_two_node_all_reduce_at_a_tenth_points_at_the_network_not_nvlink(capsys: pytest.CaptureFixture[str]) -> None:
    """The KVM 2-node H200 run's 7.59 GiB row took 278106 us (read by hand from
    h200-2node-16gpu-kvm-vm-degraded-all_reduce.txt): on 2 DGX H100 nodes that is the network path, not NV18."""
    argv = ["explain", "all_reduce", "--bytes", "8153726976", "--ranks", "16", "--nodes", "2", "--time", "278106us",
            "sample:dgx-h100"]
    assert cli_main([*argv, "--json"]) == 1
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["limited_by"] == "network" and layout["verdict"] == "far below"
    assert layout["path"][0] == "NV18" and layout["path"][-1].startswith("NET 8x")
    assert "NIC" in layout["link"]
    assert cli_main(argv) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "Verdict: far below" in text and "NV18 (or what shares it)" not in text


@pytest.mark.parametrize("ranks", [str(10**30), str(MAX_WORLD_RANKS + 1)])
def test_explain_ranks_without_a_source_has_the_cap_estimate_has(ranks: str) -> None:
    """Issue 24: `--ranks 10**30` without a SOURCE never finished; the caps come from topo.common.limits."""
    from support.fuzz import run_cli

    outcome = run_cli(["explain", "all_reduce", "--bytes", "1G", "--ranks", ranks, "--time", "150ms"], seconds=5)
    assert outcome.status == 2 and "--ranks" in outcome.err and len(outcome.err.strip().splitlines()) == 1
    same = run_cli(["estimate", "all_reduce", "--bytes", "1G", "--ranks", ranks, "--intra", "1:300"], seconds=5)
    assert same.status == 2 and "--ranks" in same.err
