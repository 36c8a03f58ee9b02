"""Spawn benchmark workers, wait for them under a deadline, and leave nothing behind.

Each worker runs `python -m linkscope.probes.bench.worker --job DIR` in a session (process group) of its
own, so a Ctrl-C at the terminal reaches only this process, which then ends the workers: SIGTERM
to every worker's whole group, a grace period, then SIGKILL. Rendezvous goes through a FileStore
in a private temporary directory (mode 0700), and gloo is pinned to the loopback interface,
so nothing listens on a network. A run that outlives its deadline is ended the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Generic, TypeVar

import psutil

from linkscope.probes.bench.worker import (
    JOB_FILE,
    LOCAL_RANK_ENV,
    PARENT_ENV,
    PROGRESS_FILE,
    RANK_ENV,
    RESULT_FILE,
    WORLD_ENV,
    error_file,
    kept_file,
)
from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.measurements import Measurements

TERM_GRACE_S = 3.0
"""How long workers get between SIGTERM and SIGKILL."""
KILL_WAIT_S = 10.0
"""How long to wait for the workers after SIGKILL (one stuck in the GPU driver may never go)."""
JOB_DIR_PREFIX = "linkscope-bench-"
POLL_S = 0.05


class BenchError(Exception):
    """A benchmark run failed (a worker error, the deadline, an interruption): one line for people.

    `kept` holds what the workers had measured before it ended, as (kind, value) pairs in the
    order each rank measured them (probes.bench.api turns them into a :class:`BenchOutcome`).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kept: list[tuple[str, Any]] = []


ResultT = TypeVar("ResultT")


@frozen
class BenchOutcome(Generic[ResultT]):
    """What a benchmark run gave: finished (`stopped` is None), or cut short with what the workers measured
    before it ended and why."""

    measurements: Measurements | None
    """The results as Measurements; None for runs that are not measurements of links (bench step, --reuse)."""
    result: ResultT
    """What the command renders: a :class:`~probes.bench.results.CollectiveSweep` of typed rows for a sweep; the
    workers' JSON for the others."""
    stopped: BenchError | None = None
    """Why the run ended early; None when it finished."""


class BenchInterrupted(BenchError):
    """The run was stopped by Ctrl-C or SIGTERM; the workers have been ended."""


@dataclass
class WorkerGroup:
    """The worker processes of one run and the private directory they share."""

    job_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers (each is also its process group id)."""
        return [process.pid for process in self.processes]

    def terminate(self, grace_s: float | None = None) -> None:
        """SIGTERM every worker's process group, wait up to `grace_s` (TERM_GRACE_S), then SIGKILL what is left."""
        _signal_groups(self.processes, signal.SIGTERM)
        deadline = time.monotonic() + (TERM_GRACE_S if grace_s is None else grace_s)
        while time.monotonic() < deadline and any(p.poll() is None for p in self.processes):
            time.sleep(POLL_S)
        _signal_groups(self.processes, signal.SIGKILL)
        kill_deadline = time.monotonic() + KILL_WAIT_S
        for process in self.processes:
            with suppress(subprocess.TimeoutExpired):  # a process stuck in the driver cannot be waited for
                process.wait(timeout=max(0.0, kill_deadline - time.monotonic()))


def _signal_groups(processes: list[subprocess.Popen[bytes]], signum: int) -> None:
    """Signal the process group of every worker not yet reaped (a reaped one's id may belong to another process now)."""
    for process in processes:
        if process.poll() is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signum)


@contextmanager
def _signal_handlers(handlers: dict[int, Any]) -> Iterator[None]:
    """Install `handlers` (signal number -> handler) for the block, then restore the previous ones.
    Only the main thread can; elsewhere the block runs unchanged (signals never reach it there)."""
    try:
        previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise BenchInterrupted("terminated")


def _sigterm_raises() -> AbstractContextManager[None]:
    """While running, turn SIGTERM into BenchInterrupted, so cleanup runs."""
    return _signal_handlers({signal.SIGTERM: _raise_interrupted})


def _signals_held() -> AbstractContextManager[None]:
    """Ignore SIGINT and SIGTERM for the block (a second Ctrl-C must not cut a cleanup short)."""
    return _signal_handlers({signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN})


class Interruption(threading.Event):
    """A cancel event set by SIGINT or SIGTERM (see :func:`signals_cancel`); `reason` names the signal."""

    reason = "interrupted"

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Signal handler: remember the signal and ask the run to end."""
        self.reason = "interrupted" if signum == signal.SIGINT else "terminated"
        self.set()


def signals_cancel(interruption: Interruption) -> AbstractContextManager[None]:
    """For the block, SIGINT and SIGTERM set `interruption` instead of raising.

    A run given it as `cancel` then ends through its cancel path, keeping what the workers
    measured; once the run is over, a signal can no longer cut the reporting of its results short
    (the caller looks at the event when it has reported, and exits as interrupted then).
    """
    return _signal_handlers({signal.SIGINT: interruption.on_signal, signal.SIGTERM: interruption.on_signal})


def worker_env(rank: int, world_size: int, local_rank: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one spawned worker: rank variables and loopback-only sockets (the worker runs as a
    module of the installed package)."""
    env = dict(os.environ)
    env.update({RANK_ENV: str(rank), WORLD_ENV: str(world_size), LOCAL_RANK_ENV: str(local_rank)})
    env["GLOO_SOCKET_IFNAME"] = "lo"  # always: local workers never talk over a real network,
    env["NCCL_SOCKET_IFNAME"] = "lo"  # whatever the cluster's environment says for its jobs
    env[PARENT_ENV] = str(os.getpid())
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env.update(extra or {})
    return env


