"""`linkscope bench collectives`: a collective sweep on local workers (NCCL on GPUs, gloo on CPUs), and `--reuse`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from linkscope.commands.bench_run import (
    add_run_options,
    check_output_options,
    expected_on,
    measure_then_report,
    run_guarded,
    write_output,
)
from linkscope.options import ExitStatus, findings_status, verdicts_status
from linkscope.render.bench_tables import print_collectives, print_reuse
from linkscope.render.progress import progress_bar
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.common.text import say

if TYPE_CHECKING:
    from linkscope.probes.bench.results import CollectiveSweep
    from linkscope.probes.bench.runner import BenchOutcome
    from linkscope.topo.cost.expect import Expected
    from linkscope.topo.model.findings import Severity


def register_collectives(sub: Any) -> None:
    from linkscope.probes.bench.spec import add_collective_arguments

    parser = sub.add_parser(
        "collectives",
        help="collective sweep (all_reduce, all_gather, ...) with algbw/busbw like nccl-tests",
        description="Run collectives over a size sweep and report time, algbw and busbw (nccl-tests' factors) and "
        "a correctness count per row. With --layout the op runs in every group of the layout at once.\n\n"
        "For several nodes run the same worker under torchrun:\n"
        "  torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\\n"
        "    -m linkscope.probes.bench.worker collectives [options] -o FILE",
        epilog="example:\n  linkscope bench collectives --backend gloo --nproc 4 --ops all_reduce,all_gather "
        "--max-bytes 4M --layout tp=2,dp=2 --json\n\n"
        "exit status: 0 every result right and nothing at or above --fail-on, 1 a wrong result (an error), a "
        "straggler group on GPUs (a warning) or a row's verdict at or above --fail-on (far below: error; slow, "
        "faster than model: warning; a row not judged raises nothing, and `judged` in --json counts them), 2 bad "
        "input or a failed run, 130 interrupted",
    )
    add_collective_arguments(parser)
    parser.add_argument("--nproc", type=whole_number(0, MAX_GPUS_PER_HOST), default=None, metavar="N",
                        help="local worker processes (default: all GPUs; 2 on CPU)")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl with CUDA, gloo otherwise")
    parser.add_argument("--reuse", action="store_true",
                        help="instead of the sweep: all_reduce on one reused process group against a group created and "
                        "destroyed for every call, per size (what re-creating communicators costs)")
    add_run_options(parser)
    parser.set_defaults(run=run_collectives)


def run_collectives(args: argparse.Namespace) -> int:
    """Parse, check the GPUs, spawn the workers, render rows (and write -o)."""
    from linkscope.probes.bench.preflight import cuda_device_count, gpu_preflight
    from linkscope.probes.bench.spec import check_sweep_flags, layout_world_size, spec_from_args

    check_sweep_flags(args)  # a wrong flag is said before torch is imported (seconds)
    if args.nproc is not None and args.nproc < 1:
        raise InputError(f"--nproc: must be at least 1, got {args.nproc}")
    check_output_options(args)
    gpus = cuda_device_count()
    backend = args.backend or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise InputError("bench collectives --backend nccl: no CUDA GPU is present (use --backend gloo)")
    nproc = args.nproc
    if nproc is None:
        nproc = layout_world_size(args.layout) if args.layout else (gpus if backend == "nccl" else 2)
    if nproc < 1:
        raise InputError(f"--nproc: must be at least 1, got {nproc}")
    if backend == "nccl" and nproc > gpus:
        raise InputError(f"--nproc {nproc}: only {gpus} CUDA GPU(s) visible (one process per GPU with nccl)")
    spec = spec_from_args(args, backend, nproc)
    if args.reuse:
        return run_guarded(lambda cancel: run_reuse(args, spec, cancel))

    def body(cancel: Any) -> int:
        from linkscope.probes.bench.api import run_collectives as measure

        preflight = gpu_preflight(nproc, args.force) if backend == "nccl" else []

        def measured() -> BenchOutcome[Any]:
            with progress_bar(spec.steps, f"{backend} x{nproc}", not args.json) as update:
                return measure(spec, args.timeout, lambda done, _total: update(done), cancel=cancel,
                               notes=tuple(preflight))

        return measure_then_report(measured, lambda measurements, result: report_collectives(args, measurements, result))

    return run_guarded(body)


def report_collectives(args: argparse.Namespace, measurements: Any, sweep: CollectiveSweep) -> int:
    from dataclasses import replace

    from linkscope.probes.bench.results import stragglers
    from linkscope.topo.cost.expect import judged_counts, placement_lines, row_expectations

    notes = list(sweep.notes)
    slow_groups = stragglers(sweep.rows)
    snapshot = None
    if measurements.collectives and measurements.collectives[0].backend == "nccl":
        snapshot = expected_on(args, notes)
    else:
        notes.append("gloo runs on CPU processes: no GPU link to expect a figure from")
    if sweep.rows and all(row.nranks == 1 for row in sweep.rows):
        notes.append("one rank: nothing crosses a link, so no figure is judged; the times are the calls' own cost "
                     "(an in-place all_reduce does nothing; out-of-place ops copy locally), and busbw follows "
                     "nccl-tests' factors (broadcast and reduce keep algbw)")
    expected: list[Expected | None] = [None] * len(sweep.rows)
    if snapshot is not None:
        if args.expect is None and measurements.identity is not None:
            names = " / ".join(sorted({gpu.name for gpu in snapshot.host.gpus if gpu.name})) or None
            measurements = replace(measurements, identity=replace(measurements.identity, gpu_model=names))
        expected = list(row_expectations(measurements, snapshot).collectives)
    rows = [{**row.to_json(), "expected_busbw_gbps": each.expected_gbps if each else None,
             "ratio": each.ratio if each else None, "verdict": each.verdict if each else None,
             "link": each.link if each else None, "limited_by": each.limited_by if each else None,
             "path": list(each.path) if each else None}
            for row, each in zip(sweep.rows, expected, strict=True)]
    if args.json:
        say(json_text({"rows": rows, "group_setup_ms": dict(sweep.setup_ms),
                         "stragglers": [slow.to_json() for slow in slow_groups], "notes": notes,
                         "judged": judged_counts(expected),
                         "placement": placement_lines([each for each in expected if each is not None])}), block=True)
    else:
        print_collectives(sweep.rows, sweep.setup_ms, slow_groups, notes, expected,
                          snapshot.source if snapshot is not None else None)
    write_output(args, measurements)
    wrong = sum(row.wrong or 0 for row in sweep.rows)
    if wrong:
        say(f"linkscope: {wrong} wrong element(s) in the correctness pass", stderr=True)
    # a straggler on GPUs is a finding (a slower link); gloo's CPU processes straggle by contention alone
    on_gpus = bool(measurements.collectives) and measurements.collectives[0].backend == "nccl"
    if slow_groups and on_gpus:
        say(f"linkscope: {len(slow_groups)} straggler group(s): a group well below its fastest peer", stderr=True)
    found: list[Severity] = []
    if wrong:
        found.append("error")
    if slow_groups and on_gpus:
        found.append("warning")
    return max(findings_status(found, args.fail_on),
               verdicts_status((each.verdict for each in expected if each is not None), args.fail_on))


def run_reuse(args: argparse.Namespace, spec: Any, cancel: Any) -> int:
    """Run the communicator-reuse comparison and print it (table or JSON)."""
    from linkscope.probes.bench.api import run_reuse_experiment
    from linkscope.probes.bench.reuse import summarise_reuse

    if args.layout or args.output:
        raise InputError("--reuse compares group set-up on the whole world: drop --layout and -o")
    with progress_bar(len(spec.sizes_bytes), f"reuse {spec.backend} x{spec.world_size}", not args.json) as update:
        outcome = run_reuse_experiment(spec, args.timeout, lambda done, _total: update(done), cancel)
    rows = summarise_reuse(outcome.result["rows"])
    if args.json:
        say(json_text({"reuse": rows, "backend": spec.backend, "nproc": spec.world_size}), block=True)
        return ExitStatus.OK
    print_reuse(rows, spec.backend, spec.world_size)
    return ExitStatus.OK

