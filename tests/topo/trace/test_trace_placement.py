"""trace --source places the job's ranks once, as every judgement of a measured figure does (topo.layout.measured):
from the traces' hosts when every rank's trace names one, else as --nodes says, else assumed; the placement is said in
one line (text) and as `placement` (JSON), and each call is priced as `import --expect` prices the same group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.cli import main
from linkscope.topo.cost.expect import expect_collective
from linkscope.topo.layout.measured import place_measured
from linkscope.topo.model.measurements import CollectiveResult
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES
from support.trace import TraceBuilder

REAL = FIXTURES / "real" / "traces"
SAMPLED_128 = REAL / "hta-rank0-of-128-sampled-no-pg.json.gz"
RANK0_OF_16 = REAL / "hta-rank0-of-16-a100-80gb-5-steps-all_to_all-as-sendrecv-kernels.json.gz"
ALL_REDUCE_BYTES = 256 << 20


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    return status, capsys.readouterr().out


def test_a_real_trace_of_128_ranks_says_its_assumed_placement(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 of 128 (distributedInfo world_size 128, no host name: its sidecar): 16 DGX A100 hosts of 8, assumed,
    in one line of text and as `placement`; its whole-job calls ride the network path."""
    _, out = _run(["trace", str(SAMPLED_128), "--source", "sample:dgx-a100", "--json"], capsys)
    report = json.loads(out)
    placement = report["placement"]
    assert (placement["ranks"], placement["nodes"], placement["gpus_per_node"], placement["assumed"]) == (128, 16, 8, True)
    assert placement["line"].startswith("128 ranks: 16 hosts x 8 GPUs assumed (the traces name no hosts")
    assert {row["limited_by"] for row in report["collectives"]} == {"network"}
    assert all(row["path"][-1].startswith("NET ") for row in report["collectives"])
    _, text = _run(["trace", str(SAMPLED_128), "--source", "sample:dgx-a100"], capsys)
    assert "placed: 128 ranks: 16 hosts x 8 GPUs assumed" in " ".join(text.split())


def test_nodes_places_a_real_trace_as_the_user_says(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 of 16 (world_size 16 in its sidecar) with --nodes 4: 4 hosts x 4 GPUs, not assumed; without it, the
    16 ranks are assumed to fill 2 DGX A100 hosts."""
    _, out = _run(["trace", str(RANK0_OF_16), "--source", "sample:dgx-a100", "--nodes", "4", "--json"], capsys)
    placement = json.loads(out)["placement"]
    assert placement == {"ranks": 16, "nodes": 4, "gpus_per_node": 4, "assumed": False,
                         "line": "16 ranks: 4 hosts x 4 GPUs from --nodes 4"}
    _, out = _run(["trace", str(RANK0_OF_16), "--source", "sample:dgx-a100", "--json"], capsys)
    assert json.loads(out)["placement"]["line"].startswith("16 ranks: 2 hosts x 8 GPUs assumed")


@pytest.mark.parametrize("source, nodes", [("sample:dgx-a100", "64"), ("sample:h100-cluster-mixed", "2")])
def test_nodes_the_source_cannot_hold_is_one_line(source: str, nodes: str, capsys: pytest.CaptureFixture[str]) -> None:
    """More hosts than ranks, or a host count a 4-host cluster snapshot does not have: bad usage, one line, exit 2."""
    status = main(["trace", str(RANK0_OF_16), "--source", source, "--nodes", nodes])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1 and f"--nodes {nodes}" in err and "Traceback" not in err


def _four_ranks(tmp_path: Path, hosts: list[str]) -> list[str]:
    """Four ranks' traces, one all_reduce of 256 MiB over all four, each rank on the host `hosts` gives it."""
    tmp_path.mkdir(exist_ok=True)
    paths = []
    for rank, host in enumerate(hosts):
        builder = TraceBuilder(rank=rank, world_size=4, host=host)
        builder.step(1, 0, 50_000)
        builder.compute_kernel(launch_us=0, start_us=0, duration_us=30_000)
        builder.collective("allreduce", ALL_REDUCE_BYTES // 4, launch_us=30_000, start_us=30_100, duration_us=10_000)
        paths.append(str(builder.write(tmp_path / f"rank{rank}.json")))
    return paths


def test_the_traces_hosts_place_the_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four ranks whose traces say two hosts (node-a: 0,1; node-b: 2,3): 2 hosts x 2 GPUs from the traces' hosts,
    not assumed, and the all_reduce rides the network; the same ranks on one host ride NVLink."""
    two_hosts = _four_ranks(tmp_path / "two", ["node-a", "node-a", "node-b", "node-b"])
    _, out = _run(["trace", *two_hosts, "--source", "sample:dgx-h100", "--json"], capsys)
    report = json.loads(out)
    assert report["placement"]["line"] == "4 ranks: 2 hosts x 2 GPUs from the traces' hosts"
    assert report["placement"]["assumed"] is False
    assert {row["limited_by"] for row in report["collectives"]} == {"network"}
    one_host = _four_ranks(tmp_path / "one", ["node-a"] * 4)
    _, out = _run(["trace", *one_host, "--source", "sample:dgx-h100", "--json"], capsys)
    report = json.loads(out)
    assert report["placement"]["line"] == "4 ranks: 1 host x 4 GPUs from the traces' hosts"
    assert {row["limited_by"] for row in report["collectives"]} == {"nvlink"}


def test_a_trace_call_is_priced_as_import_prices_the_same_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One placement, one pricing: the expected time of the traced all_reduce (4 ranks on 2 hosts) is what
    `import --expect` gives an nccl-tests row of the same op, size and hosts."""
    paths = _four_ranks(tmp_path, ["node-a", "node-a", "node-b", "node-b"])
    _, out = _run(["trace", *paths, "--source", "sample:dgx-h100", "--json"], capsys)
    row = json.loads(out)["collectives"][0]
    result = CollectiveResult("all_reduce", ALL_REDUCE_BYTES, "float", 10_000.0, 0.0, 0.0, 4,
                              hosts=("node-a", "node-b"))
    snapshot = load_sample("dgx-h100")
    placed = place_measured(4, snapshot, ("node-a", "node-b"), 2)
    expected = expect_collective(result, snapshot, placed=placed)
    assert expected is not None and expected.expected_time_us is not None
    assert row["expected_us"] == pytest.approx(expected.expected_time_us, rel=1e-6)
    assert row["link"] == expected.link and row["path"] == list(expected.path)
