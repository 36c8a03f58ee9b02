"""Parallel layout -> process groups, the way Megatron-LM and PyTorch DeviceMesh build them.

Megatron (`--order`, default `tp-cp-ep-dp-pp`): ranks are a grid whose first dimension varies
fastest, so with tp=2 dp=4 pp=2 on 16 ranks the TP groups are [0,1],[2,3]..., DP [0,2,4,6],...,
PP [0,8],[1,9].... Megatron-Core builds two grids from the same order: the dense one (tp, cp, dp,
pp; ep=1) and the expert one (etp, ep, expert-dp = world/(etp*ep*pp), pp; cp=1). Dense gradients
are reduced over the dp x cp group (`dp_cp`), expert gradients over expert-dp (`edp`).
At start-up Megatron refuses an order whose last dimension is not pp unless dp equals expert-dp,
and a layout whose pipeline groups differ between the two grids (:func:`megatron_refusal`).

DeviceMesh (`--mesh dp_replicate=2,dp_shard=4,tp=2`): row-major, the last dimension varies
fastest, every named dimension is an axis of its own (world = product). Each dimension has a
role (tp, cp, ep, pp, dp, fsdp, replicate): known names take theirs by default (MESH_DEFAULT_ROLES),
others come from `--mesh-roles`. The canonical groups tp/cp/ep/dp/pp flatten the dimensions of
each role (dp: every data-parallel one); FSDP gradients and parameters run over the fsdp
dimensions with cp (`fsdp`, torchtitan's dp_shard_cp), HSDP's all_reduce over the rest (`replicate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_LAYOUT_RANKS
from linkscope.topo.common.numbers import parse_int

DIMENSIONS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Parallel dimensions of a Megatron order: tensor, context, expert, data and pipeline parallel."""

GROUP_NAMES: dict[str, str] = {
    "tp": "tensor parallel",
    "cp": "context parallel",
    "ep": "expert parallel",
    "dp": "data parallel",
    "pp": "pipeline parallel",
    "etp": "expert tensor parallel",
    "edp": "expert data parallel",
    "dp_cp": "data x context parallel: dense gradients",
    "fsdp": "FSDP shard group: fsdp dims with cp",
    "replicate": "HSDP replicate group",
    "dp_cp_intra": "inside one distributed-optimizer instance",
    "dp_cp_inter": "across distributed-optimizer instances",
    "edp_intra": "expert data parallel inside one optimizer instance",
    "edp_inter": "expert data parallel across optimizer instances",
}
"""Every group set linkscope builds, for people."""

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's default rank order (first dimension varies fastest)."""

TRAINING_SCRIPT_ORDERS: dict[str, str] = {
    "tp-cp-ep-dp-pp": "Megatron-LM's training script (its default order)",
    "tp-cp-ep-pp-dp": "Megatron-LM's training script with --use-tp-pp-dp-mapping",
}
"""The only orders `pretrain_gpt.py` can start with; megatron-core's initialize_model_parallel takes any."""

MESH_ROLES: tuple[str, ...] = ("tp", "cp", "ep", "pp", "dp", "fsdp", "replicate")
"""What a DeviceMesh dimension does: dp is data parallel priced by --zero, fsdp shards (all_gather +
reduce_scatter), replicate all_reduces the gradients (DDP, HSDP's outer dimension)."""

MESH_DEFAULT_ROLES: dict[str, str] = {
    "tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dp": "dp",
    "dp_shard": "fsdp", "dp_replicate": "replicate",
}
"""Roles of the dimension names torchtitan and the DeviceMesh docs use; other names need --mesh-roles."""

DERIVED_GROUPS = ("etp", "edp", "dp_cp", "fsdp", "replicate", "dp_cp_intra", "dp_cp_inter", "edp_intra", "edp_inter")
"""Group names a mesh dimension may not take: linkscope builds groups of these names itself."""


_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


@frozen
class MeshDim:
    """One DeviceMesh dimension: its name as the job spells it, its size and its role."""

    name: str
    size: int
    role: str


@frozen
class GradientGroup:
    """Where a share of the gradients is reduced: the group set, its size, which weights, and how."""

    dim: str
    """Group key in :func:`build_groups` (`dp`, `dp_cp`, `edp`, `fsdp`, `replicate`)."""
    size: int
    params: str
    """`dense`, `expert` or `all` weights."""
    style: str
    """`optimizer` (the model's ZeRO stage decides), `shard` (FSDP: all_gather + reduce_scatter) or `replicate` (all_reduce)."""
    shard_factor: int = 1
    """The gradients arrive already sharded this many ways (HSDP's replicate step after the shard step)."""


