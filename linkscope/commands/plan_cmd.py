"""`linkscope plan SOURCE --gpus 64 [model flags]`: the parallelism design worksheet.

For TP, PP, DP (and CP/EP when used): the degree, where the groups sit and why; then every
collective per step with the link it wants and the link it gets, and the pipeline bubble.
Rich tables, `--markdown`, or `--json`.
"""

from __future__ import annotations

import argparse
from typing import Any

from linkscope.job_options import add_cost_params_flag, add_model_arguments, cost_model_from_args, model_from_args
from linkscope.options import add_json_flag, add_source_argument
from linkscope.source import open_gpu_source
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.common.numbers import whole_number
from linkscope.topo.common.text import say
from linkscope.topo.layout.spec import DIMENSIONS


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `plan` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help="design worksheet: TP/PP/DP degrees for N GPUs of this machine, traffic per step, bubble",
        description=(
            "Choose tensor, pipeline and data parallel degrees for a model on GPUs like the SOURCE's: "
            "TP inside a node and only as wide as a ring without slow hops allows, PP until the model "
            "fits in memory, DP for the rest. Prints where each group sits and why, every collective per "
            "step with the link it wants and the link it gets, the memory per GPU and the pipeline bubble."
        ),
        epilog=(
            "examples:\n"
            "  linkscope plan sample:dgx-h100 --gpus 64 --model 70b\n"
            "  linkscope plan sample:dgx-a100 --gpus 16 --hidden 4096 --layers 32 --params 7B --markdown\n"
            "  linkscope plan sample:dgx-h100 --gpus 64 --model 8x7b --json"
        ),
    )
    add_source_argument(parser)
    parser.add_argument("--gpus", type=whole_number(1), required=True, metavar="N", help="total GPUs of the job")
    for dim in DIMENSIONS:
        parser.add_argument(f"--{dim}", type=whole_number(1), default=None, metavar="N", help=f"pin the {dim} degree")
    parser.add_argument("--vpp", type=whole_number(1), default=1, metavar="N",
                        help="virtual pipeline stages per rank (interleaved schedule: a smaller bubble; needs pp > 1)")
    add_model_arguments(parser)
    add_cost_params_flag(parser, "JSON overrides of the link parameters")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true", help="print the worksheet as markdown")
    add_json_flag(output, "print one JSON object")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Plan and print the worksheet."""
    from linkscope.topo.checks.plan import plan_layout

    pinned = {dim: getattr(args, dim) for dim in DIMENSIONS if getattr(args, dim) is not None}
    for dim, value in pinned.items():
        if value < 1:
            raise InputError(f"--{dim}: must be at least 1, got {value}")
    if args.vpp < 1:
        raise InputError(f"--vpp: must be at least 1, got {args.vpp}")
    plan = plan_layout(open_gpu_source(args.source, "plan"), args.gpus, model_from_args(args), pinned, cost_model_from_args(args),
                       args.vpp)
    from linkscope.render.plan_view import plan_json, plan_markdown, plan_view

    if args.json:
        say(json_text(plan_json(plan)), block=True)
    elif args.markdown:
        say(plan_markdown(plan), end="", block=True)  # markdown is text on a terminal too
    else:
        from linkscope.render.console import console as safe_console

        safe_console().print(plan_view(plan))
    return 0
