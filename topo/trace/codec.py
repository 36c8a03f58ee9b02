"""A read trace (`RankTrace`) as JSON and back, exactly: how trace-reading workers hand their results over.

Every field keeps its type through the round trip (tuples come back as tuples, floats as floats),
so a trace read in a worker process equals the same trace read in this one.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from linkscope.topo.formats.trace_events import RankTrace, TraceCollective, TraceStep

_SCALARS = tuple(f.name for f in fields(RankTrace) if f.name not in ("collectives", "steps", "groups"))
_COLLECTIVE_FIELDS = tuple(f.name for f in fields(TraceCollective))
_STEP_FIELDS = tuple(f.name for f in fields(TraceStep))


_RANKS_AT = _COLLECTIVE_FIELDS.index("group_ranks")


def rank_trace_to_json(trace: RankTrace) -> dict[str, Any]:
    """A JSON-ready dict of `trace`; collectives and steps as lists of their fields in declaration order.

    A call's group ranks are written once per distinct group (`rank_lists`) and named by their index: a
    world-sized group repeated on every call would make the reply many times the size of the trace's facts.
    """
    document = {key: getattr(trace, key) for key in _SCALARS}
    rank_lists: dict[tuple[int, ...], int] = {}
    collectives = []
    for call in trace.collectives:
        values = [getattr(call, name) for name in _COLLECTIVE_FIELDS]
        if call.group_ranks is not None:
            values[_RANKS_AT] = rank_lists.setdefault(call.group_ranks, len(rank_lists))
        collectives.append(values)
    document["collectives"] = collectives
    document["rank_lists"] = list(rank_lists)
    document["steps"] = [[getattr(s, name) for name in _STEP_FIELDS] for s in trace.steps]
    document["groups"] = dict(trace.groups)
    return document


def rank_trace_from_json(document: dict[str, Any]) -> RankTrace:
    """The `RankTrace` that `rank_trace_to_json` wrote; TypeError or ValueError when the dict is not one."""
    rank_lists = [tuple(ranks) for ranks in document["rank_lists"]]
    collectives = []
    for values in document["collectives"]:
        index = values[_RANKS_AT]
        collective = TraceCollective(*values)
        collectives.append(collective if index is None else replace(collective, group_ranks=rank_lists[int(index)]))
    steps = tuple(TraceStep(*values) for values in document["steps"])
    groups = {str(name): tuple(ranks) for name, ranks in document["groups"].items()}
    scalars: dict[str, Any] = {key: tuple(document[key]) if isinstance(document[key], list) else document[key]
                               for key in _SCALARS}
    return RankTrace(**scalars, collectives=tuple(collectives), steps=steps, groups=groups)

