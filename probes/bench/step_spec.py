"""What `linkscope bench step` is asked to do: the overlap experiment, parsed once, no torch here.

A small model (a stack of linear layers) is trained for a few steps in several modes:
`no-overlap` (forward, backward, then one all_reduce per gradient), `ddp` (DistributedDataParallel:
gradient buckets reduced while backward still runs) once per bucket size, and `ddp-no-sync`
(DDP under `no_sync()`: no communication at all, the compute-only baseline).
"""

from __future__ import annotations

import argparse

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_STEP_PARAMETERS
from linkscope.topo.common.numbers import comma_items, parse_float, whole_number

MODES: tuple[str, ...] = ("no-overlap", "ddp", "ddp-no-sync")
DEFAULT_BUCKET_CAPS_MB: tuple[float, ...] = (1.0, 5.0, 25.0, 100.0)


@frozen
class StepSpec:
    """The overlap experiment: model shape, how many steps, and the modes to run in order."""

    layers: int
    width: int
    batch: int
    steps: int
    warmup: int
    modes: tuple[str, ...]
    bucket_caps_mb: tuple[float, ...]
    backend: str
    world_size: int
    profile_dir: str | None = None

    @property
    def parameters(self) -> int:
        """Weights and biases of the model."""
        return self.layers * (self.width * self.width + self.width)

    @property
    def runs(self) -> tuple[tuple[str, float | None], ...]:
        """(mode, bucket cap in MB or None) in the order they run; `ddp` once per bucket cap."""
        runs: list[tuple[str, float | None]] = []
        for mode in self.modes:
            if mode == "ddp":
                runs.extend(("ddp", cap) for cap in self.bucket_caps_mb)
            else:
                runs.append((mode, None))
        return tuple(runs)


def parse_modes(text: str) -> tuple[str, ...]:
    """`no-overlap,ddp` -> modes; InputError naming an unknown one."""
    modes = comma_items(text, "--modes")
    for mode in modes:
        if mode not in MODES:
            raise InputError(f"--modes: unknown mode {mode!r} (known: {', '.join(MODES)})")
    return tuple(dict.fromkeys(modes))


def parse_bucket_caps(text: str) -> tuple[float, ...]:
    """`1,5,25,100` -> bucket caps in MB (each above 0 and at most 10 GB)."""
    caps = tuple(parse_float(part, "--bucket-cap-mb", minimum=0.001, maximum=10_000)
                 for part in comma_items(text, "--bucket-cap-mb"))
    return tuple(dict.fromkeys(caps))


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment's options (shared by the command line and any other entry)."""
    parser.add_argument("--layers", type=whole_number(0), default=8, metavar="N", help="linear layers in the model (default 8)")
    parser.add_argument("--width", type=whole_number(0), default=1024, metavar="N",
                        help="features per layer (default 1024: 1M weights a layer)")
    parser.add_argument("--batch", type=whole_number(0), default=32, metavar="N", help="samples per step and rank (default 32)")
    parser.add_argument("--steps", type=whole_number(0), default=10, metavar="N", help="timed steps per mode (default 10)")
    parser.add_argument("--warmup", type=whole_number(0), default=2, metavar="N", help="untimed steps per mode first (default 2)")
    parser.add_argument("--modes", default=",".join(MODES), metavar="MODES", help=f"modes to run (default: {','.join(MODES)})")
    parser.add_argument("--bucket-cap-mb", metavar="MB", default=",".join(f"{cap:g}" for cap in DEFAULT_BUCKET_CAPS_MB),
                        help="DDP bucket sizes to sweep in MB (default 1,5,25,100)")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="write each rank's profiler trace of every mode to DIR (read them with linkscope trace)")


def step_spec_from_args(args: argparse.Namespace, backend: str, world_size: int) -> StepSpec:
    """Check the options and build the spec; InputError on a bad value."""
    for name, minimum in (("layers", 1), ("width", 1), ("batch", 1), ("steps", 1), ("warmup", 0)):
        value = getattr(args, name)
        if value < minimum:
            raise InputError(f"--{name}: must be at least {minimum}, got {value}")
    if args.width > 65_536 or args.layers > 10_000 or args.batch > 65_536 or args.steps > 100_000 or args.warmup > 100_000:
        raise InputError("--layers/--width/--batch/--steps: too large for a probe of the machine "
                         "(at most 10,000 layers, width and batch 65,536, 100,000 steps)")
    spec = StepSpec(layers=args.layers, width=args.width, batch=args.batch, steps=args.steps, warmup=args.warmup,
                    modes=parse_modes(args.modes), bucket_caps_mb=parse_bucket_caps(args.bucket_cap_mb),
                    backend=backend, world_size=world_size, profile_dir=args.profile)
    if spec.parameters > MAX_STEP_PARAMETERS:
        raise InputError(f"--layers {args.layers} x --width {args.width}: {spec.parameters:,} parameters, more than the "
                         f"{MAX_STEP_PARAMETERS:,} this experiment builds")
    return spec
