"""`linkscope samples [--json]`: list the built-in sample machines usable as `sample:NAME`."""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import add_json_flag
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.samples import sample_description, sample_names


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `samples` subcommand."""
    parser = subparsers.add_parser(
        "samples",
        help="list the built-in sample machines (use them as SOURCE sample:NAME)",
        description=(
            "List the built-in sample machines with a one-line description each. Every sample is\n"
            "a complete snapshot of a real machine type, built from public documentation and real\n"
            "`nvidia-smi topo -m` outputs, so every command can be tried without a GPU."
        ),
        epilog="examples:\n  linkscope samples\n  linkscope samples --json\n  linkscope show sample:dgx-a100",
    )
    add_json_flag(parser, "print a JSON list of {name, source, description}")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the sample names and descriptions."""
    rows = [{"name": name, "source": f"sample:{name}", "description": sample_description(name)} for name in sample_names()]
    if args.json:
        say(json_text(rows), block=True)
        return 0
    width = max(len(row["source"]) for row in rows)
    for row in rows:
        say(f"{row['source'].ljust(width)}  {row['description']}")
    return 0
