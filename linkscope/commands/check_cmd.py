"""`linkscope check SOURCE --tp 8 --pp 4 ...`: expand a job's process groups, price them, fail on slow links.

Exit status: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 bad input.
The JSON form (`--json`) is a public contract: `groups` (per dimension, lists of ranks) and
`findings` (each `code`, `severity`, `dim`, `ranks`, `message`, plus `link`, `cost_s`,
`best_cost_s`, `fix`), with `layout`, `placement`, `costs` and `suggestion` alongside, and `calibration`
(what fitting the model to the measurements changed, :mod:`topo.cost.calibration_report`), `judged` (their rows
judged against the model, as `import --expect` counts them) and `measured_placement` (where their ranks were placed)
when measurements were used; measurements of which nothing was judged are a `measurements-not-judged` warning.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from linkscope.files import check_measured_on, load_measurements
from linkscope.job_options import (
    add_cost_params_flag,
    add_layout_arguments,
    add_model_arguments,
    cost_model_from_args,
    model_from_args,
)
from linkscope.options import add_fail_on_flag, add_force_flag, add_json_flag, add_source_argument, asked_rows, findings_status
from linkscope.source import open_gpu_source
from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.text import say
from linkscope.topo.cost.expect import Expected, judged_counts, placement_lines, row_expectations, summary
from linkscope.topo.layout.placement import parse_visible_devices
from linkscope.topo.layout.spec import DEFAULT_ORDER, DIMENSIONS, parse_mesh, parse_mesh_roles


def request_from_args(args: argparse.Namespace, default_slots: int) -> CheckRequest:
    """A CheckRequest from the layout and model flags (and `--rank-map`, when the command has it)."""
    if args.mesh is not None and args.order is not None:
        raise InputError("--mesh and --order are two ways to say the same thing: give one")
    roles = parse_mesh_roles(args.mesh_roles) if getattr(args, "mesh_roles", None) else ()
    sizes = tuple((dim, getattr(args, dim)) for dim in DIMENSIONS if getattr(args, dim) is not None)
    visible = parse_visible_devices(args.visible_devices) if args.visible_devices is not None else None
    rank_map = None
    if getattr(args, "rank_map", None) is not None:
        if args.nodes != 1 or args.distribution != "block" or visible is not None:
            raise InputError("--rank-map places every rank itself: drop --nodes, --distribution and --visible-devices")
        from linkscope.topo.formats.rankmap import read_rank_map
        from linkscope.topo.formats.source import read_text_file

        rank_map = read_rank_map(read_text_file(args.rank_map), args.rank_map, default_slots)
    return CheckRequest(
        sizes=sizes,
        order=args.order or DEFAULT_ORDER,
        mesh=parse_mesh(args.mesh) if args.mesh is not None else None,
        mesh_roles=roles,
        etp=getattr(args, "etp", None),
        vpp=getattr(args, "vpp", 1),
        optimizer_instances=getattr(args, "optimizer_instances", 1),
        nodes=args.nodes,
        distribution=args.distribution,
        visible_devices=visible,
        model=None,
        model_spec=model_from_args(args),
        rank_map=rank_map,
        cost_model=cost_model_from_args(args),
    )



def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `check` subcommand."""
    parser = subparsers.add_parser(
        "check",
        help="check a job's rank layout against the machine: which group crosses which link",
        description=(
            "Expand a training job's process groups exactly as Megatron-LM (order strings; the dense grid "
            "and the expert grid of --etp, --ep and expert-dp) or PyTorch DeviceMesh (any dimension names, "
            "with --mesh-roles) build them, place the ranks as torchrun or Slurm would, price every group's "
            "collectives on the links its best ring crosses (gradients over dp x cp and expert-dp, as "
            "Megatron reduces them), and report what is wrong: TP groups across nodes or over PCIe, expert "
            "groups across nodes, imbalanced groups, far NICs, idle GPUs, layouts Megatron refuses at "
            "start-up (layout-rejected-by-megatron). Layouts whose groups cannot be built exit 2 with the "
            "framework's reason. Exit status 1 when a finding is at or above --fail-on; --suggest searches "
            "for a faster order (never one Megatron refuses) and CUDA_VISIBLE_DEVICES."
        ),
        epilog=(
            "examples:\n"
            "  linkscope check sample:dgx-h100 --tp 8 --pp 4 --nodes 8\n"
            "  linkscope check sample:a100-pcie-nvbridge-4 --tp 2 --visible-devices 0,2,1,3 --suggest\n"
            "  linkscope check sample:dgx1-v100 --mesh dp=1,tp=8 --json\n"
            "  linkscope check sample:dgx-h100 --tp 8 --nodes 2 --order dp-tp-pp --fail-on error\n"
            "  linkscope check sample:dgx-h100 --nodes 2 --tp 4 --etp 2 --ep 4 --model 8x7b\n"
            "  linkscope check sample:dgx-h100 --nodes 4 --mesh dp_replicate=2,dp_shard=4,cp=2,tp=2"
        ),
    )
    add_source_argument(parser)
    add_layout_arguments(parser)
    parser.add_argument("--rank-map", default=None, metavar="FILE",
                        help="explicit placement: CSV/JSON rank,host,gpu, a DeepSpeed hostfile or Slurm variables")
    add_model_arguments(parser)
    parser.add_argument("--measurements", default=None, metavar="FILE",
                        help="measurements JSON (linkscope bench/import -o) to calibrate the cost model "
                        "(default: those the snapshot carries, if any); what calibration changed is printed "
                        "(`calibration` in --json); measurements of a different kind of machine are refused")
    add_force_flag(parser, "use --measurements from a different kind of machine anyway")
    add_cost_params_flag(parser)
    parser.add_argument("--suggest", action="store_true", help="search orders and device permutations for a faster layout")
    add_fail_on_flag(parser)
    add_json_flag(parser, "print one JSON object (groups, findings, costs...)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the check and print it; the exit status says whether a finding reached --fail-on."""
    snapshot = open_gpu_source(args.source, "check")
    default_slots = len(snapshot.host.gpus) if snapshot.hosts else 8
    request = request_from_args(args, default_slots)
    measurements = load_measurements(args.measurements) if args.measurements else snapshot.measurements
    changes = []
    if measurements is not None:
        check_measured_on(snapshot, measurements, args.force or not args.measurements, "--measurements")
        from linkscope.topo.cost.calibration_report import calibration_changes

        changes = calibration_changes(measurements, snapshot, request.cost_model)
    report = check_layout(snapshot, request, measurements, suggest=args.suggest)
    asked: list[Expected | None] = []
    if measurements is not None:
        asked = asked_rows(row_expectations(measurements, snapshot, request.cost_model))
        if not judged_counts(asked)["judged"]:  # measurements of which nothing was judged: never a clean verdict
            report = replace(report, findings=(*report.findings, LayoutFinding(
                "measurements-not-judged", "warning", "", (), f"the measurements were not judged: {summary(asked)}")))
    if args.json:
        large = report.layout is not None and report.layout.world_size > 4096
        payload = report.to_json()
        if measurements is not None:
            payload["calibration"] = [change.to_json() for change in changes]
            payload["judged"] = judged_counts(asked)
            payload["measured_placement"] = placement_lines([row for row in asked if row is not None])
        say(json_text(payload, indent=None, compact=large), block=True)
    else:
        _print(report, args.suggest, [change.message for change in changes], asked if measurements is not None else None,
               snapshot.source)
    return findings_status((finding.severity for finding in report.findings), args.fail_on)


def _print(report: CheckReport, suggested: bool, calibration: list[str], asked: list[Expected | None] | None,
           against: str) -> None:
    from rich.text import Text

    from linkscope.render.check_view import check_view
    from linkscope.render.console import console as safe_console
    from linkscope.render.expected import print_verdict_summary

    console = safe_console()
    console.print(check_view(report))
    if suggested and report.suggestion is None:
        console.print("\nSuggestion: none: no order, distribution or device permutation beats this layout by more than 1%.")
    if asked is not None:  # the measurements, as import --expect judges them: where they were placed, what was judged
        print_verdict_summary(console, asked, against)
    for line in calibration:
        console.print(Text(f"calibration: {line}"))
