"""Open profiler traces as users have them (files, .gz, directories) and place their ranks on a machine;
shared by `linkscope trace` and the app's Steps tab."""

from __future__ import annotations

import gzip
import io
import os
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.files import open_input
from linkscope.topo.common.limits import MAX_TRACE_CHARS
from linkscope.topo.formats.trace import read_rank_trace
from linkscope.topo.formats.trace_events import RankTrace

if TYPE_CHECKING:  # placing the ranks on a machine (`trace --source`) loads the layout modules when it is asked for
    from linkscope.topo.layout.measured import MeasuredPlacement
    from linkscope.topo.layout.placement import Distribution
    from linkscope.topo.model.snapshot import Snapshot

TRACE_SUFFIXES = (".json", ".json.gz")


TORCH_TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
"""How torch.profiler's tensorboard_trace_handler names the traces it writes."""


def trace_paths(arguments: Sequence[str]) -> list[str]:
    """The trace files named: files as given, directories expanded to their .json/.json.gz files (sorted); a
    directory holding tensorboard_trace_handler's `*.pt.trace.json[.gz]` files gives those only, so a config or
    results JSON beside them is not read as a trace."""
    paths: list[str] = []
    for argument in arguments:
        if os.path.isdir(argument):
            names = sorted(name for name in os.listdir(argument) if name.endswith(TRACE_SUFFIXES))
            torch_named = [name for name in names if name.endswith(TORCH_TRACE_SUFFIXES)]
            found = [os.path.join(argument, name) for name in torch_named or names]
            if not found:
                raise InputError(f"{argument}: no .json or .json.gz trace files in this directory")
            paths.extend(found)
        else:
            paths.append(argument)
    return paths


def read_trace_file(path: str) -> RankTrace:
    """One rank's trace from a .json or .json.gz file (detected by content); one InputError line on failure."""
    raw = open_input(path)
    with raw:
        try:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            binary: Any = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
            text = io.TextIOWrapper(binary, encoding="utf-8-sig")  # a byte-order mark, as some editors save, is skipped
            return read_rank_trace(text, path, MAX_TRACE_CHARS)
        except (gzip.BadGzipFile, EOFError, OSError) as exc:
            raise InputError(f"{path}: not a readable trace ({type(exc).__name__}: {str(exc)[:100]})") from None


def place_traces(snapshot: Snapshot, traces: Sequence[RankTrace], nodes: int | None = None,
                 distribution: Distribution = "block", visible_devices: str | None = None) -> MeasuredPlacement:
    """Where the traced job's ranks ran on `snapshot` (:func:`topo.layout.measured.place_measured`, the one placement
    of every measured figure): its world size from `distributedInfo` (or the largest rank a group names), its hosts
    from the traces when every rank's trace names one, else as `nodes` says or assumed, and said in one line."""
    from linkscope.topo.layout.measured import place_measured
    from linkscope.topo.layout.placement import parse_visible_devices

    world = max((t.world_size or 0 for t in traces), default=0)
    world = max(world, 1 + max((r for t in traces for c in t.collectives for r in (c.group_ranks or ())), default=0))
    hosts: tuple[str, ...] = ()
    per_host: int | None = None
    host_of = {t.rank: t.host for t in traces if t.rank is not None and t.host}
    if world and set(host_of) == set(range(world)):  # every rank's trace says its host: the hosts are known
        counts = Counter(host_of.values())
        hosts, per_host = tuple(counts), max(counts.values())
    visible = parse_visible_devices(visible_devices) if visible_devices else None
    return place_measured(world, snapshot, hosts, per_host, nodes=nodes, distribution=distribution, devices=visible,
                          evidence="the traces' hosts", named_by="the traces name")
