"""What a check is asked about: the job's layout, placement and model, and the model's assumed volumes.
"""

from __future__ import annotations

import dataclasses

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.params import CostModel
from linkscope.topo.layout.placement import (
    Distribution,
    RankMapEntry,
)
from linkscope.topo.layout.spec import DEFAULT_ORDER, Layout
from linkscope.topo.layout.volumes import DEFAULT_PRESET, ModelSpec, microbatches, preset


@frozen
class CheckRequest:
    """Everything the command-line flags (or the app's form) say about the job."""

    sizes: tuple[tuple[str, int], ...] = ()
    """E.g. (("tp", 8), ("pp", 4)); missing dimensions are 1; dp, when absent, is inferred."""
    order: str = DEFAULT_ORDER
    mesh: tuple[tuple[str, int], ...] | None = None
    """DeviceMesh shape, outermost first, instead of an order."""
    mesh_roles: tuple[tuple[str, str], ...] = ()
    """Roles of mesh dimensions whose names do not say it (`dp_shard` is fsdp by default)."""
    etp: int | None = None
    """Expert tensor-parallel size (Megatron's --expert-tensor-parallel-size); None = tp."""
    vpp: int = 1
    """Virtual pipeline stages per rank (interleaved schedule)."""
    optimizer_instances: int = 1
    """Megatron's --num-distributed-optimizer-instances."""
    nodes: int = 1
    distribution: Distribution = "block"
    visible_devices: tuple[int, ...] | None = None
    model: str | None = None
    """Preset name (`8b`, `70b`, `8x7b`...); sets the per-step volumes."""
    model_spec: ModelSpec | None = None
    """A full model description; wins over `model`."""
    rank_map: tuple[RankMapEntry, ...] | None = None
    """Explicit placement; replaces nodes / distribution / visible_devices."""
    cost_model: CostModel | None = None
    """Link parameters (defaults when None)."""


MOE_DEFAULT_PRESET = "8x7b"
"""Assumed when a layout has expert parallelism but no model is given."""


def model_for(request: CheckRequest) -> tuple[ModelSpec, tuple[str, ...]]:
    """The model that sets the volumes, and a note when it was assumed rather than given.

    InputError where Megatron's training script refuses the model the user gave with the layout: --ep > 1
    on a dense model, or a number of experts that --ep does not divide. An assumed preset never refuses a
    layout (the user's own model may allow it): where --ep does not divide its experts, the volumes assume
    the fewest experts above it that --ep divides, and the note says so.
    """
    ep = dict(request.sizes).get("ep", 1)
    notes: tuple[str, ...] = ()
    if request.model_spec is not None:
        spec = request.model_spec
    elif request.model is not None:
        spec = preset(request.model)
    else:
        name = MOE_DEFAULT_PRESET if ep > 1 else DEFAULT_PRESET
        spec = preset(name)
        notes = (f"no model given: volumes of the {name} preset (--model, --hidden... to change)",)
        if spec.experts and spec.experts % ep:
            experts = -(-spec.experts // ep) * ep
            notes = (f"no model given: volumes of the {name} preset with {experts} experts instead of its "
                     f"{spec.experts} (--ep {ep} must divide the experts: Megatron refuses num_experts {spec.experts} "
                     f"with expert_model_parallel_size {ep}, so the rule is judged only for a model you give with "
                     "--experts or --model)",)
            spec = dataclasses.replace(spec, name=f"{name} with {experts} experts", experts=experts)
    if ep > 1 and not spec.experts:
        raise InputError(f"--ep {ep}: num_experts must be given to use expert model parallelism (Megatron's rule): "
                         f"add --experts N or a mixture-of-experts --model such as {MOE_DEFAULT_PRESET}")
    if spec.experts and spec.experts % ep:
        raise InputError(f"--experts {spec.experts}: Number of experts should be a multiple of expert model "
                         f"parallel_size (--ep {ep}, Megatron's rule)")
    return spec, notes


def volume_assumptions(spec: ModelSpec, layout: Layout) -> str:
    """What the per-step times rest on: the model, the batch, the sequence and the optimizer."""
    dp = layout.size("dp")
    count = microbatches(spec, dp)
    styles = {group.style for group in layout.gradient_groups()}
    if "shard" in styles:
        zero = "FSDP over the fsdp group (the mesh roles decide, not --zero)"
    elif styles == {"replicate"}:
        zero = "gradients all_reduced (replicate roles, not --zero)"
    else:
        zero = {0: "plain DP all_reduce (ZeRO-0)", 1: "distributed optimizer (ZeRO-1)", 2: "ZeRO-2",
                3: "FSDP/ZeRO-3"}[min(spec.zero_stage, 3)]
    vpp = f", {layout.vpp} virtual stages per rank" if layout.vpp > 1 else ""
    experts = f", {spec.experts} experts top-{spec.top_k}" if spec.experts else ""
    return (f"per-step volumes: model {spec.name} ({spec.params / 1e9:.3g}B params, hidden {spec.hidden}, "
            f"{spec.layers} layers{experts}), sequence length {spec.seq}, micro-batch {spec.micro_batch}, "
            f"global batch {spec.global_batch} sequences = {count} micro-batches per pipeline over dp {dp}{vpp}, "
            f"{zero}, {spec.dtype_bytes}-byte elements")
