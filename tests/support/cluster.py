"""Helpers for the multi-"node" tests: separate launcher processes on loopback, one per node."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import psutil

from support.paths import ROOT


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_env(name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one "node": the package on the path, its own host name, no inherited rank variables."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")
           and not key.startswith("SLURM_")}
    env["PYTHONPATH"] = str(ROOT)
    env["LINKSCOPE_NODE_NAME"] = name
    env.update(extra or {})
    return env


def torchrun_nodes(nodes: Sequence[dict[str, str]], port: int, nproc: int, argv: Sequence[str]) -> list[subprocess.Popen[str]]:
    """Start one torchrun per node (c10d rendezvous on 127.0.0.1:`port`), each with its own environment."""
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    return [subprocess.Popen([*torchrun, "--nnodes", str(len(nodes)), "--nproc-per-node", str(nproc),
                              "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"t{port}",
                              "--max-restarts", "0", *argv],
                             env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
            for env in nodes]


def finish(processes: Sequence[subprocess.Popen[str]], timeout_s: float) -> list[tuple[int, str, str]]:
    """Wait for every process (killing the lot past `timeout_s`); (exit status, stdout, stderr) each."""
    deadline = time.monotonic() + timeout_s
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in processes:
                kill_tree(other.pid)
            out, err = process.communicate()
            results.append((-9, out, err))
            continue
        results.append((process.returncode, out, err))
    return results


def kill_tree(pid: int) -> None:
    """Kill a process started here and everything below it."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for child in [*parent.children(recursive=True), parent]:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def listening(pids: Sequence[int]) -> set[tuple[str, int]]:
    """(address, port) of every listening inet socket of these processes and their children."""
    found: set[tuple[str, int]] = set()
    for pid in pids:
        try:
            tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for process in tree:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                found.update((item.laddr.ip, item.laddr.port) for item in process.net_connections(kind="inet")
                             if item.status == psutil.CONN_LISTEN)
    return found


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:`port` any more: a socket can be bound there (SO_REUSEADDR lets
    the bind pass over closed connections still in TIME_WAIT, never over a listening socket)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def as_text(results: Any) -> str:
    """Every process's output, for an assertion message."""
    return "\n---\n".join(f"rc={rc}\n{out[-2000:]}\n{err[-3000:]}" for rc, out, err in results)
