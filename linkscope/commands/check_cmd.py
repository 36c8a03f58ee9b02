"""`linkscope check SOURCE --tp 8 --pp 4 ...`: expand a job's process groups, price them, fail on slow links.

Exit status: 0 no finding at or above `--fail-on` (default warning), 1 there is one, 2 bad input.
The JSON form (`--json`) is a public contract: `groups` (per dimension, lists of ranks) and
`findings` (each `code`, `severity`, `dim`, `ranks`, `message`, plus `link`, `cost_s`,
`best_cost_s`, `fix`), with `layout`, `placement`, `costs` and `suggestion` alongside, and `calibration`
(what fitting the model to the measurements changed, :mod:`topo.cost.calibration_report`) when measurements were used.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.files import check_measured_on, load_measurements
from linkscope.source import add_source_argument, open_source
from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.report import CheckReport
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.cost.params import CostModel
from linkscope.topo.layout.placement import DISTRIBUTIONS, parse_visible_devices
from linkscope.topo.layout.spec import DEFAULT_ORDER, DIMENSIONS, MESH_ROLES, parse_mesh, parse_mesh_roles
from linkscope.topo.layout.volumes import PRESETS, ModelSpec, model_spec, parse_param_count
from linkscope.topo.model.findings import SEVERITIES

EXIT_OK = 0
EXIT_FINDINGS = 1


_positive_int = whole_number(1)
"""A size, count or degree: a whole number of at least 1 (layouts bound the world size later)."""


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """The parallel-layout flags `check` and `plan` share: sizes, order or mesh, placement."""
    group = parser.add_argument_group("layout")
    for dim, what in (("tp", "tensor"), ("cp", "context"), ("ep", "expert"), ("dp", "data"), ("pp", "pipeline")):
        extra = " (default: inferred from the world size)" if dim == "dp" else " (default 1)"
        group.add_argument(f"--{dim}", type=_positive_int, metavar="N", help=f"{what}-parallel size{extra}")
    group.add_argument("--etp", type=_positive_int, metavar="N",
                       help="expert tensor-parallel size, Megatron's --expert-tensor-parallel-size (default: --tp)")
    group.add_argument("--vpp", type=_positive_int, default=1, metavar="N",
                       help="virtual pipeline stages per rank (interleaved schedule; needs --pp 2 or more)")
    group.add_argument("--optimizer-instances", type=_positive_int, default=1, metavar="N",
                       help="Megatron's --num-distributed-optimizer-instances: shard the optimizer inside N slices "
                       "of the gradient group, all_reduce between them (default 1)")
    group.add_argument("--order", default=None, metavar="ORDER",
                       help=f"Megatron rank order, first dimension varies fastest (default {DEFAULT_ORDER})")
    group.add_argument("--mesh", default=None, metavar="SHAPE",
                       help="PyTorch DeviceMesh shape instead of --order, outermost first, any dimension names, "
                       "e.g. dp=4,tp=8 or dp_replicate=2,dp_shard=4,cp=2,tp=2")
    group.add_argument("--mesh-roles", default=None, metavar="ROLES",
                       help="what each --mesh dimension does, e.g. rep=replicate,shard=fsdp; roles: "
                       f"{', '.join(MESH_ROLES)} (defaults: tp cp ep pp dp by name, dp_shard=fsdp, dp_replicate=replicate)")
    group.add_argument("--nodes", type=_positive_int, default=1, metavar="N",
                       help="number of nodes: the SOURCE host repeated N times (default 1)")
    group.add_argument("--distribution", choices=DISTRIBUTIONS, default="block",
                       help="rank placement: torchrun/Slurm block (default) or Slurm cyclic")
    group.add_argument("--visible-devices", default=None, metavar="LIST",
                       help="CUDA_VISIBLE_DEVICES used on every node, e.g. 0,4,1,5,2,6,3,7")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model flags that set per-step volumes (a preset, or its fields one by one)."""
    group = parser.add_argument_group("model (sets the per-step communication volumes)")
    group.add_argument("--model", default=None, metavar="PRESET", help=f"preset: {', '.join(PRESETS)} (default 8b)")
    group.add_argument("--hidden", type=_positive_int, metavar="N", help="hidden size")
    group.add_argument("--layers", type=_positive_int, metavar="N", help="transformer layers")
    group.add_argument("--seq", type=_positive_int, metavar="N", help="sequence length")
    group.add_argument("--micro-batch", type=_positive_int, metavar="N", help="micro-batch size")
    group.add_argument("--global-batch", type=_positive_int, metavar="N", help="sequences per optimizer step")
    group.add_argument("--params", default=None, metavar="COUNT", help="parameter count, e.g. 8B, 70.6B")
    group.add_argument("--dtype", default=None, metavar="DTYPE", help="activation/gradient type: bf16 (default), fp16, fp32, fp8")
    group.add_argument("--experts", type=_positive_int, metavar="N", help="experts per MoE layer")
    group.add_argument("--top-k", type=_positive_int, metavar="K", help="experts each token is routed to")
    group.add_argument("--sequence-parallel", action="store_true", default=None,
                       help="TP all_reduces become all_gather + reduce_scatter")
    group.add_argument("--zero", type=whole_number(0), default=None, metavar="STAGE",
                       help="ZeRO stage: 0 DP all_reduce, 1-2 reduce_scatter + all_gather (default 1), 3 FSDP")


