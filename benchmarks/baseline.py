"""The code before a change, importable beside the code after it: so a benchmark measures both in one run.

`package_tree(REV, folder)` writes the package as it installs (linkscope/ with topo/, probes/ and tui/ inside, as
pyproject's package-dir maps them) from git revision REV into `folder`; a worker process started with
`PYTHONPATH=folder` imports that revision's `linkscope` (the editable install's finder comes after sys.path).
Nothing in the working tree changes.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"linkscope": "linkscope", "topo": "linkscope/topo", "probes": "linkscope/probes", "tui": "linkscope/tui"}
"""Top-level folder of the repository -> where it lands in the installed package."""


def package_tree(revision: str, folder: Path) -> Path:
    """`revision`'s package in installed shape under `folder`; returns `folder` (put it first on PYTHONPATH)."""
    archive = subprocess.run(["git", "archive", "--format=tar", revision, *PACKAGE_DIRS], cwd=REPO,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/")
            if top not in PACKAGE_DIRS or not member.isfile():
                continue
            target = folder / PACKAGE_DIRS[top] / rest
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            assert extracted is not None
            target.write_bytes(extracted.read())
    return folder


def revision_name(revision: str) -> str:
    """`revision` with its short commit id, for the table's header."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    return f"{revision} ({commit})" if commit != revision else commit


def env_for(tree: Path | None) -> dict[str, str]:
    """The environment of a worker: `tree`'s package first on the path, or the working tree's when None."""
    env = dict(os.environ)
    paths = [str(tree)] if tree is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO / "benchmarks"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def worker_output(script: Path, args: list[str], tree: Path | None) -> str:
    """stdout of `python SCRIPT ARGS` run against `tree` (None: the working tree)."""
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env_for(tree),
                            cwd=tree or REPO, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{script.name} {' '.join(args)} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


def child_run(command: list[str], env: dict[str, str] | None, cwd: str | None) -> tuple[float, float, float, int, bytes]:
    """Wall s, CPU s, peak RSS MiB, exit status and stdout of one child process (its own rusage, via wait4)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.perf_counter() - start
        out.seek(0)
        return wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, process.returncode, out.read()
