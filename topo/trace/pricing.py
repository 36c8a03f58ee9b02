"""Which group a traced collective ran over, and why a call cannot be priced against its links."""

from __future__ import annotations

from linkscope.topo.formats.trace_events import RankTrace, TraceCollective
from linkscope.topo.model.busbw import BUS_FACTOR_OPS


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
