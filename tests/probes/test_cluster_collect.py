"""`linkscope collect` and `bench collectives` across "nodes": separate torchrun / srun-style processes on
loopback, each node probing its own fake machine (LINKSCOPE_COLLECT_FAKE, LINKSCOPE_NODE_NAME)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from linkscope.probes.cluster_collect import FAKE_ENV, NAME_ENV, ProbeRun, launch_from_env
from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.source import load_source
from linkscope.topo.model.codec import measurements_from_json
from support.cluster import ROOT, as_text, finish, free_port, listening, node_env, port_is_free, torchrun_nodes

psutil = pytest.importorskip("psutil")
pytest.importorskip("torch")


def test_collect_under_torchrun_gathers_every_node(tmp_path: Path) -> None:
    """Two torchrun "nodes" (c10d on 127.0.0.1), each its own sample: the cluster file has both, as probed."""
    output = tmp_path / "cluster.json"
    nodes = [node_env("node-a", {FAKE_ENV: "sample:dgx-h100"}), node_env("node-b", {FAKE_ENV: "sample:dgx-h100-degraded"})]
    results = finish(torchrun_nodes(nodes, free_port(), 1, ["-m", "linkscope", "collect", "-o", str(output), "--json"]), 90)
    assert [rc for rc, _, _ in results] == [0, 0], as_text(results)
    cluster = load_source(str(output))
    assert sorted(host.hostname for host in cluster.hosts) == ["node-a", "node-b"]
    by_name = {host.hostname: host for host in cluster.hosts}
    assert by_name["node-b"].gpus[3].nvlink_active_count == 16 and by_name["node-a"].gpus[3].nvlink_active_count == 18
    summary = json.loads(next(out for _, out, _ in results if out.strip()))
    assert summary["gaps"] == [] and sorted(summary["hosts"]) == ["node-a", "node-b"]
    assert [path.name for path in tmp_path.iterdir()] == ["cluster.json"]  # no temporary file left behind


def _srun_task(rank: int, world: int, port: int, name: str, fake: str, output: Path, *args: str,
               local_rank: int = 0) -> subprocess.Popen[str]:
    env = node_env(name, {FAKE_ENV: fake, "SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world),
                          "SLURM_LOCALID": str(local_rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    return subprocess.Popen([sys.executable, "-m", "linkscope", "collect", "-o", str(output), "--json", *args], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_hung_probe_is_a_gap_within_the_deadline_and_only_loopback_listens(tmp_path: Path) -> None:
    """srun-style tasks: node-c's probe never returns; the cluster has node-a and node-b plus a gap naming node-c,
    soon after --probe-timeout; while it runs every listening socket is on 127.0.0.1, and afterwards none is."""
    port, output = free_port(), tmp_path / "cluster.json"
    fakes = [("node-a", "sample:dgx-h100"), ("node-b", "sample:pcie-l40s-8"), ("node-c", "hang")]
    started = time.monotonic()
    tasks = [_srun_task(rank, 3, port, name, fake, output, "--probe-timeout", "4") for rank, (name, fake) in enumerate(fakes)]
    seen: set[tuple[str, int]] = set()
    while any(task.poll() is None for task in tasks) and time.monotonic() - started < 60:
        seen |= listening([task.pid for task in tasks])
        time.sleep(0.2)
    results = finish(tasks, 30)
    elapsed = time.monotonic() - started
    assert results[0][0] == 1, as_text(results)  # a node is missing: exit 1
    assert [rc for rc, _, _ in results[1:]] == [0, 0], as_text(results)
    summary = json.loads(results[0][1])
    assert summary["hosts"] == ["node-a", "node-b"]
    assert summary["gaps"] == [{"host": "node-c", "subject": "collect (rank 2)", "reason": "probe did not finish within 4 s"}]
    assert elapsed < 40, elapsed
    cluster = load_source(str(output))
    assert [gap.host for gap in cluster.gaps if gap.subject.startswith("collect")] == ["node-c"]
    assert seen and all(address == "127.0.0.1" for address, _ in seen), seen
    assert port_is_free(port)
    assert all(not psutil.pid_exists(task.pid) or psutil.Process(task.pid).status() == psutil.STATUS_ZOMBIE for task in tasks)


def test_only_the_first_task_of_a_node_sends_its_snapshot(tmp_path: Path) -> None:
    """Two tasks on one node (SLURM_LOCALID 0 and 1): one host in the cluster, not the same host twice."""
    port, output = free_port(), tmp_path / "cluster.json"
    tasks = [_srun_task(rank, 2, port, "node-a", "sample:dgx-h100", output, local_rank=rank) for rank in range(2)]
    results = finish(tasks, 60)
    assert [rc for rc, _, _ in results] == [0, 0], as_text(results)
    assert json.loads(results[0][1])["hosts"] == ["node-a"]
    assert [host.hostname for host in load_source(str(output)).hosts] == ["node-a"]


def test_a_node_that_never_joins_ends_the_rendezvous_at_its_deadline(tmp_path: Path) -> None:
    started = time.monotonic()
    task = _srun_task(0, 2, free_port(), "node-a", "sample:dgx-h100", tmp_path / "cluster.json", "--rendezvous-timeout", "2")
    rc, out, err = finish([task], 40)[0]
    assert rc == 2 and out == ""
    assert err.startswith("linkscope: error: collect: the rendezvous at 127.0.0.1:") and "within 2 s" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert time.monotonic() - started < 30
    assert not (tmp_path / "cluster.json").exists()


def test_collect_outside_torchrun_or_srun_is_bad_input(tmp_path: Path) -> None:
    env = node_env("node-a")
    done = subprocess.run([sys.executable, "-m", "linkscope", "collect", "-o", str(tmp_path / "c.json")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "torchrun" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("env", "expected"), [
    ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400"},
     ("torchrun", 1, 4, 0, "10.0.0.1", 29400)),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "MASTER_ADDR": "gpu001"},
     ("slurm", 3, 4, 0, "gpu001", 29500)),
])
def test_launch_is_read_from_torchrun_or_slurm_variables(env: dict[str, str], expected: tuple[object, ...]) -> None:
    launch = launch_from_env(env)
    assert (launch.launcher, launch.rank, launch.world_size, launch.local_rank, launch.master_addr,
            launch.master_port) == expected


@pytest.mark.parametrize("env", [{}, {"SLURM_PROCID": "0", "SLURM_NTASKS": "2"},
                                 {"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"},
                                 {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}])
def test_launch_without_a_usable_environment_is_input_error(env: dict[str, str]) -> None:
    with pytest.raises(InputError):
        launch_from_env(env)


def test_a_failing_probe_is_sent_as_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAKE_ENV, "fail")
    monkeypatch.setenv(NAME_ENV, "node-x")
    payload = ProbeRun().payload(10)
    assert payload == {"host": "node-x", "error": "probe failed: RuntimeError: injected failure (LINKSCOPE_COLLECT_FAKE)"}


def test_bench_collectives_across_torchrun_nodes_names_the_hosts_of_each_group(tmp_path: Path) -> None:
    """2 nodes x 2 ranks, gloo, --layout tp=2,dp=2, rank 2 slow: TP groups stay on one host, DP groups span both,
    every row (and the Measurements rank 0 writes) says which hosts ran it, and the straggler names the slow node."""
    output = tmp_path / "bench.json"
    argv = ["-m", "linkscope.probes.bench.worker", "collectives", "--backend", "gloo", "--layout", "tp=2,dp=2",
            "--ops", "all_reduce", "--min-bytes", "1M", "--max-bytes", "1M", "--iters", "3", "--warmup", "1", "-o", str(output)]
    nodes = [node_env(name, {"LINKSCOPE_BENCH_FAULT": "slow:2"}) for name in ("node-a", "node-b")]
    results = finish(torchrun_nodes(nodes, free_port(), 2, argv), 90)
    assert [rc for rc, _, _ in results] == [0, 0], as_text(results)
    rows = [json.loads(line) for _, out, _ in results for line in out.splitlines() if line.startswith("{")]
    assert rows and all(row["wrong"] == 0 for row in rows)
    tp_hosts = {row["group"]: tuple(row["hosts"]) for row in rows if row["dim"] == "tp"}
    dp_hosts = {row["group"]: tuple(sorted(row["hosts"])) for row in rows if row["dim"] == "dp"}
    assert sorted(tp_hosts.values()) == [("node-a",), ("node-b",)]
    assert set(dp_hosts.values()) == {("node-a", "node-b")} and len(dp_hosts) == 2
    slow_host = next(row["hosts"][0] for row in rows if row["dim"] == "tp" and 2 in row["ranks"])
    slow_group = next(row["group"] for row in rows if row["dim"] == "tp" and 2 in row["ranks"])
    stderr = "".join(err for _, _, err in results)
    assert f"straggler: tp group {slow_group} on {slow_host}: all_reduce 1048576 B" in stderr, stderr[-3000:]
    measured = measurements_from_json(output.read_text())
    assert {len(result.hosts) for result in measured.collectives if (result.group or "").startswith("tp")} == {1}
    assert {len(result.hosts) for result in measured.collectives if (result.group or "").startswith("dp")} == {2}
    assert [path.name for path in tmp_path.iterdir()] == ["bench.json"]


def test_a_node_killed_after_the_rendezvous_is_a_gap_and_the_rest_is_written(tmp_path: Path) -> None:
    """Three srun-style tasks on loopback; node-c is killed (SIGKILL) after joining, before it sends: rank 0
    writes node-a and node-b, names node-c as a gap and exits 1 (before the fix: exit 2 and no file)."""
    port, output = free_port(), tmp_path / "cluster.json"
    fakes = [("node-a", "sample:dgx-h100"), ("node-b", "sample:pcie-l40s-8"), ("node-c", "kill")]
    started = time.monotonic()
    tasks = [_srun_task(rank, 3, port, name, fake, output, "--probe-timeout", "3") for rank, (name, fake) in enumerate(fakes)]
    results = finish(tasks, 60)
    assert results[0][0] == 1, as_text(results)
    assert results[2][0] == -9, as_text(results)
    summary = json.loads(results[0][1])
    assert summary["hosts"] == ["node-a", "node-b"]
    assert [(gap["host"], gap["subject"]) for gap in summary["gaps"]] == [("node-c", "collect (rank 2)")]
    assert "died or hung after the rendezvous" in summary["gaps"][0]["reason"]
    assert time.monotonic() - started < 45
    cluster = load_source(str(output))
    assert [host.hostname for host in cluster.hosts] == ["node-a", "node-b"]
    assert [path.name for path in tmp_path.iterdir()] == ["cluster.json"]
