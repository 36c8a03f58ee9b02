"""Which group a traced collective ran over, why a call cannot be priced against its links, and what the cost model
expects of one on the job's placed ranks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.trace_events import RankTrace, TraceCollective
from linkscope.topo.model.busbw import BUS_FACTOR_OPS

if TYPE_CHECKING:  # the cost model and the placement are loaded only when a machine is given (`trace --source`)
    from linkscope.topo.cost.expect import LimitedBy
    from linkscope.topo.cost.params import CostModel
    from linkscope.topo.layout.measured import MeasuredPlacement


@frozen
class Expected:
    """What the cost model expects for one collective on the links its group crosses."""

    time_us: float
    link: str
    half_bandwidth_bytes: float
    """Message size at which the link spends as long on latency as on bytes (alpha x beta)."""
    limited_by: LimitedBy = "unknown"
    """Which part of the group's path sets the expectation (as `import --expect` says it)."""
    path: tuple[str, ...] = ()
    """The link tokens of the group's path, e.g. `("NV18", "NET 8x mlx5_0 400 Gb/s")`."""


Pricer = Callable[[str, int, tuple[int, ...]], tuple[Expected | None, str | None]]
"""(op, size_bytes, group ranks) -> the expectation, or None and why the call could not be priced."""


def group_ranks(trace: RankTrace, call: TraceCollective) -> tuple[tuple[int, ...] | None, bool]:
    """The call's group and whether it is assumed: the ranks the trace names; else the whole job when the group is
    as large as the job's world size (the default process group); else, when the trace gives no group size at all
    (older PyTorch), the whole job assumed; else unknown."""
    if call.group_ranks is not None:
        return call.group_ranks, False
    world = trace.world_size
    if world is None or world < 2:
        return None, False
    if call.group_size == world:
        return tuple(range(world)), False
    if call.group_size is None:
        return tuple(range(world)), True
    return None, False


def why_not_priced(call: TraceCollective, ranks: tuple[int, ...] | None) -> str | None:
    """Why a call cannot be priced against its links, or None when it can."""
    if not call.on_device:
        # A call timed on the CPU ran over gloo (TCP), whatever GPU links its ranks' GPUs have: nothing to price it on.
        return ("known only from its CPU launch (no NCCL kernel in the trace)" if call.launch_only
                else "timed on the CPU (gloo over TCP, or no GPU kernel in the trace)")
    if call.op not in BUS_FACTOR_OPS:
        return "an op the cost model does not price"
    if not call.size_bytes:
        return "the trace gives no size (no record_param_comms In/Out msg nelems)"
    if ranks is None:
        return ("its process group's ranks are not in the trace (no pg_config) and its group is not the whole job "
                "(or the job's size is not known)")
    if len(ranks) < 2:
        return "a group of one rank"
    return None


def placed_pricer(placed: MeasuredPlacement, model: CostModel) -> Pricer:
    """A :data:`Pricer` over the job's ranks as placed on the machine: the group's links, priced by the cost model
    as `linkscope estimate` prices them; every call says why when the ranks could not be placed."""
    from linkscope.topo.cost.collectives import collective_cost
    from linkscope.topo.cost.expect import limited_by, link_path
    from linkscope.topo.cost.groups import GroupPricer

    placement = placed.placement
    if placement is None:
        unplaced = f"the job's ranks are not placed on the machine ({placed.basis})"
        return lambda op, size_bytes, ranks: (None, unplaced)
    groups = GroupPricer(placement, model)
    world = placement.world_size

    def price(op: str, size_bytes: int, ranks: tuple[int, ...]) -> tuple[Expected | None, str | None]:
        if any(rank < 0 or rank >= world for rank in ranks) or len(set(ranks)) != len(ranks):
            return None, f"its group's ranks are not all among the job's {world} placed ranks"
        links = groups.links(ranks)
        cost = collective_cost(op, links, size_bytes)
        if links.bottleneck_class == "NET":
            alpha_us, gbps = links.net_alpha_us, links.node_net_gbps
        else:
            alpha_us, gbps = links.intra_alpha_us, links.intra_gbps
        half = alpha_us * 1e-6 * gbps * 1e9 if math.isfinite(gbps) else 0.0
        return Expected(cost.time_s * 1e6, links.bottleneck_label, half, limited_by(links), link_path(links)), None

    return price
