"""The flags that describe a training job, shared by `check` and `plan`: the parallel layout, the model that
sets the per-step volumes, and the link parameters (`--cost-params`)."""

from __future__ import annotations

import argparse

from linkscope.topo.common.numbers import whole_number
from linkscope.topo.cost.params import CostModel
from linkscope.topo.layout.placement import DISTRIBUTIONS
from linkscope.topo.layout.spec import DEFAULT_ORDER, MESH_ROLES
from linkscope.topo.layout.volumes import PRESETS, ModelSpec, model_spec, parse_param_count

positive_int = whole_number(1)
"""A size, count or degree: a whole number of at least 1 (layouts bound the world size later)."""


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """The parallel-layout flags `check` and `plan` share: sizes, order or mesh, placement."""
    group = parser.add_argument_group("layout")
    for dim, what in (("tp", "tensor"), ("cp", "context"), ("ep", "expert"), ("dp", "data"), ("pp", "pipeline")):
        extra = " (default: inferred from the world size)" if dim == "dp" else " (default 1)"
        group.add_argument(f"--{dim}", type=positive_int, metavar="N", help=f"{what}-parallel size{extra}")
    group.add_argument("--etp", type=positive_int, metavar="N",
                       help="expert tensor-parallel size, Megatron's --expert-tensor-parallel-size (default: --tp)")
    group.add_argument("--vpp", type=positive_int, default=1, metavar="N",
                       help="virtual pipeline stages per rank (interleaved schedule; needs --pp 2 or more)")
    group.add_argument("--optimizer-instances", type=positive_int, default=1, metavar="N",
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
    group.add_argument("--nodes", type=positive_int, default=1, metavar="N",
                       help="number of nodes: the SOURCE host repeated N times (default 1)")
    group.add_argument("--distribution", choices=DISTRIBUTIONS, default="block",
                       help="rank placement: torchrun/Slurm block (default) or Slurm cyclic")
    group.add_argument("--visible-devices", default=None, metavar="LIST",
                       help="CUDA_VISIBLE_DEVICES used on every node, e.g. 0,4,1,5,2,6,3,7")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model flags that set per-step volumes (a preset, or its fields one by one)."""
    group = parser.add_argument_group("model (sets the per-step communication volumes)")
    group.add_argument("--model", default=None, metavar="PRESET", help=f"preset: {', '.join(PRESETS)} (default 8b)")
    group.add_argument("--hidden", type=positive_int, metavar="N", help="hidden size")
    group.add_argument("--layers", type=positive_int, metavar="N", help="transformer layers")
    group.add_argument("--seq", type=positive_int, metavar="N", help="sequence length")
    group.add_argument("--micro-batch", type=positive_int, metavar="N", help="micro-batch size")
    group.add_argument("--global-batch", type=positive_int, metavar="N", help="sequences per optimizer step")
    group.add_argument("--params", default=None, metavar="COUNT", help="parameter count, e.g. 8B, 70.6B")
    group.add_argument("--dtype", default=None, metavar="DTYPE", help="activation/gradient type: bf16 (default), fp16, fp32, fp8")
    group.add_argument("--experts", type=positive_int, metavar="N", help="experts per MoE layer")
    group.add_argument("--top-k", type=positive_int, metavar="N", help="experts each token is routed to")
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


def cost_model_from_args(args: argparse.Namespace) -> CostModel | None:
    """The link parameters: defaults, or a `--cost-params` JSON file applied to them."""
    path = getattr(args, "cost_params", None)
    if path is None:
        return None
    from linkscope.topo.cost.params import load_cost_overrides
    from linkscope.topo.formats.source import read_text_file

    return load_cost_overrides(read_text_file(path), path)


COST_PARAMS_HELP = 'JSON overrides of the link parameters, e.g. {"bandwidth_gbps": {"NET": 45}}'


def add_cost_params_flag(parser: argparse.ArgumentParser, help_text: str = COST_PARAMS_HELP) -> None:
    """`--cost-params FILE`: overrides of the link parameters (read by :func:`cost_model_from_args`)."""
    parser.add_argument("--cost-params", default=None, metavar="FILE", help=help_text)
