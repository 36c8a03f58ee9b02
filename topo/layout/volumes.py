"""Per-step communication volumes of a transformer training job, per parallel dimension.

From the Megatron-LM papers (Shoeybi et al. 2019, Narayanan et al. 2021, Korthikanti et al.
2022), for micro-batch b, sequence s, hidden h, L layers on p pipeline stages, m micro-batches
per step, element size e bytes:
- TP: 2 all_reduces of b*s*h*e bytes per layer forward and 2 backward (with sequence
  parallelism each becomes an all_gather + reduce_scatter of the same size); in a mixture of
  experts only the attention's pair stays on tp, the expert MLP's runs on the expert-TP group
  (etp) as an all_gather + reduce_scatter of the routed tokens;
- CP: each layer gathers K and V (2*b*s*h_kv*e bytes) forward and reduce-scatters their
  gradients backward;
- EP: one dispatch and one combine all_to_all of b*s*top_k*h*e bytes per MoE layer forward, the
  same backward;
- gradients, once per step, where the framework reduces them (:class:`topo.layout.spec.GradientGroup`):
  Megatron reduces the dense weights' (params / (tp*pp) * e bytes) over dp x cp and the expert
  weights' (/ (etp*ep*pp)) over expert-dp; an all_reduce under ZeRO-0, a reduce_scatter +
  all_gather under the distributed optimizer (ZeRO-1/2), and under ZeRO-3/FSDP the parameters
  are gathered again in the backward pass (2 all_gathers + 1 reduce_scatter);
- PP: one b*s*h*e activation forward and one gradient backward per micro-batch per stage
  boundary, v times over with v virtual stages per rank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_PARAMETER_COUNT
from linkscope.topo.common.numbers import parse_float
from linkscope.topo.layout.spec import GradientGroup


@frozen
class ModelSpec:
    """The model and batch shape that set the communication volumes."""

    name: str
    hidden: int
    layers: int
    params: float
    """Total parameter count."""
    seq: int = 4096
    micro_batch: int = 1
    global_batch: int = 512
    """Sequences per optimizer step (sets the number of micro-batches)."""
    kv_hidden: int | None = None
    """Width of K (and of V) with grouped-query attention; None = hidden."""
    dtype_bytes: int = 2
    """Bytes per element of activations and gradients (bf16 = 2)."""
    experts: int = 0
    top_k: int = 0
    expert_fraction: float = 0.0
    """Share of `params` in expert weights, which expert parallelism shards (ep ranks hold different experts)."""
    sequence_parallel: bool = False
    zero_stage: int = 1
    """0: plain DP all_reduce; 1-2: distributed optimizer (RS + AG); 3: FSDP."""


PRESETS: dict[str, ModelSpec] = {
    "8b": ModelSpec("8b", hidden=4096, layers=32, params=8.0e9, seq=8192, kv_hidden=1024),
    "70b": ModelSpec("70b", hidden=8192, layers=80, params=70.6e9, seq=8192, kv_hidden=1024),
    "405b": ModelSpec("405b", hidden=16384, layers=126, params=405e9, seq=8192, kv_hidden=1024),
    "8x7b": ModelSpec("8x7b", hidden=4096, layers=32, params=46.7e9, seq=4096, kv_hidden=1024, experts=8, top_k=2,
                      expert_fraction=45.1e9 / 46.7e9),
}
"""Dense Llama-3 shapes (8B, 70B, 405B) and a Mixtral-style 8x7B mixture of experts (46.7B parameters,
12.9B active with 2 of 8 experts: 45.1B of them are expert weights)."""

DEFAULT_PRESET = "8b"


def preset(name: str) -> ModelSpec:
    """The preset called `name` (case-insensitive, `llama-70b` style prefixes allowed)."""
    key = name.lower().removeprefix("llama-").removeprefix("llama3-").removeprefix("mixtral-")
    if key not in PRESETS:
        raise InputError(f"--model: unknown preset {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[key]


@frozen
class Traffic:
    """One kind of collective a dimension runs every step."""

    dim: str
    op: str
    size_bytes: int
    """Bytes per call."""
    calls_per_step: int
    what: str
    """For people: `activations, 2 per layer fwd + 2 bwd`."""

    @property
    def bytes_per_step(self) -> int:
        """Bytes moved per step by one rank's calls of this kind."""
        return self.size_bytes * self.calls_per_step


