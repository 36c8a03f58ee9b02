"""Helpers for the bench and import tests: run the `linkscope` command line in-process or as a
child process, and list the processes a test left behind."""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
from collections.abc import Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "real"


def _partial_main(argv: Sequence[str]) -> int:
    """`linkscope` with only the bench and import commands, for a tree where other commands are missing."""
    from linkscope.commands import bench_cmd, import_cmd
    from topo.errors import InputError

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # type: ignore[no-untyped-def]
            raise InputError(f"{self.prog}: {message}")

    parser = Parser(prog="linkscope")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    bench_cmd.register(sub)
    import_cmd.register(sub)
    try:
        args = parser.parse_args(list(argv))
        return int(args.run(args))
    except InputError as exc:
        print(f"linkscope: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("linkscope: interrupted", file=sys.stderr)
        return 130


def cli_main(argv: Sequence[str]) -> int:
    """Run `linkscope ARGV` in this process and return its exit status (the real CLI when it builds)."""
    try:
        from linkscope.cli import build_parser, main

        build_parser()
    except ModuleNotFoundError:
        return _partial_main(argv)
    return main(list(argv))


def cli_process(argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `linkscope ARGV` as a child process (stdout and stderr captured)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, str(pathlib.Path(__file__)), *argv], cwd=ROOT, env=full_env,
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


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(cli_main(sys.argv[1:]))
