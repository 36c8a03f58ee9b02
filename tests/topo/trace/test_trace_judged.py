"""trace --source never silently clean: what could not be priced and why, the GPU's idle share per step, and calls
known only from their `nccl:*` CPU launches counted (real traces, facts read by hand from their sidecars)."""

from __future__ import annotations

import json

import pytest

from linkscope.cli import main
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "traces"
NO_KERNELS = REAL / "hta-no-distributedinfo-1-step-6-all_to_all-no-kernels-edited.json.gz"
SAMPLED_128 = REAL / "hta-rank0-of-128-sampled-no-pg.json.gz"
RANK3_OF_8 = REAL / "hta-rank3-of-8-a100-pg509-6-steps-all_to_all-sendrecv-allreduce-ll-kernels.json.gz"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    return status, capsys.readouterr().out


def test_calls_known_from_their_cpu_launches_are_counted_and_said_unpriced(capsys: pytest.CaptureFixture[str]) -> None:
    """6 `nccl:all_to_all` CPU annotations, no NCCL kernel, no distributedInfo: the 6 calls are counted, none is
    priced, each says why, and the verdict is a warning, never "No findings"."""
    status, out = _run(["trace", str(NO_KERNELS), "--source", "sample:dgx-a100", "--json"], capsys)
    report = json.loads(out)
    assert len(report["collectives"]) == 6 and all(row["timed_on"] == "cpu-launch" for row in report["collectives"])
    assert report["judged"]["calls"] == 6 and report["judged"]["priced"] == 0
    assert list(report["judged"]["not_priced"].values()) == [6]
    assert "collectives-not-judged" in {f["code"] for f in report["findings"]} and status == 1
    _, text = _run(["trace", str(NO_KERNELS), "--source", "sample:dgx-a100"], capsys)
    assert "No findings" not in text and "no collective judged against its links" in " ".join(text.split())


def test_a_128_rank_trace_without_groups_is_priced_across_nodes_as_assumed(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 of 128 (distributedInfo), no pg_config, no group sizes: its 10 calls are priced as the whole job, which
    spans 16 DGX A100 nodes, so over the network path; each row says the group was assumed."""
    _, out = _run(["trace", str(SAMPLED_128), "--source", "sample:dgx-a100", "--json"], capsys)
    report = json.loads(out)
    assert report["judged"] == {"steps": 2, "calls": 10, "priced": 10, "not_priced": {}}
    assert all("group_assumed" in row and "NIC" in row["link"] for row in report["collectives"])


def test_the_gpu_idle_share_of_each_step_and_a_finding_when_it_idles_most(capsys: pytest.CaptureFixture[str]) -> None:
    """Step 1009 of the kernel-less trace is 75.47 ms with 25.38 ms of compute and 0.57 ms exposed communication:
    the GPU idles ~66% of it (a finding); rank 3 of 8 idles well under half of every step (no finding)."""
    _, out = _run(["trace", str(NO_KERNELS), "--json"], capsys)
    report = json.loads(out)
    (step,) = report["steps"]
    assert step["gpu_idle_share"] == pytest.approx(0.656, abs=0.005)
    assert "gpu-idle" in {f["code"] for f in report["findings"]}
    _, out = _run(["trace", str(RANK3_OF_8), "--json"], capsys)
    report = json.loads(out)
    assert all(step["gpu_idle_share"] < 0.5 for step in report["steps"])
    assert "gpu-idle" not in {f["code"] for f in report["findings"]}


def test_calls_that_name_no_group_are_priced_as_the_whole_job_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 3 of 8 (distributedInfo world_size 8) records neither group ranks nor group sizes: its calls are priced as
    the whole job, marked assumed in JSON and text."""
    _, out = _run(["trace", str(RANK3_OF_8), "--source", "sample:dgx-a100", "--json"], capsys)
    report = json.loads(out)
    priced = [row for row in report["collectives"] if "expected_us" in row]
    assert priced and all("group_assumed" in row for row in priced)
    _, text = _run(["trace", str(RANK3_OF_8), "--source", "sample:dgx-a100"], capsys)
    assert "priced as the whole job (assumed)" in " ".join(text.split())
