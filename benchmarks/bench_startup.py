"""Start-up of the commands people run most, whole process: the code before a change (a git revision, default
main, unpacked by benchmarks/baseline.py) and after it (this working tree) in the same run, runs interleaved.

Goals (issue 27): `show sample:dgx-h100 --json` <= 0.25 s, `probe --json` <= 0.5 s, `doctor` on an 8-GPU
snapshot with measurements and a 60-reading recording (1.5 MB) <= 0.3 s, as the median CPU time of a whole
process (wall time beside it). `python -c pass` is the floor under every row. The ratio column (after / before,
CPU time) is what carries from one machine to another; a busy machine stretches every wall time alike. Exit
status 1 when a goal is missed or a command's output differs between before and after.

Both before and after run as `pip install .` leaves them (`--as installed`, the default): the package in its
installed shape, in a fresh virtual environment that reaches this interpreter's dependencies but runs none of
its `.pth` start-up hooks. An editable install's import finder, and whatever other hooks a development
environment carries, cost every process start (about 45 ms on the development machine) and are no part of
linkscope; `--as dev` measures in this interpreter as it is, with them.

    python benchmarks/bench_startup.py [--runs 7] [--baseline main] [--as installed|dev]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from baseline import PACKAGE_DIRS, env_for, package_tree, revision_name  # noqa: E402
from bench_doctor import doctor_snapshot  # noqa: E402

from linkscope.topo.model.codec import snapshot_to_json  # noqa: E402


def bytecode_env(cache: str) -> dict[str, str]:
    """This environment with bytecode cached in `cache`, as after `pip install` (which compiles every module):
    with PYTHONDONTWRITEBYTECODE set, every run would compile the whole package from source again."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def installed_python(folder: Path) -> str:
    """A fresh virtual environment's interpreter under `folder` that reaches this interpreter's site-packages
    (for the dependencies) as plain paths, so none of their `.pth` hooks run, as none run after `pip install .`
    into a fresh environment."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    dependency_dirs = [path for path in sys.path if path.endswith("site-packages")]
    site_packages = next(folder.glob("lib/python*/site-packages"))
    (site_packages / "dependencies.pth").write_text("\n".join(dependency_dirs) + "\n")
    return str(folder / "bin" / "python")


def working_tree_package(folder: Path) -> Path:
    """This working tree's package in installed shape under `folder` (as :func:`baseline.package_tree` writes
    a revision's); returns `folder`."""
    for top, target in PACKAGE_DIRS.items():
        shutil.copytree(REPO / top, folder / target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True)
    return folder


def seconds(command: list[str], runs: int, env: dict[str, str], cwd: Path) -> tuple[list[float], list[float], bytes]:
    """Wall and CPU (user + system) seconds of each of `runs` runs of `command` after one warm-up, and its stdout."""
    walls, cpus = [], []
    output = b""
    for run in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, cwd=cwd, check=False, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command[-4:])} failed: {result.stderr.decode()[-300:]}")
        output = result.stdout
        if run:
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return walls, cpus, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", default="main", help="git revision measured as `before` (default main)")
    parser.add_argument("--as", dest="environment", choices=("installed", "dev"), default="installed",
                        help="installed (default): both in installed shape in a fresh environment without the "
                             "development one's start-up hooks; dev: this interpreter as it is, after = the "
                             "editable working tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="linkscope-bench-startup-") as tmp:
        env = bytecode_env(os.path.join(tmp, "pycache"))
        tree = package_tree(args.baseline, Path(tmp) / "before")
        before_env = {**env_for(tree), "PYTHONPYCACHEPREFIX": env["PYTHONPYCACHEPREFIX"]}
        before_env.pop("PYTHONDONTWRITEBYTECODE", None)
        python, after_cwd = sys.executable, REPO
        if args.environment == "installed":
            python = installed_python(Path(tmp) / "venv")
            after_cwd = working_tree_package(Path(tmp) / "after")
            env = {**env_for(after_cwd), "PYTHONPYCACHEPREFIX": env["PYTHONPYCACHEPREFIX"]}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        floor_walls, floor_cpus, _ = seconds([python, "-c", "pass"], args.runs, env, after_cwd)
        box = os.path.join(tmp, "box.json")
        Path(box).write_text(snapshot_to_json(doctor_snapshot()))
        cases: list[tuple[list[str], float, bool]] = [  # command, goal, whether its output is compared
            (["show", "sample:dgx-h100", "--json"], 0.25, True),
            (["show", "sample:dgx-h100"], 0.25, True),
            (["probe", "--json"], 0.5, False),  # it carries the time of the probe
            (["doctor", box, "--json"], 0.3, True),
            (["doctor", box], 0.3, True),
        ]
        print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average "
              f"{os.getloadavg()[0]:.1f}; median of {args.runs} runs; bytecode cached as after pip install; "
              f"environment: {args.environment}; "
              f"before = {revision_name(args.baseline)}, after = this working tree")
        print(f"{'command':34} {'before wall':>11} {'after wall':>10} {'before cpu':>10} {'after cpu':>9} "
              f"{'after/before':>12} {'goal':>6}  result")
        print(f"{'python -c pass (the floor)':34} {'':>11} {statistics.median(floor_walls):10.3f} {'':>10} "
              f"{statistics.median(floor_cpus):9.3f}")
        missed = False
        for argv, goal_s, compared in cases:
            command = [python, "-m", "linkscope", *argv]
            before_walls, before_cpus, after_walls, after_cpus = [], [], [], []
            same = True
            for _ in range(args.runs):  # one run of each in turn, so a change of load touches both alike
                walls, cpus, before_out = seconds(command, 1, before_env, tree)
                before_walls += walls
                before_cpus += cpus
                walls, cpus, after_out = seconds(command, 1, env, after_cwd)
                after_walls += walls
                after_cpus += cpus
                same &= not compared or before_out.replace(tmp.encode(), b"") == after_out.replace(tmp.encode(), b"")
            before_cpu, after_cpu = statistics.median(before_cpus), statistics.median(after_cpus)
            ok = after_cpu <= goal_s  # CPU seconds: a busy machine stretches wall time, far less the CPU time used
            missed |= not ok or not same
            label = " ".join("BOX" if word == box else word for word in argv)
            print(f"{label:34} {statistics.median(before_walls):11.3f} {statistics.median(after_walls):10.3f} "
                  f"{before_cpu:10.3f} {after_cpu:9.3f} {after_cpu / before_cpu:12.2f} {goal_s:6.2f}  "
                  f"{'ok' if ok else 'MISSED'}{'' if same else ', OUTPUT DIFFERS'}{'' if compared else ' (output not compared)'}")
        print("BOX: the 8-GPU doctor snapshot of bench_doctor.py; each command's output but probe's compared between "
              "before and after")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
