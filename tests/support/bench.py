"""Helpers for the bench and import tests: run the `linkscope` command line in-process or as a
child process, and list the processes a test left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "real"


def cli_main(argv: Sequence[str]) -> int:
    """Run `linkscope ARGV` in this process and return its exit status."""
    from linkscope.cli import main

    return main(list(argv))


def cli_process(argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `linkscope ARGV` as a child process (stdout and stderr captured)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "linkscope", *argv], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def descendants(pid: int) -> list[int]:
    """Live descendant process ids of `pid` (zombies excluded)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [child.pid for child in children if _alive(child.pid)]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def alive(pids: Sequence[int]) -> list[int]:
    """The pids of `pids` that still run."""
    return [pid for pid in pids if _alive(pid)]

