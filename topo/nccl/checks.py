"""Findings over an NCCL log: the transports NCCL chose that cost bandwidth, and the variables that forced them.

| code | severity | when |
|---|---|---|
| `intra-host-shm` | warning | GPUs of one host connected through host memory (SHM): P2P is off or unsupported, 5-10x slower |
| `intra-host-net` | warning | GPUs of one host connected through the network transport |
| `net-socket` | warning | hosts connected over plain TCP sockets (`NET/Socket`) instead of RDMA |
| `net-no-gdr` | warning | an RDMA network without GPUDirect RDMA: every message is staged in host memory |
| `env-override` | warning / info | an `NCCL_*` variable that changes NCCL's paths (warning when it disables a transport) |
| `nccl-warn` | warning | a line NCCL logged as `NCCL WARN` |
| `snapshot-not-matched` | warning | `--snapshot` given, but no connection inside a host could be placed on it |

Hosts the log does not name are inferred where the evidence implies them: SHM or P2P between two ranks means they
share a host (:func:`implied_hosts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain, compress
from operator import attrgetter, eq
from typing import Any

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_FINDING_RANKS
from linkscope.topo.common.memo import remember_last
from linkscope.topo.formats.nccl_log_model import Edge, NcclLog, Rank
from linkscope.topo.health.environment import nccl_switch, setting_meaning
from linkscope.topo.model.findings import Finding

FINDING_CODES: tuple[str, ...] = (
    "intra-host-shm", "intra-host-net", "net-socket", "net-no-gdr", "env-override", "nccl-warn", "snapshot-not-matched",
)



@frozen
class NcclFinding(Finding):
    """One problem the log shows."""

    message: str
    ranks: tuple[int, ...]
    comm: str | None = None


IMPLIED_HOST = "(unnamed host: SHM/P2P between its ranks)"
"""The host name given to ranks the log names no host for, which SHM or P2P joins: those share a host."""
SAME_HOST_TRANSPORTS = ("SHM", "P2P")
HostsOf = Mapping[tuple[str | None, int], str]
"""(communicator, rank) -> host, as :func:`implied_hosts` gives it."""
"""Transports NCCL only uses between ranks of one host: either one between two ranks proves they share it."""
_TRANSPORT, _DETAIL = attrgetter("transport"), attrgetter("detail")
_COMM_SRC, _COMM_DST = attrgetter("comm", "src"), attrgetter("comm", "dst")
"""An edge's (communicator, rank) at each end: the keys of :data:`HostsOf`."""


def rank_hosts(log: NcclLog) -> dict[tuple[str | None, int], str]:
    """(communicator, rank) -> host, for ranks whose host the log names."""
    return {(rank.comm, rank.rank): rank.host for rank in log.ranks if rank.host is not None}


def implied_hosts(log: NcclLog) -> dict[tuple[str | None, int], str]:
    """(communicator, rank) -> host, for ranks whose host the log names or implies: SHM or P2P between two ranks
    means they share a host, so a rank without a host prefix joined that way to a named one is on that host, and
    ranks joined only to each other share one unnamed host (:data:`IMPLIED_HOST`)."""
    named = rank_hosts(log)
    same_host_edges = list(compress(log.edges, map(SAME_HOST_TRANSPORTS.__contains__, map(_TRANSPORT, log.edges))))
    if all(map(named.__contains__, chain(map(_COMM_SRC, same_host_edges), map(_COMM_DST, same_host_edges)))):
        return named  # every rank SHM or P2P joins is named: nothing to imply
    joined = [((edge.comm, edge.src), (edge.comm, edge.dst)) for edge in same_host_edges if edge.dst is not None]
    parent: dict[tuple[str | None, int], tuple[str | None, int]] = {}

    def root(key: tuple[str | None, int]) -> tuple[str | None, int]:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for one, other in joined:
        parent[root(one)] = root(other)
    groups: dict[tuple[str | None, int], list[tuple[str | None, int]]] = {}
    for key in list(parent):
        groups.setdefault(root(key), []).append(key)
    unnamed = [members for members in groups.values() if not any(member in named for member in members)]
    implied: dict[tuple[str | None, int], str] = {}
    for members in groups.values():
        known = {named[member] for member in members if member in named}
        if len(known) > 1:
            continue  # the log contradicts itself: leave those ranks as it names them
        if known:
            name = known.pop()
        else:
            number = unnamed.index(members)
            name = IMPLIED_HOST if len(unnamed) == 1 else f"{IMPLIED_HOST} #{number + 1}"
        implied.update({member: name for member in members if member not in named})
    return named | implied


