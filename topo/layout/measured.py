"""Where measured ranks ran: the one placement every judgement of a measured figure prices on.

A measured collective (an nccl-tests table, a bench sweep, a trace's calls) names its ranks, and sometimes
their hosts and devices (`# Rank 3 ... on fs-207 device 3 [0x5d]`). Before anything is priced its ranks are
placed once on the SOURCE machine, from what the evidence holds:
- rank lines (or launcher hosts) that account for every rank: that many hosts x GPUs per host, on the SOURCE
  cluster's hosts of those names where it has them all; a run whose hosts all fit one multi-host NVLink domain
  of the snapshot (GB200 NVL72) is one node of that domain;
- else the hosts the user says (`--nodes`), in torchrun block or Slurm cyclic order;
- otherwise assumed: every rank on one host (or NVLink domain) of the SOURCE when they fit there, else whole
  hosts of it in torchrun block order.
What was assumed is said in one line (:attr:`MeasuredPlacement.line`), and the placement is priced by the
same :func:`topo.layout.placement.place_ranks` and cost model `linkscope estimate` uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.layout.placement import Distribution, Placement, cluster_hosts, host_classes, place_ranks
from linkscope.topo.machine.cluster import domain_hosts, is_domain
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot


@frozen
class MeasuredPlacement:
    """The measured ranks placed on the SOURCE, or why they could not be."""

    ranks: int
    placement: Placement | None
    nodes: int = 0
    gpus_per_node: int = 0
    basis: str = ""
    """Where the placement comes from, for people: `from the rank lines`, `assumed: ...`."""
    assumed: bool = True
    """False only when the evidence names every rank's host."""

    @property
    def line(self) -> str:
        """One line for people: `16 ranks: 2 hosts x 8 GPUs from the rank lines`."""
        if self.placement is None:
            return f"{self.ranks} rank{'s' if self.ranks != 1 else ''}: not placed ({self.basis})"
        unit = "NVLink domain" if is_domain(self.placement.hosts[0]) else "host"
        plural = "s" if self.nodes != 1 else ""
        return f"{self.ranks} ranks: {self.nodes} {unit}{plural} x {self.gpus_per_node} GPUs {self.basis}"

    def to_json(self) -> dict[str, object]:
        """The JSON form (`placement` of an expected row)."""
        return {"ranks": self.ranks, "nodes": self.nodes if self.placement else None,
                "gpus_per_node": self.gpus_per_node if self.placement else None, "assumed": self.assumed,
                "line": self.line}


def place_measured(ranks: int, snapshot: Snapshot, hosts: Sequence[str] = (), gpus_per_host: int | None = None, *,
                   nodes: int | None = None, distribution: Distribution = "block", devices: Sequence[int] | None = None,
                   evidence: str = "the rank lines", named_by: str = "the file names") -> MeasuredPlacement:
    """Place `ranks` measured ranks on `snapshot`. `hosts` are the distinct host names the evidence gives for them
    and `gpus_per_host` the most ranks it shows on one host; both count only when they cover every rank (said as
    `from {evidence}`; else as `{named_by} no hosts`). `nodes` is how many hosts the user says the run used
    (`--nodes`), `distribution` how ranks were dealt to them and `devices` the CUDA devices each host gave the run
    (CUDA_VISIBLE_DEVICES). Kept on the (immutable) snapshot per question, so the rows of one file, which mostly
    share their ranks, are placed once."""
    key = (ranks, tuple(hosts), gpus_per_host, nodes, distribution, None if devices is None else tuple(devices),
           evidence, named_by)
    placed: dict[object, MeasuredPlacement] = snapshot.__dict__.setdefault("_measured_placements", {})
    if key not in placed:
        placed[key] = _place(ranks, snapshot, hosts, gpus_per_host, nodes, distribution, devices, evidence, named_by)
    return placed[key]


