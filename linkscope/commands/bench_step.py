"""`linkscope bench step`: the overlap experiment (the same model stepped with and without overlap)."""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.options import ExitStatus, add_force_flag, add_json_flag
from linkscope.render.bench_tables import print_step
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST
from linkscope.topo.common.numbers import seconds, whole_number
from linkscope.topo.common.text import say


def register_step(sub: Any) -> None:
    """Add `bench step` to the `bench` subcommands."""
    from linkscope.probes.bench.step_spec import add_step_arguments

    parser = sub.add_parser(
        "step",
        help="what overlapping communication with computation buys: a small model stepped in several modes",
        description=(
            "Train a small model (a stack of linear layers) for a few steps on local workers, in the modes that "
            "show what overlap buys: no-overlap (forward, backward, then an all_reduce of every gradient), ddp "
            "(DistributedDataParallel reduces gradient buckets while backward runs; once per --bucket-cap-mb) and "
            "ddp-no-sync (no communication: the compute-only baseline). Per mode: step time (median and 10-90% "
            "range over steps), compute, communication, exposed communication and the speedup over no-overlap. "
            "gloo on CPUs, NCCL on GPUs. --profile DIR writes each rank's profiler trace per mode for "
            "`linkscope trace`."
        ),
        epilog=(
            "examples:\n"
            "  linkscope bench step --backend gloo --nproc 2 --steps 5\n"
            "  linkscope bench step --modes no-overlap,ddp --bucket-cap-mb 1,25 --profile /tmp/traces --json\n"
            "  linkscope trace /tmp/traces/ddp-25mb"
        ),
    )
    add_step_arguments(parser)
    parser.add_argument("--nproc", type=whole_number(1, MAX_GPUS_PER_HOST), default=None, metavar="N",
                        help="local worker processes (default: all GPUs; 2 on CPU)")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl with CUDA, gloo otherwise")

    parser.add_argument("--timeout", type=seconds(), default=900.0, metavar="SECONDS",
                        help="deadline for the whole run in seconds, above 0 (default 900)")
    add_force_flag(parser, "run on GPUs that have other processes or little free memory")
    add_json_flag(parser, "print JSON (modes, notes) instead of a table")
    parser.set_defaults(run=run_step)


def run_step(args: argparse.Namespace) -> int:
    """Check the options and torch, run the experiment, print the summary."""
    import importlib.util

    from linkscope.probes.bench.preflight import cuda_device_count
    from linkscope.probes.bench.step_spec import step_spec_from_args

    # the flags first (no backend or process count decides them): a wrong one is said before torch is imported
    step_spec_from_args(args, args.backend or "gloo", 2)
    if args.nproc is not None and args.nproc < 2:
        raise InputError(f"--nproc: overlap needs at least 2 processes, got {args.nproc}")
    if importlib.util.find_spec("torch") is None:
        raise InputError("bench step needs torch: pip install 'linkscope[bench]' (or a CPU build: pip install torch)")
    gpus = cuda_device_count()
    backend = args.backend or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise InputError("bench step --backend nccl: no CUDA GPU is present (use --backend gloo)")
    nproc = args.nproc if args.nproc is not None else (gpus if backend == "nccl" else 2)
    if nproc < 2:
        raise InputError(f"--nproc: overlap needs at least 2 processes, got {nproc}")
    if backend == "nccl" and nproc > gpus:
        raise InputError(f"--nproc {nproc}: only {gpus} CUDA GPU(s) visible (one process per GPU with nccl)")
    spec = step_spec_from_args(args, backend, nproc)

    from linkscope.commands.bench_run import measure_then_report, run_guarded
    from linkscope.render.progress import progress_bar

    def body(cancel: Any) -> int:
        from linkscope.probes.bench.api import run_step_experiment
        from linkscope.probes.bench.preflight import gpu_preflight

        notes = gpu_preflight(nproc, args.force) if backend == "nccl" else []

        def measured() -> Any:
            with progress_bar(len(spec.runs), f"step {backend} x{nproc}", not args.json) as update:
                return run_step_experiment(spec, args.timeout, lambda done, _total: update(done), cancel)

        def report(_measurements: Any, result: dict[str, Any]) -> int:
            _report(args, spec, result["runs"], [*notes, *result["notes"]])
            return ExitStatus.OK

        return measure_then_report(measured, report)

    return run_guarded(body)


def _report(args: argparse.Namespace, spec: Any, runs: list[dict[str, Any]], notes: list[str]) -> None:
    from linkscope.probes.bench.step_results import reading_notes, summarise

    summaries = summarise(runs)
    notes = [*notes, *reading_notes(summaries, spec.parameters * 4, bool(spec.profile_dir))]
    if spec.backend == "nccl":
        notes.append("ddp rows on NCCL: exposed communication is step time minus the ddp-no-sync baseline "
                     "(NCCL futures complete before the GPU does); use --profile and linkscope trace for kernel timing")
    if spec.profile_dir:
        notes.append(f"profiler traces per mode under {spec.profile_dir} (linkscope trace DIR/MODE)")
    if args.json:
        from linkscope.topo.common.jsonio import json_text

        say(json_text({"model": {"layers": spec.layers, "width": spec.width, "batch": spec.batch,
                              "parameters": spec.parameters, "gradient_bytes": spec.parameters * 4},
                    "backend": spec.backend, "nproc": spec.world_size,
                    "modes": [summary.to_json() for summary in summaries], "notes": notes}), block=True)
        return
    print_step(spec, summaries, notes)
