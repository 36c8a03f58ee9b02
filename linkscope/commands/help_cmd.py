"""`linkscope help [COMMAND ...]`: the help of linkscope or of one of its commands."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `help` subcommand."""
    parser = subparsers.add_parser(
        "help",
        help="show the help of linkscope or of a command (`linkscope help bench p2p`)",
        description="Show the help of linkscope, or of COMMAND (the same text as `linkscope COMMAND --help`).",
    )
    parser.add_argument("topic", nargs="*", metavar="COMMAND", help="a command, e.g. `check` or `bench p2p`")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the help asked for; an unknown command is bad input (exit 2)."""
    from linkscope.cli import build_parser

    try:
        build_parser().parse_args([*args.topic, "--help"])
    except SystemExit as done:  # argparse ends a --help by exiting 0
        return int(done.code or 0)
    return 0