def model_from_args(args: argparse.Namespace) -> ModelSpec | None:
    """The model the flags describe, or None when no model flag was given."""
    fields = {
        "hidden": args.hidden, "layers": args.layers, "seq": args.seq, "micro_batch": args.micro_batch,
        "global_batch": args.global_batch, "experts": args.experts, "top_k": args.top_k,
        "sequence_parallel": args.sequence_parallel, "zero_stage": args.zero, "dtype": args.dtype,
        "params": parse_param_count(args.params) if args.params is not None else None,
    }
    if args.model is None and all(value is None for value in fields.values()):
        return None
    return model_spec(args.model, **fields)


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


def cost_model_from_args(args: argparse.Namespace) -> CostModel | None:
    """The link parameters: defaults, or a `--cost-params` JSON file applied to them."""
    path = getattr(args, "cost_params", None)
    if path is None:
        return None
    from linkscope.topo.cost.params import load_cost_overrides
    from linkscope.topo.formats.source import read_text_file

    return load_cost_overrides(read_text_file(path), path)


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
    parser.add_argument("--force", action="store_true", help="use --measurements from a different kind of machine anyway")
    parser.add_argument("--cost-params", default=None, metavar="FILE",
                        help='JSON overrides of the link parameters, e.g. {"bandwidth_gbps": {"NET": 45}}')
    parser.add_argument("--suggest", action="store_true", help="search orders and device permutations for a faster layout")
    parser.add_argument("--fail-on", choices=SEVERITIES, default="warning",
                        help="exit 1 when a finding is at or above this severity (default warning)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (groups, findings, costs...)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the check and print it; the exit status says whether a finding reached --fail-on."""
    snapshot = open_source(args.source)
    default_slots = len(snapshot.host.gpus) if snapshot.hosts else 8
    request = request_from_args(args, default_slots)
    measurements = load_measurements(args.measurements) if args.measurements else snapshot.measurements
    changes = []
    if measurements is not None:
        check_measured_on(snapshot, measurements, args.force or not args.measurements, "--measurements")
        from linkscope.topo.cost.calibration_report import calibration_changes

        changes = calibration_changes(measurements, snapshot, request.cost_model)
    report = check_layout(snapshot, request, measurements, suggest=args.suggest)
    if args.json:
        large = report.layout is not None and report.layout.world_size > 4096
        payload = report.to_json()
        if measurements is not None:
            payload["calibration"] = [change.to_json() for change in changes]
        print(json_text(payload, indent=None, compact=large))
    else:
        _print(report, args.suggest, [change.message for change in changes])
    return EXIT_FINDINGS if report.fails(args.fail_on) else EXIT_OK


def _print(report: CheckReport, suggested: bool, calibration: list[str]) -> None:
    from rich.text import Text

    from linkscope.render.check_view import check_view
    from linkscope.render.console import console as safe_console

    console = safe_console()
    console.print(check_view(report))
    if suggested and report.suggestion is None:
        console.print("\nSuggestion: none: no order, distribution or device permutation beats this layout by more than 1%.")
    for line in calibration:
        console.print(Text(f"calibration: {line}"))