@frozen
class Layout:
    """A resolved parallel layout: every dimension's size, the rank order (or mesh) and the world size."""

    sizes: tuple[tuple[str, int], ...]
    """tp, cp, ep, dp, pp and etp (expert tensor parallel, = tp unless given), with their sizes."""
    world_size: int
    order: tuple[str, ...] = ()
    """Megatron order as given, first fastest; empty when `mesh` is used."""
    mesh: tuple[MeshDim, ...] = ()
    """DeviceMesh dimensions, outermost first (last varies fastest); empty for an order."""
    vpp: int = 1
    """Virtual pipeline stages per rank (interleaved 1F1B)."""
    optimizer_instances: int = 1
    """Megatron's --num-distributed-optimizer-instances: the optimizer state is sharded inside each of
    this many slices of the gradient group, and the slices all_reduce the shards between them."""

    def size(self, dim: str) -> int:
        """The size of dimension or group set `dim` (1 when unused)."""
        for name, value in self.sizes:
            if name == dim:
                return value
        if dim == "edp":
            return self.world_size // (self.size("etp") * self.size("ep") * self.size("pp"))
        if dim == "dp_cp":
            return self.size("dp") * self.size("cp")
        for mesh_dim in self.mesh:
            if mesh_dim.name == dim:
                return mesh_dim.size
        if dim in GROUP_NAMES:
            return next((group.size for group in self.gradient_groups() if group.dim == dim), 1)
        raise KeyError(dim)

    @property
    def full_order(self) -> tuple[str, ...]:
        """The order with every dimension, the ones it leaves out (all of size 1) appended."""
        return self.order + tuple(dim for dim in DIMENSIONS if dim not in self.order)

    @property
    def order_string(self) -> str:
        """The order as typed on the command line (`tp-cp-ep-dp-pp`) or the mesh (`dp=4,tp=8`)."""
        if self.mesh:
            return ",".join(f"{dim.name}={dim.size}" for dim in self.mesh)
        return "-".join(self.order)

    @property
    def has_expert_layout(self) -> bool:
        """True when the expert layers are laid out unlike the dense ones (ep > 1 or etp != tp)."""
        return self.size("ep") > 1 or self.size("etp") != self.size("tp")

    def gradient_groups(self) -> tuple[GradientGroup, ...]:
        """Where the framework reduces gradients (see the module docstring)."""
        cp = self.size("cp")
        if not self.mesh:
            dense_size, expert_size, count = self.size("dp") * cp, self.size("edp"), self.optimizer_instances
            if count > 1:
                return (GradientGroup("dp_cp_intra", dense_size // count, "dense", "optimizer"),
                        GradientGroup("dp_cp_inter", count, "dense", "replicate", dense_size // count),
                        GradientGroup("edp_intra", expert_size // count, "expert", "optimizer"),
                        GradientGroup("edp_inter", count, "expert", "replicate", expert_size // count))
            dense = GradientGroup("dp_cp" if cp > 1 else "dp", dense_size, "dense", "optimizer")
            return dense, GradientGroup("edp", expert_size, "expert", "optimizer")
        roles = [dim.role for dim in self.mesh]
        shard = math.prod(dim.size for dim in self.mesh if dim.role == "fsdp")
        outer = math.prod(dim.size for dim in self.mesh if dim.role in ("dp", "replicate"))
        if "fsdp" in roles:
            groups = [GradientGroup("fsdp", shard * cp, "all", "shard")]
            if outer > 1:
                groups.append(GradientGroup("replicate", outer, "all", "replicate", shard * cp))
            return tuple(groups)
        style = "replicate" if "replicate" in roles and "dp" not in roles else "optimizer"
        return (GradientGroup("dp_cp" if cp > 1 else "dp", outer * cp, "all", style),)


def parse_order(text: str) -> tuple[str, ...]:
    """Split an order string `tp-cp-ep-dp-pp` into dimension names; InputError on unknown or repeated names."""
    names = tuple(part.strip().lower() for part in text.split("-"))
    for name in names:
        if name not in DIMENSIONS:
            raise InputError(f"--order: unknown dimension {name!r} in {text!r} (known: {', '.join(DIMENSIONS)})")
    if len(set(names)) != len(names):
        raise InputError(f"--order: a dimension appears twice in {text!r}")
    return names


def parse_mesh(text: str, flag: str = "--mesh") -> tuple[tuple[str, int], ...]:
    """Parse a DeviceMesh shape `dp_shard=4,tp=8` (outermost first, any dimension names); InputError naming `flag`."""
    entries: list[tuple[str, int]] = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep:
            raise InputError(f"{flag}: {part.strip()!r} is not NAME=SIZE (example: dp=4,tp=8)")
        if not _NAME.match(name):
            raise InputError(f"{flag}: {name!r} is not a dimension name (letters, digits and _, e.g. dp_shard)")
        entries.append((name, parse_int(value.strip(), f"{flag} {name}", 1, MAX_LAYOUT_RANKS)))
    names = [name for name, _ in entries]
    if len(set(names)) != len(names):
        raise InputError(f"{flag}: a dimension appears twice in {text!r}")
    return tuple(entries)


def parse_sizes(text: str, flag: str) -> tuple[tuple[str, int], ...]:
    """Parse `tp=8,pp=4` given as `flag` into (name, size) pairs of the known dimensions (order irrelevant)."""
    entries = parse_mesh(text, flag)
    for name, _ in entries:
        if name not in DIMENSIONS:
            raise InputError(f"{flag}: unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
    return entries


def parse_mesh_roles(text: str) -> tuple[tuple[str, str], ...]:
    """Parse `--mesh-roles dp_shard=fsdp,rep=replicate` into (dimension, role) pairs."""
    roles: list[tuple[str, str]] = []
    for part in text.split(","):
        name, sep, role = part.partition("=")
        name, role = name.strip().lower(), role.strip().lower()
        if not sep or not name:
            raise InputError(f"--mesh-roles: {part.strip()!r} is not NAME=ROLE (example: dp_shard=fsdp)")
        if role not in MESH_ROLES:
            raise InputError(f"--mesh-roles: {role!r} is not a role (known: {', '.join(MESH_ROLES)})")
        roles.append((name, role))
    return tuple(roles)


def _check_world(world: int, what: str) -> None:
    if world > MAX_LAYOUT_RANKS:
        raise InputError(f"{what} is {world:,} ranks, more than the {MAX_LAYOUT_RANKS:,} linkscope checks "
                         f"(the largest clusters have a few hundred thousand GPUs)")


def resolve_layout(
    sizes: Sequence[tuple[str, int]],
    capacity: int,
    order: str = DEFAULT_ORDER,
    mesh: Sequence[tuple[str, int]] | None = None,
    etp: int | None = None,
    vpp: int = 1,
    mesh_roles: Sequence[tuple[str, str]] = (),
    optimizer_instances: int = 1,
) -> Layout:
    """Resolve sizes against a cluster of `capacity` GPUs: infer dp, check that the groups can be built.

    Raises InputError (with the framework's own reason where it has one) for unknown dimensions,
    sizes that do not multiply to the world size or do not divide it, and a world larger than
    the cluster. Layouts Megatron builds but then refuses are not errors here: see megatron_refusal.
    """
    given: dict[str, int] = {}
    for name, value in sizes:
        if name not in DIMENSIONS:
            raise InputError(f"unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
        if value < 1:
            raise InputError(f"--{name}: must be at least 1, got {value}")
        given[name] = value
    if vpp < 1:
        raise InputError(f"--vpp: must be at least 1, got {vpp}")
    if mesh is not None:
        if etp is not None or vpp > 1 or optimizer_instances > 1:
            raise InputError("--etp, --vpp and --optimizer-instances are Megatron settings: give them with --order, "
                             "not --mesh")
        return _resolve_mesh(given, tuple(mesh), capacity, dict(mesh_roles))
    if mesh_roles:
        raise InputError("--mesh-roles names roles of --mesh dimensions: give --mesh too")
    names = parse_order(order)
    tp, cp, ep, pp = (given.get(dim, 1) for dim in ("tp", "cp", "ep", "pp"))
    fixed = tp * cp * pp
    if "dp" in given:
        dp = given["dp"]
    else:
        if capacity % fixed:
            raise InputError(_cannot_infer_dp(fixed, capacity))
        dp = capacity // fixed
    world = fixed * dp
    _check_world(world, "the layout")
    if world > capacity:
        raise InputError(f"world size tp*cp*dp*pp = {world} does not fit the cluster of {capacity} GPUs (raise --nodes)")
    expert_tp = tp if etp is None else etp
    expert_model = expert_tp * ep * pp
    if world % expert_model:
        raise InputError(f"world_size ({world}) is not divisible by expert_tensor_model_pipeline_parallel size "
                         f"etp*ep*pp = {expert_tp}*{ep}*{pp} = {expert_model} (Megatron's rule): change --ep or --etp")
    if vpp > 1 and pp < 2:
        raise InputError("--vpp: pipeline-model-parallel size should be greater than 1 with interleaved schedule "
                         "(Megatron's rule): give --pp 2 or more")
    resolved = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
    for dim, value in resolved.items():
        if value > 1 and dim not in names:
            raise InputError(f"--order {order!r} leaves out {dim}, whose size is {value}")
    if ep > 1 and "ep" not in names:
        raise InputError(f"--order {order!r} leaves out ep, whose size is {ep}")
    if expert_tp > 1 and "tp" not in names:
        raise InputError(f"--order {order!r} leaves out tp, which the expert layers use (--etp {expert_tp})")
    if world // expert_model > 1 and "dp" not in names:
        raise InputError(f"--order {order!r} leaves out dp, which the expert layers use (expert dp "
                         f"{world // expert_model}; Megatron's expert grid has no cp, so its dp takes cp's ranks)")
    if optimizer_instances < 1:
        raise InputError(f"--optimizer-instances: must be at least 1, got {optimizer_instances}")
    if (dp * cp) % optimizer_instances:
        raise InputError(f"--optimizer-instances {optimizer_instances}: Data parallel size should be divisible by "
                         f"partial DistOpt shard factor (dp*cp = {dp * cp}, Megatron's rule)")
    if (world // expert_model) % optimizer_instances:
        raise InputError(f"--optimizer-instances {optimizer_instances}: Expert data parallel size should be divisible "
                         f"by partial DistOpt shard factor (expert dp = {world // expert_model}, Megatron's rule)")
    every = (*((dim, resolved[dim]) for dim in DIMENSIONS), ("etp", expert_tp))
    return Layout(every, world, order=names, vpp=vpp, optimizer_instances=optimizer_instances)


def _cannot_infer_dp(fixed: int, capacity: int) -> str:
    """Why dp cannot be inferred, with fixes that do help: sizes that divide the cluster, or a cluster that fits."""
    fits = [size for size in range(1, capacity + 1) if capacity % size == 0]
    return (f"cannot infer dp: tp*cp*pp = {fixed} does not divide the {capacity} GPUs of the cluster "
            f"(tp*cp*pp must be one of {', '.join(map(str, fits[:12]))}{', ...' if len(fits) > 12 else ''}, "
            f"or run on a multiple of {fixed} GPUs with --nodes or --visible-devices)")


def _resolve_mesh(given: dict[str, int], mesh: tuple[tuple[str, int], ...], capacity: int,
                  roles_given: dict[str, str]) -> Layout:
    mesh_sizes = dict(mesh)
    for name in roles_given:
        if name not in mesh_sizes:
            raise InputError(f"--mesh-roles names {name!r}, which is not a dimension of --mesh")
    dims: list[MeshDim] = []
    for name, size in mesh:
        if name in DERIVED_GROUPS:
            raise InputError(f"--mesh: {name!r} is the name of a group linkscope derives; call the dimension otherwise")
        role = roles_given.get(name, MESH_DEFAULT_ROLES.get(name))
        if role is None:
            raise InputError(f"--mesh: no role for dimension {name!r}: give --mesh-roles {name}=ROLE "
                             f"(one of {', '.join(MESH_ROLES)})")
        dims.append(MeshDim(name, size, role))
    by_role = {role: math.prod(dim.size for dim in dims if dim.role == role) for role in MESH_ROLES}
    canonical = {"tp": by_role["tp"], "cp": by_role["cp"], "ep": by_role["ep"], "pp": by_role["pp"],
                 "dp": by_role["dp"] * by_role["fsdp"] * by_role["replicate"]}
    for name, value in given.items():
        if name in mesh_sizes and mesh_sizes[name] != value:
            raise InputError(f"--{name} {value} contradicts --mesh {name}={mesh_sizes[name]}")
        if name not in mesh_sizes and value > 1 and canonical[name] != value:
            raise InputError(f"--{name} {value} is not a dimension of --mesh (add {name}=... to it)")
    world = math.prod(mesh_sizes.values())
    _check_world(world, "--mesh")
    if world > capacity:
        raise InputError(f"--mesh world size {world} does not fit the cluster of {capacity} GPUs (raise --nodes)")
    sizes = (*((dim, canonical[dim]) for dim in DIMENSIONS), ("etp", canonical["tp"]))
    return Layout(sizes, world, mesh=tuple(dims))
