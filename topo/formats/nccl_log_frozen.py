"""What a :class:`~topo.formats.nccl_log_reader.LogReader` has gathered, settled and frozen once the log is read:
provisional communicator keys renamed to the commId they turned out to be, then every table as an
:class:`~topo.formats.nccl_log_model.NcclLog`.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.nccl_log_books import messages, rank_of
from linkscope.topo.formats.nccl_log_lines import channel_triple, transport_class
from linkscope.topo.formats.nccl_log_model import Communicator, Edge, NcclLog

if TYPE_CHECKING:
    from linkscope.topo.formats.nccl_log_reader import LogReader


def settle_communicators(reader: LogReader) -> None:
    """Rename provisional keys that turned out to be one commId; give a fragment's unattributed
    lines to the communicator when the log shows exactly one."""
    rename: dict[str | None, str | None] = {key: next(iter(ids)) for key, ids in reader.aliases.items() if len(ids) == 1}
    known = {rename.get(key, key) for key in reader.comm_sizes}
    if len(known) == 1:
        only = next(iter(known))
        size = reader.comm_sizes.get(only or "", reader.comm_sizes.get(next(iter(reader.comm_sizes)), (None, None)))[0]
        highest = max([rank for comm, rank in reader.ranks if comm is None] + [-1])
        if size is None or highest < size:
            rename[None] = only
    if not rename or (list(rename) == [None] and None not in map(
            itemgetter(0), chain(reader.ranks, reader.edges, reader.rings, reader.trees))):
        return  # nothing to rename: the tables stay as they are

    def renamed(key: str | None) -> str | None:
        return rename.get(key, key)

    ranks: dict[tuple[str | None, int], dict[str, object]] = {}
    for (comm, rank), facts in reader.ranks.items():
        merged = ranks.setdefault((renamed(comm), rank), {})
        for name, value in facts.items():
            merged.setdefault(name, value)
    reader.ranks = ranks
    reader.edges = {(renamed(key[0]), *key[1:]): number for key, number in reader.edges.items()}
    reader.rings = {(renamed(comm), channel): order for (comm, channel), order in reader.rings.items()}
    reader.trees = {(renamed(comm), rank, channel): tree for (comm, rank, channel), tree in reader.trees.items()}
    reader.channel_counts = {renamed(key) or key: counts for key, counts in reader.channel_counts.items()}
    for key, target in rename.items():
        if key is not None and target is not None and key in reader.comm_sizes:
            nranks, nnodes = reader.comm_sizes.pop(key)
            known_nranks, known_nnodes = reader.comm_sizes.get(target, (nranks, nnodes))
            reader.comm_sizes[target] = (known_nranks, known_nnodes if known_nnodes is not None else nnodes)


EdgeKey = tuple[str | None, int, int | None, int, str | None, str]
"""(comm, src, dst, channel, side, detail): a connection as the reader keeps it."""
_COMM, _DST = itemgetter(0), itemgetter(2)
_BY_COMM_CHANNEL_SRC_DST = itemgetter(0, 3, 1, 2)
"""An edge's (comm, channel, src, dst): the order of :attr:`NcclLog.edges` where none is None."""


def frozen_edges(edges: dict[EdgeKey, int]) -> tuple[Edge, ...]:
    """The connections, each with the first line that showed it, ordered by communicator, channel, source and
    destination (no communicator first, no destination or destination 0 before 1), else as read."""
    transport_of = {detail: transport_class(detail) or "" for detail in {key[5] for key in edges}}
    new = tuple.__new__  # Edge(*row), without a Python call for each of 100,000
    built = [new(Edge, (comm, src, dst, channel, transport_of[detail], detail, side, number))
             for (comm, src, dst, channel, side, detail), number in edges.items()]
    if None in map(_COMM, built) or None in map(_DST, built):  # (Edge fields: comm, src, dst, channel, ...)
        built.sort(key=lambda edge: (edge.comm or "", edge.channel, edge.src, edge.dst or -1))
    else:  # the same order: no None to place, and destination 0 is below every other either way
        built.sort(key=_BY_COMM_CHANNEL_SRC_DST)
    return tuple(built)


def frozen_log(reader: LogReader) -> NcclLog:
    """The log as frozen values, once every line is read (the communicators settled first); InputError when no
    NCCL line read cleanly."""
    settle_communicators(reader)
    topologies, graphs = reader.topology.frozen(reader.name)
    fragments = reader.hosts.place_ranks(reader.ranks, reader.comm_sizes)
    if reader.nccl_lines == 0:
        if reader.skipped_count:
            raise InputError(f"{reader.name}:{reader.skipped[0]}: no NCCL line reads cleanly "
                             f"({reader.skipped_count} unreadable)")
        raise InputError(f"{reader.name}: no NCCL_DEBUG=INFO lines (`host:pid:tid [dev] NCCL INFO ...`) found")
    ranks = tuple(sorted((rank_of(comm, rank, facts) for (comm, rank), facts in reader.ranks.items()),
                         key=lambda item: (item.comm or "", item.rank)))
    comm_keys = sorted({key for key in reader.comm_sizes} | {comm for comm, _ in reader.rings if comm is not None})
    communicators = tuple(
        Communicator(
            key=key,
            nranks=reader.comm_sizes.get(key, (None, None))[0],
            nnodes=reader.comm_sizes.get(key, (None, None))[1],
            rings=tuple(sorted((channel, order) for (comm, channel), order in reader.rings.items() if comm == key)),
            trees=tuple(sorted((rank, channel, children, parent)
                               for (comm, rank, channel), (children, parent) in reader.trees.items() if comm == key)),
            channels=channel_triple(reader.channel_counts.get(key, ())),
        )
        for key in comm_keys
    )
    loose_rings = tuple(sorted((channel, order) for (comm, channel), order in reader.rings.items() if comm is None))
    loose_trees = tuple(sorted((rank, channel, children, parent)
                               for (comm, rank, channel), (children, parent) in reader.trees.items() if comm is None))
    if loose_rings or loose_trees:
        communicators += (Communicator(key="?", nranks=None, nnodes=None, rings=loose_rings, trees=loose_trees),)
    return NcclLog(
        name=reader.name, version=reader.version, communicators=communicators, ranks=ranks,
        edges=frozen_edges(reader.edges),
        env=tuple(reader.env.items()),
        warnings=messages(reader.warnings), errors=messages(reader.errors),
        lines=reader.lines, nccl_lines=reader.nccl_lines,
        skipped_lines=tuple(reader.skipped), skipped_count=reader.skipped_count, edges_dropped=reader.edges_dropped,
        hosts=reader.hosts.names(fragments), nvls=reader.nvls.frozen(), topologies=topologies, graphs=graphs,
    )