def _place(ranks: int, snapshot: Snapshot, hosts: Sequence[str], gpus_per_host: int | None, nodes: int | None,
           distribution: Distribution, devices: Sequence[int] | None, evidence: str, named_by: str) -> MeasuredPlacement:
    domains = domain_hosts(snapshot) if snapshot.hosts else ()
    if not domains or not domains[0].gpus:
        return MeasuredPlacement(ranks, None, basis="the SOURCE has no GPUs")
    if ranks < 2:
        return MeasuredPlacement(ranks, None, basis="fewer than 2 ranks")
    size = len(domains[0].gpus)
    multi_host_domain = is_domain(domains[0])
    covered = bool(hosts) and gpus_per_host is not None and len(hosts) * gpus_per_host == ranks
    if covered and gpus_per_host is not None:
        known: tuple[int, int, str] | None = (len(hosts), gpus_per_host, f"from {evidence}")
    elif nodes is not None:
        if nodes > ranks:
            return MeasuredPlacement(ranks, None, basis=f"--nodes {nodes} is more hosts than the {ranks} ranks")
        known = (nodes, -(-ranks // nodes), f"from --nodes {nodes}")
    else:
        known = None
    order = "torchrun block order" if distribution == "block" else "Slurm cyclic order"
    if known is not None:
        count, per_host, said = known
        if multi_host_domain and ranks <= size:
            nodes, per_node = 1, ranks
            basis = f"{said} ({count} hosts x {per_host} GPUs), inside one NVLink domain of the SOURCE"
        else:
            nodes, per_node, basis = count, per_host, said
        assumed = False
    else:
        said = f"{named_by} {len(hosts)} host(s) for {ranks} ranks" if hosts else f"{named_by} no hosts"
        room = min(size, len(devices)) if devices is not None else size
        if ranks <= room:
            nodes, per_node = 1, ranks
        elif ranks % room == 0:
            nodes, per_node = ranks // room, room
        else:
            return MeasuredPlacement(ranks, None, basis=f"{ranks} ranks do not fill whole {room}-GPU hosts of the "
                                     f"SOURCE and {said}")
        basis, assumed = f"assumed ({said}; {order} on the SOURCE)", True
    if per_node > size:
        return MeasuredPlacement(ranks, None, basis=f"{per_node} GPUs per host measured, the SOURCE has {size}")
    if devices is not None and per_node > len(devices):
        return MeasuredPlacement(ranks, None, basis=f"{per_node} GPUs per host measured, the visible devices are "
                                 f"{len(devices)}")
    named = _named_hosts(domains, hosts) if covered and not multi_host_domain and len(domains) > 1 else None
    if named is not None:  # the cluster's own hosts of those names, odd ones included
        cluster, classes = named, host_classes(named)
        basis += ", on the SOURCE's hosts of those names"
    else:
        try:
            cluster, classes = cluster_hosts(snapshot, nodes)
        except InputError as error:
            if basis.startswith("from --nodes"):  # what the user said does not fit the SOURCE: say so
                return MeasuredPlacement(ranks, None, basis=str(error))
            cluster, classes = (domains[0],) * nodes, (0,) * nodes
            if len(domains) > 1:
                basis += f"; priced on hosts like the SOURCE's first, {domains[0].hostname}"
    used = list(devices[:per_node]) if devices is not None else [gpu.index for gpu in cluster[0].gpus[:per_node]]
    try:
        placement = place_ranks(cluster, classes, ranks, distribution, used)
    except InputError as error:
        return MeasuredPlacement(ranks, None, basis=str(error))
    return MeasuredPlacement(ranks, placement, nodes, per_node, basis, assumed)


def _named_hosts(cluster: Sequence[Host], names: Sequence[str]) -> tuple[Host, ...] | None:
    """The hosts of `cluster` the evidence names, in its order; None unless the cluster has every one."""
    by_name = {host.hostname: host for host in cluster}
    named = tuple(by_name[name] for name in names if name in by_name)
    return named if len(named) == len(names) else None