def start_workers(kind: str, spec: dict[str, Any], nproc: int, timeout_s: float,
                  extra_env: dict[str, str] | None = None) -> WorkerGroup:
    """Write the job to a fresh private directory and start `nproc` workers, each in its own session."""
    remove_stale_job_dirs()
    job_dir = Path(tempfile.mkdtemp(prefix=JOB_DIR_PREFIX))
    (job_dir / JOB_FILE).write_text(json.dumps({"kind": kind, "spec": spec, "timeout_s": timeout_s,
                                                "spawner_pid": os.getpid()}))
    group = WorkerGroup(job_dir)
    try:
        for rank in range(nproc):
            with open(job_dir / f"stderr-{rank}.txt", "wb") as stderr:
                group.processes.append(subprocess.Popen(
                    [sys.executable, "-m", "linkscope.probes.bench.worker", "--job", str(job_dir)],
                    env=worker_env(rank, nproc, rank, extra_env), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True, cwd=job_dir,
                ))
    except BaseException:
        group.terminate()
        shutil.rmtree(job_dir, ignore_errors=True)
        raise
    return group


def remove_stale_job_dirs() -> None:
    """Remove this user's job directories whose spawner is gone (killed with SIGKILL, it could not clean up)."""
    for path in Path(tempfile.gettempdir()).glob(JOB_DIR_PREFIX + "*"):
        try:
            if path.stat().st_uid != os.getuid():
                continue
            spawner = int(json.loads((path / JOB_FILE).read_text())["spawner_pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if spawner != os.getpid() and not psutil.pid_exists(spawner):
            shutil.rmtree(path, ignore_errors=True)


def _failure_line(group: WorkerGroup) -> str:
    """The earliest worker error line (the cause; the others usually lost their peer), else the
    last stderr line of a crashed worker."""
    written = [path for path in (error_file(group.job_dir, rank) for rank in range(len(group.processes))) if path.exists()]
    if written:
        return min(written, key=lambda path: path.stat().st_mtime_ns).read_text().strip()
    for rank, process in enumerate(group.processes):
        if process.returncode not in (0, None):
            lines = (group.job_dir / f"stderr-{rank}.txt").read_text(errors="replace").strip().splitlines()
            last = lines[-1] if lines else "no output"
            return f"rank {rank} exited with status {process.returncode}: {last}"
    return "a worker failed"


def _errors_written(group: WorkerGroup) -> bool:
    """Whether a rank has written its failure line (it may still hang on its way out)."""
    return any(error_file(group.job_dir, rank).exists() for rank in range(len(group.processes)))


def _progress_lines(job_dir: Path) -> int:
    try:
        with open(job_dir / PROGRESS_FILE, "rb") as handle:
            return handle.read().count(b"\n")
    except FileNotFoundError:
        return 0


def run_workers(kind: str, spec: dict[str, Any], nproc: int, timeout_s: float,
                on_progress: Callable[[int], None] | None = None, extra_env: dict[str, str] | None = None,
                on_start: Callable[[WorkerGroup], None] | None = None,
                cancel: threading.Event | None = None) -> dict[str, Any]:
    """Run a job on `nproc` workers and return rank 0's result; BenchError on failure or timeout.

    Whatever happens (success, a failed rank, the deadline, Ctrl-C, SIGTERM, `cancel` set from
    another thread), every worker's process group is ended and the private directory removed
    before this returns or raises.
    """
    if cancel is not None and cancel.is_set():
        raise BenchInterrupted(getattr(cancel, "reason", "cancelled"))
    with _sigterm_raises():
        group = start_workers(kind, spec, nproc, timeout_s, extra_env)
        failure: BenchError | None = None
        try:
            if on_start is not None:
                on_start(group)
            return _wait(group, timeout_s, on_progress, cancel)
        except KeyboardInterrupt:
            failure = BenchInterrupted("interrupted")
        except BenchError as exc:
            failure = exc
        finally:
            with _signals_held():  # a second Ctrl-C must not cut the cleanup short
                try:
                    group.terminate()
                    if failure is not None:
                        failure.kept = _kept(group)
                finally:
                    shutil.rmtree(group.job_dir, ignore_errors=True)
        assert failure is not None  # _wait returned otherwise
        raise failure


def _kept(group: WorkerGroup) -> list[tuple[str, Any]]:
    """What the ranks appended as they measured (a line cut by the kill is dropped)."""
    kept = []
    for rank in range(len(group.processes)):
        try:
            lines = kept_file(group.job_dir, rank).read_text().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            with suppress(ValueError):
                kind, value = json.loads(line)
                kept.append((kind, value))
    return kept


def _wait(group: WorkerGroup, timeout_s: float, on_progress: Callable[[int], None] | None,
          cancel: threading.Event | None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    seen = 0
    while True:
        codes = [process.poll() for process in group.processes]
        if on_progress is not None:
            done = _progress_lines(group.job_dir)
            if done != seen:
                seen = done
                on_progress(done)
        if any(code not in (0, None) for code in codes) or _errors_written(group):
            raise BenchError(_failure_line(group))
        if all(code == 0 for code in codes):
            break
        if cancel is not None and cancel.is_set():
            raise BenchInterrupted(getattr(cancel, "reason", "cancelled"))
        if time.monotonic() > deadline:
            stuck = [rank for rank, code in enumerate(codes) if code is None]
            raise BenchError(f"deadline of {timeout_s:g} s passed; ended the workers (ranks still running: "
                             f"{', '.join(map(str, stuck))})")
        time.sleep(POLL_S)
    result_path = group.job_dir / RESULT_FILE
    if not result_path.exists():
        raise BenchError("the workers finished without writing a result")
    data: dict[str, Any] = json.loads(result_path.read_text())
    return data
