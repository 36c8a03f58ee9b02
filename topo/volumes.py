"""Per-step communication volumes of a transformer training job, per parallel dimension.

From the Megatron-LM papers (Shoeybi et al. 2019, Narayanan et al. 2021, Korthikanti et al.
2022), for micro-batch b, sequence s, hidden h, L layers on p pipeline stages, m micro-batches
per step, element size e bytes:
- TP: 2 all_reduces of b*s*h*e bytes per layer forward and 2 backward (with sequence
  parallelism each becomes an all_gather + reduce_scatter of the same size);
- CP: each layer gathers K and V (2*b*s*h_kv*e bytes) forward and reduce-scatters their
  gradients backward;
- EP: one dispatch and one combine all_to_all of b*s*top_k*h*e bytes per MoE layer forward, the
  same backward;
- DP: one all_reduce of the gradients (params / (tp*pp) * e bytes, expert weights also / ep, see
  :func:`params_per_gpu`) per step; under ZeRO-1/2 a
  reduce_scatter + all_gather of the same size, under ZeRO-3/FSDP the parameters are gathered
  again in the backward pass (2 all_gathers + 1 reduce_scatter);
- PP: one b*s*h*e activation forward and one gradient backward per micro-batch per stage boundary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from topo.errors import InputError
from topo.limits import MAX_PARAMETER_COUNT
from topo.numbers import parse_float


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


def params_per_gpu(model: ModelSpec, tp: int, pp: int, ep: int = 1) -> float:
    """Parameters one GPU holds: dense weights over tp*pp, expert weights over tp*ep*pp."""
    expert = model.params * model.expert_fraction if model.experts else 0.0
    return (model.params - expert) / (tp * pp) + expert / (tp * max(1, ep) * pp)


def microbatches(model: ModelSpec, dp: int) -> int:
    """Micro-batches per step for one pipeline: global batch / (micro-batch x dp), at least 1."""
    return max(1, model.global_batch // max(1, model.micro_batch * dp))


def pipeline_bubble(pp: int, microbatch_count: int) -> float:
    """Idle share of a 1F1B pipeline step: (p-1)/(m+p-1)."""
    return (pp - 1) / (microbatch_count + pp - 1) if pp > 1 else 0.0


def step_traffic(model: ModelSpec, sizes: dict[str, int]) -> list[Traffic]:
    """Every collective each dimension with size > 1 runs per optimizer step, per rank."""
    tp, cp, ep, dp, pp = (sizes.get(dim, 1) for dim in ("tp", "cp", "ep", "dp", "pp"))
    e, b, h = model.dtype_bytes, model.micro_batch, model.hidden
    tokens = b * model.seq // cp
    m = microbatches(model, dp)
    layers_here = max(1, -(-model.layers // pp))
    activation = tokens * h * e
    result: list[Traffic] = []
    if tp > 1:
        calls = 4 * layers_here * m
        if model.sequence_parallel:
            what = "activations, 2 per layer fwd + 2 bwd (sequence parallel)"
            result.append(Traffic("tp", "all_gather", activation, calls, what))
            result.append(Traffic("tp", "reduce_scatter", activation, calls, what))
        else:
            result.append(Traffic("tp", "all_reduce", activation, calls, "activations, 2 per layer fwd + 2 bwd"))
    if cp > 1:
        kv = 2 * tokens * cp * (model.kv_hidden or h) * e // tp
        result.append(Traffic("cp", "all_gather", kv, layers_here * m, "K and V, 1 per layer fwd"))
        result.append(Traffic("cp", "reduce_scatter", kv, layers_here * m, "K and V gradients, 1 per layer bwd"))
    if ep > 1 and model.experts:
        routed = tokens * max(1, model.top_k) * h * e
        result.append(Traffic("ep", "all_to_all", routed, 4 * layers_here * m, "routed tokens, dispatch + combine fwd and bwd"))
    if dp > 1:
        grads = int(params_per_gpu(model, tp, pp, ep) * e)
        if model.zero_stage == 0:
            result.append(Traffic("dp", "all_reduce", grads, 1, "gradients, once per step"))
        else:
            gathers = 2 if model.zero_stage >= 3 else 1
            result.append(Traffic("dp", "reduce_scatter", grads, 1, "gradients, once per step"))
            label = "parameters, fwd and bwd (FSDP)" if gathers == 2 else "updated parameters, once per step"
            result.append(Traffic("dp", "all_gather", grads, gathers, label))
    if pp > 1:
        boundary = activation // (tp if model.sequence_parallel else 1)
        result.append(Traffic("pp", "send_recv", boundary, 2 * m, "activations fwd + gradients bwd per micro-batch"))
    return result


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
        raise InputError(f"{field}: {text!r} is above linkscope's cap of {MAX_PARAMETER_COUNT:.0e} parameters (topo/limits.py)")
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
