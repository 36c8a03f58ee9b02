"""Workers are run safely: a hung worker is killed at the deadline, a failing one is reported in
one line, Ctrl-C / SIGTERM / the spawner's death leave no process behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from linkscope.probes.bench import runner
from linkscope.probes.bench.spec import CollectiveSpec, layout_groups
from linkscope.topo.model.codec import to_jsonable
from support.bench import alive, cli_process, descendants

pytest.importorskip("psutil")
pytest.importorskip("torch")

SPEC = CollectiveSpec(ops=("all_reduce",), sizes_bytes=(1024,), dtype="float32", warmup=1, iters=2, backend="gloo",
                      world_size=2, dims=layout_groups(None, 2))
HANG_ARGS = ["bench", "collectives", "--backend", "gloo", "--ops", "all_reduce", "--min-bytes", "1K", "--max-bytes", "1K",
             "--timeout", "60"]


def _run(fault: str, timeout_s: float) -> tuple[str, runner.WorkerGroup]:
    started: list[runner.WorkerGroup] = []
    with pytest.raises(runner.BenchError) as caught:
        runner.run_workers("collectives", to_jsonable(SPEC), 2, timeout_s, extra_env={"LINKSCOPE_BENCH_FAULT": fault},
                           on_start=started.append)
    return str(caught.value), started[0]


def test_a_hung_worker_is_killed_at_the_deadline_and_nothing_survives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "TERM_GRACE_S", 1.0)
    t0 = time.monotonic()
    message, group = _run("hang-ignore-term:1", timeout_s=8)
    assert "deadline of 8 s passed" in message and "ranks still running: 0, 1" in message
    assert time.monotonic() - t0 < 20
    assert alive(group.pids) == []
    assert descendants(os.getpid()) == []
    assert not group.job_dir.exists()


def test_a_failing_worker_is_reported_in_one_line() -> None:
    message, group = _run("fail:1", timeout_s=60)
    assert message == "rank 1: RuntimeError: injected failure (LINKSCOPE_BENCH_FAULT)"
    assert alive(group.pids) == []


def _workers_of(process: Any, count: int) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = descendants(process.pid)
        if len(pids) >= count:
            time.sleep(3.0)  # let them reach the hang
            return descendants(process.pid)
        time.sleep(0.1)
    raise AssertionError("workers did not start")


@pytest.mark.parametrize(("signum", "fault"), [(signal.SIGTERM, "hang-ignore-term:1"), (signal.SIGINT, "hang:1")])
def test_sigterm_and_ctrl_c_end_every_worker(signum: int, fault: str) -> None:
    process = cli_process(HANG_ARGS, env={"LINKSCOPE_BENCH_FAULT": fault})
    workers = _workers_of(process, 2)
    process.send_signal(signum)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "workers ended" in err and "Traceback" not in err
    assert alive(workers) == []


def test_workers_die_with_their_spawner() -> None:
    process = cli_process(HANG_ARGS, env={"LINKSCOPE_BENCH_FAULT": "hang:1"})
    workers = _workers_of(process, 2)
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(workers) == []


def test_job_directory_is_private() -> None:
    group = runner.start_workers("collectives", {}, 0, 1.0)
    try:
        assert (os.stat(group.job_dir).st_mode & 0o777) == 0o700
        assert Path(group.job_dir, "job.json").exists()
    finally:
        group.terminate()
        import shutil

        shutil.rmtree(group.job_dir)


def test_workers_use_loopback_only_whatever_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth0")  # set for the cluster's jobs, not for local workers
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    env = runner.worker_env(1, 2, 1)
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and env["NCCL_SOCKET_IFNAME"] == "lo"
    assert (env["LINKSCOPE_RANK"], env["LINKSCOPE_WORLD_SIZE"]) == ("1", "2")


def test_running_workers_listen_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sockets themselves, read from the kernel while two gloo workers sit connected, even with
    the environment naming another interface for the cluster's jobs."""
    import psutil

    others = [name for name, addresses in psutil.net_if_addrs().items()
              if name != "lo" and any(a.family.name == "AF_INET" for a in addresses)]
    if others:
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", others[0])
    group = runner.start_workers("collectives", to_jsonable(SPEC), 2, 60, {"LINKSCOPE_BENCH_FAULT": "hang:0,hang:1"})
    try:
        sockets: list[Any] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(s.status == "ESTABLISHED" for s in sockets):
            time.sleep(0.3)
            sockets = [s for pid in group.pids for s in psutil.Process(pid).net_connections(kind="inet")]
        listening = [s for s in sockets if s.status == "LISTEN"]
        assert listening and all(s.laddr.ip in ("127.0.0.1", "::1") for s in listening), sockets
        assert all(s.laddr.ip in ("127.0.0.1", "::1") for s in sockets)
    finally:
        group.terminate()
        shutil.rmtree(group.job_dir, ignore_errors=True)