def same_host(edge: Edge, hosts: HostsOf) -> bool | None:
    """Whether both ends of `edge` are on one host; None when a host is unknown."""
    if edge.dst is None:
        return None
    src, dst = hosts.get((edge.comm, edge.src)), hosts.get((edge.comm, edge.dst))
    if src is None or dst is None:
        return None
    return src == dst


@remember_last
def edges_on_one_host(log: NcclLog, hosts: HostsOf) -> tuple[bool | None, ...]:
    """:func:`same_host` of every connection of `log`, in its order (the findings, the counts and the JSON all ask),
    each end's host looked up at once."""
    src_hosts = list(map(hosts.get, map(_COMM_SRC, log.edges)))
    dst_hosts = list(map(hosts.get, map(_COMM_DST, log.edges)))  # (comm, None) of a CollNet line names no rank
    if None not in src_hosts and None not in dst_hosts:
        return tuple(map(eq, src_hosts, dst_hosts))
    return tuple(None if src is None or dst is None else src == dst for src, dst in zip(src_hosts, dst_hosts, strict=True))


def net_kind(detail: str) -> str:
    """The network's name in a NET detail (`IB`, `Socket`, `AWS Libfabric`, `IBext_v8`)."""
    parts = detail.split("/")
    return parts[1].strip() if len(parts) > 1 else ""


def nccl_findings(log: NcclLog, hosts: HostsOf | None = None) -> tuple[NcclFinding, ...]:
    """Every finding of `log`, grouped so that one cause gives one finding per communicator and host (`hosts`: its
    :func:`implied_hosts`, when the caller has them)."""
    hosts = implied_hosts(log) if hosts is None else hosts
    groups: dict[tuple[str, str | None, str], set[int]] = {}
    cases = list(zip(map(_TRANSPORT, log.edges), edges_on_one_host(log, hosts), map(_DETAIL, log.edges), strict=True))
    """What decides a connection's code: its transport, whether its ends share a host, its detail (a log repeats
    a few of these on every connection)."""
    code_of = {case: _edge_code(*case) for case in set(cases)}
    for edge, code in zip(log.edges, map(code_of.__getitem__, cases), strict=True):
        if code is None or edge.dst is None:
            continue
        where = hosts.get((edge.comm, edge.src), "") if code.startswith("intra-host") else net_kind(edge.detail)
        groups.setdefault((code, edge.comm, where), set()).update((edge.src, edge.dst))
    env = dict(log.env)
    findings = [_edge_finding(code, comm, where, ranks, env) for (code, comm, where), ranks in sorted(
        groups.items(), key=lambda item: (FINDING_CODES.index(item[0][0]), item[0][1] or "", item[0][2]))]
    for name, value in log.env:
        meaning = setting_meaning(name, value)
        if meaning is not None:
            findings.append(NcclFinding("env-override", meaning[1], f"{name}={value} is set in the environment: "
                                        f"{meaning[0]}", ()))
    for warning in log.warnings:
        times = f"{warning.count} times, first" if warning.count > 1 else "once,"
        where = f" on {warning.host}" if warning.host else ""
        findings.append(NcclFinding("nccl-warn", "warning",
                                    f"NCCL WARN ({times}{where} at line {warning.line}): {warning.text}", ()))
    return tuple(findings)


def _edge_code(transport: str, on_one_host: bool | None, detail: str) -> str | None:
    """The finding code of a connection over `transport` with `detail`, whose ends share a host (`on_one_host`), or
    None."""
    if transport == "SHM" and on_one_host:
        return "intra-host-shm"
    if transport != "NET":
        return None
    if on_one_host:
        return "intra-host-net"
    kind = net_kind(detail)
    if kind.lower() == "socket":
        return "net-socket"
    if "GDRDMA" not in detail:
        return "net-no-gdr"
    return None


def _edge_finding(code: str, comm: str | None, where: str, ranks: set[int], env: dict[str, str]) -> NcclFinding:
    listed = tuple(sorted(ranks))[:MAX_FINDING_RANKS]
    count = f"{len(ranks)} ranks"
    if code == "intra-host-shm":
        cause = " (NCCL_P2P_DISABLE is set)" if nccl_switch(env.get("NCCL_P2P_DISABLE", "")) else ""
        message = (f"{count} on host {where} connect through host shared memory (SHM), not P2P{cause}: "
                   "P2P between these GPUs is off or unsupported, typically 5-10x slower than NVLink")
    elif code == "intra-host-net":
        message = (f"{count} on host {where} connect through the network transport although they share a host: "
                   "P2P and SHM are off or unusable between them")
    elif code == "net-socket":
        message = (f"{count} connect across hosts over plain TCP sockets (NET/Socket): no RDMA NIC is used; "
                   "expect a fraction of InfiniBand/RoCE bandwidth")
    else:
        message = (f"{count} connect across hosts over {where or 'an RDMA network'} without GPUDirect RDMA: "
                   "every transfer is staged in host memory (check nvidia-peermem / dma-buf)")
    return NcclFinding(code, "warning", message, listed, comm)


