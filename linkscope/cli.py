"""The `linkscope` command: parse arguments, dispatch to a subcommand module, map errors to exit codes.

Exit status: 0 success, 1 a check found something at or above `--fail-on`, 2 bad input or usage,
130 interrupted. Bad input is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from linkscope import __version__
from topo.errors import InputError
from topo.text import printable

COMMAND_MODULES: tuple[str, ...] = (
    "open",
    "show",
    "samples",
    "probe",
    "check",
    "estimate",
    "explain",
    "plan",
    "bench",
    "import",
    "trace",
    "doctor",
    "diff",
    "record",
    "nccl-log",
    "collect",
    "merge",
)
"""Subcommand names, in the order `--help` lists them; module `linkscope.commands.<name>_cmd` (`-` read as `_`)."""

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog}: {message}")


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"linkscope.commands.{name.replace('-', '_')}_cmd")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand registered."""
    parser = _Parser(
        prog="linkscope",
        description=(
            "See how the GPUs, CPUs and NICs of a box are wired, measure the links, and check a "
            "training job's rank layout against them. With no command, opens the app on this machine "
            "(or on a built-in sample when there is no GPU); `linkscope SOURCE` opens the app on SOURCE."
        ),
        epilog="SOURCE (for show, check, plan, open, doctor, diff): a snapshot JSON file, an `nvidia-smi topo -m` text file, "
        "`-` for stdin, `sample:NAME` (see `linkscope samples`), or nothing for this machine.",
    )
    parser.add_argument("--version", action="version", version=f"linkscope {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        _command_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run linkscope with `argv` (default: sys.argv[1:]) and return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if hasattr(signal, "SIGXFSZ"):  # past a file-size limit, a write fails (one line) instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        parser = build_parser()
        if not args_list or (args_list[0] not in COMMAND_MODULES and not args_list[0].startswith("-")):
            args_list = ["open", *args_list]
        args = parser.parse_args(args_list)
        return int(args.run(args))
    except InputError as exc:
        print(f"linkscope: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("linkscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