def test_a_worker_whose_spawner_is_already_gone_exits_at_once(tmp_path: Path) -> None:
    """The window before the parent-death signal is armed: a worker started for a parent that is
    no longer its parent leaves at once instead of running to its alarm."""
    env = runner.worker_env(0, 1, 0, {"LINKSCOPE_PARENT_PID": "1"})  # pid 1 is not our parent
    (tmp_path / "job.json").write_text('{"kind": "collectives", "spec": {}, "timeout_s": 600}')
    done = subprocess.run([sys.executable, "-m", "linkscope.probes.bench.worker", "--job", str(tmp_path)], env=env, timeout=60,
                          capture_output=True)
    assert done.returncode == 1 and not (tmp_path / "error-0.txt").exists()


def test_a_rank_that_wrote_its_error_ends_the_run_without_waiting_for_it_to_exit() -> None:
    """A failed rank that hangs on its way out (NCCL teardown) must not hold the run to its deadline."""
    t0 = time.monotonic()
    with pytest.raises(runner.BenchError, match="rank 0: RuntimeError: injected failure"):
        runner.run_workers("collectives", to_jsonable(SPEC), 2, 120,
                           extra_env={"LINKSCOPE_BENCH_FAULT": "fail-then-hang:0"})
    assert time.monotonic() - t0 < 60


def test_cancel_from_another_thread_ends_the_run() -> None:
    import threading

    cancel = threading.Event()
    started: list[runner.WorkerGroup] = []
    timer = threading.Timer(4.0, cancel.set)
    timer.start()
    try:
        with pytest.raises(runner.BenchInterrupted, match="cancelled"):
            runner.run_workers("collectives", to_jsonable(SPEC), 2, 60, extra_env={"LINKSCOPE_BENCH_FAULT": "hang:0"},
                               on_start=started.append, cancel=cancel)
    finally:
        timer.cancel()
    assert alive(started[0].pids) == []


def test_job_directories_left_by_a_killed_spawner_are_removed_by_the_next_run() -> None:
    import tempfile

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale = Path(tempfile.mkdtemp(prefix=runner.JOB_DIR_PREFIX))
    (stale / "job.json").write_text(f'{{"kind": "p2p", "spec": {{}}, "timeout_s": 1, "spawner_pid": {dead_pid}}}')
    live = Path(tempfile.mkdtemp(prefix=runner.JOB_DIR_PREFIX))
    (live / "job.json").write_text(f'{{"kind": "p2p", "spec": {{}}, "timeout_s": 1, "spawner_pid": {os.getppid()}}}')
    try:
        runner.remove_stale_job_dirs()
        assert not stale.exists() and live.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


def test_torchrun_entry_without_a_gpu_for_nccl_is_one_line_exit_2() -> None:
    """Under torchrun with --backend nccl on a rank that sees no GPU: one line, no traceback, and no
    rendezvous started (so nothing listens)."""
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "linkscope.probes.bench.worker", "collectives", "--backend", "nccl"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=Path(runner.__file__).resolve().parents[2])
    assert done.returncode == 2
    assert done.stderr == "error: --backend nccl: local rank 0 but 0 CUDA GPU(s) visible to it\n"
