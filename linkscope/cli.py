"""The `linkscope` command: parse arguments, dispatch to a subcommand module, map errors to exit codes.

Exit status: 0 success, 1 a check found something at or above `--fail-on`, 2 bad input or usage,
130 interrupted. Bad input is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import NoReturn

from linkscope import __version__
from linkscope.options import FINDINGS_EXIT_HELP, PLAIN_EXIT_HELP, ExitStatus, piped_columns
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.text import say

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
    "nccl-graph",
    "export",
    "collect",
    "merge",
    "help",
)
"""Subcommand names, in the order `--help` lists them; module `linkscope.commands.<name>_cmd` (`-` read as `_`)."""

_NEGATIVE_VALUE = re.compile(r"^-[0-9.]")
"""An argument that starts like a negative number (`-1G`, `-1:300`, `-.5`): a value, never an option."""


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions and epilogs to the terminal, paragraph by paragraph; a line that starts with
    spaces (an example command) is kept whole, so a command is never broken mid-flag."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=min(_terminal_columns(), 100) - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for paragraph in re.split(r"\n\s*\n", text.strip("\n")):
            lines = paragraph.split("\n")
            if any(line.startswith(" ") for line in lines):
                out.append("\n".join(indent + line for line in lines))
                continue
            flowing: list[str] = []
            for line in lines:
                # a line ending in a colon heads what follows (e.g. "examples:"); keep it on its own line
                flowing.append(line)
                if line.endswith(":"):
                    out.append(_wrap(" ".join(flowing), width, indent))
                    flowing = []
            if flowing:
                out.append(_wrap(" ".join(flowing), width, indent))
        return "\n\n".join(part for part in out if part)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap  # help only: no other run pays its import

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _terminal_columns() -> int:
    """What `shutil.get_terminal_size().columns` says (`COLUMNS`, else the terminal on stdout, else 80), without
    importing shutil and the compression modules behind it: argparse builds a formatter for every option it
    adds, so every run would pay for that import (about 8 M instructions)."""
    columns = piped_columns()
    if columns is not None:
        return columns
    stdout = sys.__stdout__
    try:
        return (os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0) or 80
    except (ValueError, OSError):  # not a terminal, or closed
        return 80


def _wrap(text: str, width: int, indent: str) -> str:
    import textwrap

    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit status 2, whose help wraps to the
    terminal, and which takes `-1G` after an option as that option's value (to reject it for what it is)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["formatter_class"] = _HelpFormatter
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("linkscope").strip()
        raise InputError(f"{command}: {message}" if command else message)

    def _parse_optional(self, arg_string: str) -> tuple[object, ...] | None:  # type: ignore[override]
        if _NEGATIVE_VALUE.match(arg_string):
            return None
        return super()._parse_optional(arg_string)


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"linkscope.commands.{name.replace('-', '_')}_cmd")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with subcommand `command` registered, or every subcommand when `command` is
    None or not one of them: a command run imports its own module only, so start-up stays short."""
    parser = _Parser(
        prog="linkscope",
        description=(
            "See how the GPUs, CPUs and NICs of a box are wired, measure the links, and check a "
            "training job's rank layout against them. With no command, opens the app on this machine "
            "(or on a built-in sample when there is no GPU); `linkscope SOURCE` opens the app on SOURCE."
        ),
        epilog="SOURCE (for show, check, plan, open, doctor, diff, export): a snapshot JSON file, an `nvidia-smi topo -m` "
        "text file, an NCCL topology XML file (NCCL_TOPO_DUMP_FILE or NCCL_TOPO_FILE), "
        "`-` for stdin, `sample:NAME` (see `linkscope samples`), or nothing for this machine.",
    )
    parser.add_argument("--version", action="version", version=f"linkscope {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (command,) if command in COMMAND_MODULES else COMMAND_MODULES:
        _command_module(name).register(subparsers)
    _state_exit_status(parser)
    return parser


def _state_exit_status(parser: argparse.ArgumentParser) -> None:
    """End the help of every command whose epilog does not state its exit status with the shared line: the
    `--fail-on` one where the command has that flag, the plain one elsewhere."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for command in action.choices.values():
            if "exit status:" not in (command.epilog or ""):
                judges = any("--fail-on" in each.option_strings for each in command._actions)
                line = FINDINGS_EXIT_HELP if judges else PLAIN_EXIT_HELP
                command.epilog = f"{command.epilog}\n\n{line}" if command.epilog else line
            _state_exit_status(command)


def _unknown_command(word: str) -> InputError | None:
    """The error for a first argument that reads as a mistyped command, not as a SOURCE: a bare word
    (no path separator, dot or `sample:`) that is no file. None when it may be a SOURCE."""
    if os.path.exists(word) or any(mark in word for mark in ("/", ".", ":")) or word == "-":
        return None
    import difflib  # a mistyped command only

    close = difflib.get_close_matches(word, COMMAND_MODULES, n=1)
    hint = f"did you mean {close[0]}?" if close else "`linkscope --help` lists the commands"
    return InputError(f"unknown command {word!r} ({hint}); it is not a file either "
                      "(for a built-in machine use sample:NAME)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run linkscope with `argv` (default: sys.argv[1:]) and return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if hasattr(signal, "SIGXFSZ"):  # past a file-size limit, a write fails (one line) instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    with _terminations_as_interrupts():
        return _run(args_list)


@contextlib.contextmanager
def _terminations_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP end a command as Ctrl-C does (KeyboardInterrupt): a write under way removes its
    temporary file and the command exits 130 in one line, instead of dying where it stood. Previous handlers
    are put back afterwards (the tests run commands in their own process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None))
                if number is not None}
    for number in previous:
        signal.signal(number, _interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _run(args_list: list[str]) -> int:
    try:
        if args_list and args_list[0] not in COMMAND_MODULES and not args_list[0].startswith("-"):
            unknown = _unknown_command(args_list[0])
            if unknown is not None:
                raise unknown
        if not args_list or (args_list[0] not in COMMAND_MODULES and not args_list[0].startswith("-")):
            args_list = ["open", *args_list]
        parser = build_parser(args_list[0])
        args, extra = parser.parse_known_args(args_list)
        if extra:
            raise InputError(f"{args.command}: unrecognized arguments: {' '.join(extra)}")
        status = int(args.run(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not in the interpreter's exit flush
        return status
    except InputError as exc:
        say(f"linkscope: error: {exc}", stderr=True)
        return ExitStatus.BAD_INPUT
    except KeyboardInterrupt:
        say("linkscope: interrupted", stderr=True)
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # the reader (`| head`) has gone: not an error; point stdout at nothing so the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitStatus.OK
