"""`linkscope bench`: measure this machine's links (collectives on NCCL or gloo, GPU peer copies, the overlap
experiment); each subcommand lives in its own module (bench_collectives, bench_p2p, bench_step)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from linkscope.commands.bench_collectives import register_collectives
from linkscope.commands.bench_p2p import register_p2p
from linkscope.commands.bench_step import register_step
from linkscope.options import ExitStatus


def register(subparsers: Any) -> None:
    """Add `bench collectives` and `bench p2p`."""
    parser = subparsers.add_parser(
        "bench",
        help="measure collectives and GPU peer copies on this machine",
        description="Measure this machine: collectives the way nccl-tests does (NCCL on GPUs, gloo on CPUs) and "
        "GPU peer copies the way nvbandwidth does. Workers run in their own process groups under a deadline and "
        "are always cleaned up. Exit status: 0 ok, 1 a result was wrong or a finding (see bench p2p), 2 bad input or the run "
        "could not complete, 130 interrupted.",
        epilog="example:\n  linkscope bench collectives --backend gloo --nproc 2 --max-bytes 1M --json",
    )
    parser.set_defaults(run=lambda args: _usage(parser))
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH")
    register_collectives(sub)
    register_p2p(sub)
    register_step(sub)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return ExitStatus.FAILED