def judged_counts(log: NcclLog, placed_on_snapshot: int | None = None,
                  hosts: HostsOf | None = None) -> dict[str, int | None]:
    """The `judged` object of `nccl-log --json`: connections read, those whose ends' hosts are known (named or
    implied) and not, and with --snapshot those laid on its links (None without one)."""
    hosts = implied_hosts(log) if hosts is None else hosts
    known = len(log.edges) - edges_on_one_host(log, hosts).count(None)
    return {"connections": len(log.edges), "hosts_known": known, "hosts_unknown": len(log.edges) - known,
            "placed_on_snapshot": placed_on_snapshot}


def not_placed_finding(log: NcclLog, placed: int, snapshot_name: str) -> NcclFinding | None:
    """`snapshot-not-matched` (warning) when --snapshot was given, the log has connections inside a host, and none
    could be laid on the snapshot: the links were not judged, which is never clean."""
    hosts = implied_hosts(log)
    inside = edges_on_one_host(log, hosts).count(True)
    if placed or not inside:
        return None
    return NcclFinding("snapshot-not-matched", "warning",
                       f"none of the {inside} connection(s) inside a host could be placed on {snapshot_name} (hosts, "
                       "bus ids or device numbers do not match): the links they ride were not judged; give the "
                       "snapshot of the machine the log came from", ())


def report_json(log: NcclLog, findings: tuple[NcclFinding, ...], hosts: HostsOf | None = None) -> dict[str, Any]:
    """The `nccl-log --json` object: `ranks`, `edges`, `findings`, with version, communicators and counts."""
    hosts = implied_hosts(log) if hosts is None else hosts
    return {
        "source": log.name,
        "version": log.version,
        "communicators": [{"comm": comm.key, "nranks": comm.nranks, "nnodes": comm.nnodes,
                           "coll_channels": comm.channels[0], "collnet_channels": comm.channels[1],
                           "nvls_channels": comm.channels[2],
                           "rings": [{"channel": channel, "order": list(order)} for channel, order in comm.rings],
                           "trees": [{"rank": rank, "channel": channel, "children": list(children), "parent": parent}
                                     for rank, channel, children, parent in comm.trees]}
                          for comm in log.communicators],
        "hosts": list(log.hosts),
        "nvls": {"used": log.nvls.used, "channels": log.nvls.channels, "tree": log.nvls.tree,
                 "setups": [{"comm": setup.comm, "rank": setup.rank, "host": setup.host, "head_rank": setup.head_rank,
                             "nheads": setup.nheads, "line": setup.line} for setup in log.nvls.setups],
                 "multicast": [{"host": host, "cuda_dev": dev, "available": ok} for host, dev, ok in log.nvls.multicast]},
        "ranks": [_rank_json(rank) for rank in log.ranks],
        "edges": [{"comm": comm, "src": src, "dst": dst, "channel": channel, "transport": transport, "detail": detail,
                   "side": side, "same_host": on_one_host, "line": line}
                  for (comm, src, dst, channel, transport, detail, side, line), on_one_host
                  in zip(log.edges, edges_on_one_host(log, hosts), strict=True)],
        "env": {name: value for name, value in log.env},
        "warnings": [{"text": item.text, "host": item.host, "line": item.line, "count": item.count} for item in log.warnings],
        "errors": [{"text": item.text, "host": item.host, "line": item.line, "count": item.count} for item in log.errors],
        "findings": [finding.to_json() for finding in findings],
        "lines": log.lines,
        "nccl_lines": log.nccl_lines,
        "skipped_lines": {"count": log.skipped_count, "first": list(log.skipped_lines)},
        "edges_dropped": log.edges_dropped,
    }


def _rank_json(rank: Rank) -> dict[str, Any]:
    return {"comm": rank.comm, "rank": rank.rank, "host": rank.host, "pid": rank.pid, "cuda_dev": rank.cuda_dev,
            "nvml_dev": rank.nvml_dev, "bus_id": rank.bus_id, "device_index": rank.device_index}