def params_per_gpu(model: ModelSpec, tp: int, pp: int, ep: int = 1, etp: int | None = None) -> float:
    """Parameters one GPU holds: dense weights over tp*pp, expert weights over etp*ep*pp (etp = tp unless given)."""
    dense, expert = split_params(model)
    return dense / (tp * pp) + expert / ((tp if etp is None else etp) * max(1, ep) * pp)


def split_params(model: ModelSpec) -> tuple[float, float]:
    """(dense, expert) parameter counts: expert weights are those expert parallelism shards."""
    expert = model.params * model.expert_fraction if model.experts else 0.0
    return model.params - expert, expert


def microbatches(model: ModelSpec, dp: int) -> int:
    """Micro-batches per step for one pipeline: global batch / (micro-batch x dp), at least 1."""
    return max(1, model.global_batch // max(1, model.micro_batch * dp))


def pipeline_bubble(pp: int, microbatch_count: int, vpp: int = 1) -> float:
    """Idle share of a 1F1B pipeline step: (p-1)/(m+p-1); interleaved over v virtual stages, (p-1)/(v*m+p-1)."""
    return (pp - 1) / (vpp * microbatch_count + pp - 1) if pp > 1 else 0.0


def megatron_gradients(sizes: Mapping[str, int]) -> tuple[GradientGroup, ...]:
    """Megatron's gradient groups for these sizes: dense over dp x cp, expert over expert-dp."""
    tp, cp, ep, dp, pp = (sizes.get(dim, 1) for dim in ("tp", "cp", "ep", "dp", "pp"))
    etp = sizes.get("etp", tp)
    world = tp * cp * dp * pp
    return (GradientGroup("dp_cp" if cp > 1 else "dp", dp * cp, "dense", "optimizer"),
            GradientGroup("edp", max(1, world // (etp * ep * pp)), "expert", "optimizer"))


def step_traffic(model: ModelSpec, sizes: Mapping[str, int],
                 gradients: Sequence[GradientGroup] | None = None) -> list[Traffic]:
    """Every collective each group set with size > 1 runs per optimizer step, per rank.

    `sizes` holds tp, cp, ep, dp, pp (and etp, vpp when not the defaults); `gradients` says where
    gradients are reduced (Megatron's groups when None).
    """
    tp, cp, ep, dp, pp = (sizes.get(dim, 1) for dim in ("tp", "cp", "ep", "dp", "pp"))
    etp, vpp = sizes.get("etp", tp), sizes.get("vpp", 1)
    e, b, h = model.dtype_bytes, model.micro_batch, model.hidden
    tokens = b * model.seq // cp
    m = microbatches(model, dp)
    layers_here = max(1, -(-model.layers // pp))
    activation = tokens * h * e
    routed = tokens * max(1, model.top_k) * h * e
    result: list[Traffic] = []
    if tp > 1:
        per_layer = 2 if model.experts else 4
        calls = per_layer * layers_here * m
        which = "attention, 1 per layer fwd + 1 bwd" if model.experts else "activations, 2 per layer fwd + 2 bwd"
        if model.sequence_parallel:
            result.append(Traffic("tp", "all_gather", activation, calls, f"{which} (sequence parallel)"))
            result.append(Traffic("tp", "reduce_scatter", activation, calls, f"{which} (sequence parallel)"))
        else:
            result.append(Traffic("tp", "all_reduce", activation, calls, which))
    if cp > 1:
        kv = 2 * tokens * cp * (model.kv_hidden or h) * e // tp
        result.append(Traffic("cp", "all_gather", kv, layers_here * m, "K and V, 1 per layer fwd"))
        result.append(Traffic("cp", "reduce_scatter", kv, layers_here * m, "K and V gradients, 1 per layer bwd"))
    if ep > 1 and model.experts:
        result.append(Traffic("ep", "all_to_all", routed, 4 * layers_here * m, "routed tokens, dispatch + combine fwd and bwd"))
    if etp > 1 and model.experts:
        what = "routed tokens of the expert MLP, 1 per layer fwd + 1 bwd"
        result.append(Traffic("etp", "all_gather", routed, 2 * layers_here * m, what))
        result.append(Traffic("etp", "reduce_scatter", routed, 2 * layers_here * m, what))
    dense, expert = split_params(model)
    per_rank = {"dense": dense / (tp * pp), "expert": expert / (etp * ep * pp), "all": params_per_gpu(model, tp, pp, ep, etp)}
    for group in megatron_gradients(sizes) if gradients is None else gradients:
        grads = int(per_rank[group.params] * e / group.shard_factor)
        if group.size > 1 and grads > 0:
            result += _gradient_traffic(model, group, grads)
    if pp > 1:
        boundary = activation // (tp if model.sequence_parallel else 1)
        what = "activations fwd + gradients bwd per micro-batch" + (f" and virtual stage ({vpp})" if vpp > 1 else "")
        result.append(Traffic("pp", "send_recv", boundary, 2 * m * vpp, what))
    return result


def _gradient_traffic(model: ModelSpec, group: GradientGroup, grads: int) -> list[Traffic]:
    """The collectives that reduce `grads` bytes per rank over `group`, per its style and the ZeRO stage."""
    weights = {"dense": "dense gradients", "expert": "expert gradients", "all": "gradients"}[group.params]
    if group.style == "replicate" or (group.style == "optimizer" and model.zero_stage == 0):
        return [Traffic(group.dim, "all_reduce", grads, 1, f"{weights}, once per step")]
    fsdp = group.style == "shard" or model.zero_stage >= 3
    label = "parameters, fwd and bwd (FSDP)" if fsdp else "updated parameters, once per step"
    return [Traffic(group.dim, "reduce_scatter", grads, 1, f"{weights}, once per step"),
            Traffic(group.dim, "all_gather", grads, 2 if fsdp else 1, label)]


_COUNT = re.compile(r"\s*([0-9]{1,20}(?:\.[0-9]{1,20})?(?:e[0-9]{1,3})?)\s*([KMBT]?)\s*\Z", re.IGNORECASE | re.ASCII)
_COUNT_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "float32": 4, "bf16": 2, "fp16": 2, "float16": 2, "bfloat16": 2, "fp8": 1}


def parse_param_count(text: str, field: str = "--params") -> float:
    """Parse a parameter count: `8B`, `70.6B`, `1.5T`, `7e9`, `350M`."""
    match = _COUNT.match(text)
    if match is None:
        raise InputError(f"{field}: {text!r} is not a parameter count (examples: 8B, 70.6B, 7e9)")
    value = parse_float(match.group(1), field) * _COUNT_SCALE[match.group(2).upper()]
    if value <= 0:
        raise InputError(f"{field}: must be more than 0")
    if value > MAX_PARAMETER_COUNT:
        raise InputError(f"{field}: {text!r} is above linkscope's cap of {MAX_PARAMETER_COUNT:.0e} parameters "
                         "(topo/common/limits.py)")
    return value


def model_spec(base: str | None, **overrides: object) -> ModelSpec:
    """A preset (default 8b) with the given fields replaced; None values are ignored."""
    spec = preset(base or DEFAULT_PRESET)
    changes = {key: value for key, value in overrides.items() if value is not None}
    if "dtype" in changes:
        dtype = str(changes.pop("dtype")).lower()
        if dtype not in DTYPE_BYTES:
            raise InputError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
        changes["dtype_bytes"] = DTYPE_BYTES[dtype]
    for key in ("hidden", "layers", "seq", "micro_batch", "global_batch"):
        value = changes.get(key)
        if isinstance(value, int) and value < 1:
            raise InputError(f"--{key.replace('_', '-')}: must be at least 1, got {value}")
    zero = changes.get("zero_stage")
    if isinstance(zero, int) and zero not in (0, 1, 2, 3):
        raise InputError(f"--zero: {zero} is not a ZeRO stage (0, 1, 2 or 3)")
    if "hidden" in changes and "kv_hidden" not in changes and spec.kv_hidden is not None:
        changes["kv_hidden"] = None
    name = spec.name if not changes else f"{spec.name} (modified)" if base else "custom"
    return replace(spec, name=name, **changes)  # type: ignore[arg-type]
