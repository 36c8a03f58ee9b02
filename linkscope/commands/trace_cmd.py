"""`linkscope trace TRACE...`: what a slow job's profiler traces say about its communication."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from linkscope.options import add_fail_on_flag, add_json_flag, findings_status
from linkscope.probes.cpus import idle_cpus
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_HOSTS, MAX_JOBS, MAX_STEP_ROWS
from linkscope.topo.common.numbers import decimal_number, whole_number
from linkscope.topo.common.text import say
from linkscope.topo.trace.files import place_traces, trace_paths
from linkscope.topo.trace.pool import (
    PARALLEL_MIN_BYTES,
    PARALLEL_MIN_FILE_BYTES,
    PARALLEL_MIN_IDLE_CPUS,
    default_jobs,
    read_traces,
)
from linkscope.topo.trace.report import EXPOSED_SHARE, analyse

SEVERITIES = ("info", "warning", "error")


def register(subparsers: Any) -> None:
    """Add the `trace` subcommand."""
    parser = subparsers.add_parser(
        "trace",
        help="read PyTorch profiler traces: exposed communication per step, slow collectives, the straggler",
        description=(
            "Read Chrome-trace JSON files as torch.profiler writes them (export_chrome_trace or "
            "tensorboard_trace_handler; .json or .json.gz; one per rank, or a directory of them). For each "
            "collective call: op, bytes, process group, duration on the GPU (the NCCL kernel) or the CPU (gloo), "
            "algbw and busbw as nccl-tests computes them. For each ProfilerStep: step time, compute, communication, "
            "and exposed communication (not overlapped by any computation). With several ranks: the rank that "
            "arrived last at the collectives everyone waited on. With --source: the job's ranks placed once on SOURCE "
            "(from the traces' hosts, --nodes, or assumed; said in one line and as `placement` in JSON), each call "
            "priced on the links its group crosses as `estimate` prices it, and measured against expected."
        ),
        epilog=(
            "examples:\n"
            "  linkscope trace traces/                                  # every rank's trace in a directory\n"
            "  linkscope trace rank0.json.gz rank1.json.gz --json\n"
            "  linkscope trace traces/ --source sample:dgx-h100 --nodes 2\n\n"
            "exit status: 0 no finding at or above --fail-on, 1 there is one, 2 bad input (an unreadable trace)"
        ),
    )
    parser.add_argument("traces", nargs="+", metavar="PATH",
                        help="trace files (.json, .json.gz) or directories of them (where a directory holds torch's "
                             "*.pt.trace.json[.gz] files, only those)")
    parser.add_argument("--source", default=None, metavar="SOURCE",
                        help="the machine the job ran on (snapshot, topo text, sample:NAME), to price each collective")
    parser.add_argument("--nodes", type=whole_number(1, MAX_HOSTS), default=None, metavar="N",
                        help="with --source of one host: how many such nodes the job used (default: the traces' hosts when "
                             "every rank's trace names one, else assumed: one host when the ranks fit, else whole hosts; "
                             "the placement is said in one line)")
    parser.add_argument("--distribution", choices=("block", "cyclic"), default="block",
                        help="how ranks were placed on nodes: torchrun block order or Slurm cyclic (default block)")
    parser.add_argument("--visible-devices", default=None, metavar="LIST", help="CUDA_VISIBLE_DEVICES of the job, e.g. 0,2,1,3")
    parser.add_argument("--exposed-share", type=decimal_number(0, 1), default=EXPOSED_SHARE, metavar="FRACTION",
                        help=f"exposed communication above this share of a step is a finding (default {EXPOSED_SHARE})")
    add_fail_on_flag(parser)
    parser.add_argument("--jobs", type=whole_number(1, 1024), default=None, metavar="N",
                        help="read N traces at once, each in its own process (default: one per idle CPU, at most "
                             f"{MAX_JOBS}, with {PARALLEL_MIN_IDLE_CPUS} idle CPUs or more and traces of "
                             f"{PARALLEL_MIN_FILE_BYTES >> 20} MB a file on average and {PARALLEL_MIN_BYTES >> 20} MB "
                             "in all; else 1)")
    parser.add_argument("--all-steps", action="store_true",
                        help=f"list every step in the text report (default: past {MAX_STEP_ROWS} steps, the first, the "
                             "longest and percentiles; --json always holds every step)")
    add_json_flag(parser, "print one JSON object: traces, collectives, steps, straggler, findings")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Read every trace, analyse them together, print, and say by the exit status whether something is wrong."""
    if not 0 < args.exposed_share < 1:
        raise InputError(f"--exposed-share: {args.exposed_share} is not a fraction between 0 and 1")
    placement_flags = [flag for flag, value in (("--nodes", args.nodes), ("--visible-devices", args.visible_devices),
                                                 ("--distribution", None if args.distribution == "block" else 1))
                       if value is not None]
    if placement_flags and not args.source:
        verb = "places" if len(placement_flags) == 1 else "place"
        raise InputError(f"{'/'.join(placement_flags)} {verb} the ranks on a machine: give it with --source")
    paths = trace_paths(args.traces)
    with _progress(len(paths), args.json) as update:
        jobs = args.jobs if args.jobs is not None else default_jobs(paths, idle_cpus)
        traces = read_traces(paths, jobs, on_read=update)
    placed = None
    machine_gpus: tuple[str, ...] = ()
    if args.source:
        from linkscope.source import open_source
        from linkscope.topo.model.provenance import gpu_names

        snapshot = open_source(args.source)
        placed = place_traces(snapshot, traces, args.nodes, args.distribution, args.visible_devices)
        if placed.placement is None and placement_flags:  # what the user said cannot be: bad usage, not a verdict
            raise InputError(f"{'/'.join(placement_flags)}: the job's {placed.ranks} ranks cannot be placed on "
                             f"{snapshot.source}: {placed.basis}")
        machine_gpus = gpu_names(snapshot)
    report = analyse(traces, placed, args.exposed_share, machine_gpus)
    if args.json:
        from linkscope.topo.common.jsonio import json_text

        say(json_text(report.to_json(), indent=None), block=True)
    else:
        from linkscope.render.trace_view import print_trace_report

        print_trace_report(report, all_steps=args.all_steps)
    return findings_status((finding.severity for finding in report.findings), args.fail_on)


def _progress(total: int, as_json: bool) -> contextlib.AbstractContextManager[Any]:
    """The progress bar of reading the traces; none under --json (nor its modules: that output is for programs)."""
    if as_json:
        return contextlib.nullcontext(lambda done: None)
    from linkscope.render.progress import progress_bar

    return progress_bar(total, "reading traces")


