"""Where measured ranks ran: the one placement every judgement of a measured figure prices on.

A measured collective (an nccl-tests table, a bench sweep, a trace's calls) names its ranks, and sometimes
their hosts and devices (`# Rank 3 ... on fs-207 device 3 [0x5d]`). Before anything is priced its ranks are
placed once on the SOURCE machine, from what the evidence holds:
- rank lines (or launcher hosts) that account for every rank: that many hosts x GPUs per host; a run whose
  hosts all fit one multi-host NVLink domain of the snapshot (GB200 NVL72) is one node of that domain;
- otherwise assumed: every rank on one host (or NVLink domain) of the SOURCE when they fit there, else whole
  hosts of it in torchrun block order.
What was assumed is said in one line (:attr:`MeasuredPlacement.line`), and the placement is priced by the
same :func:`topo.layout.placement.place_ranks` and cost model `linkscope estimate` uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from linkscope.topo.common.errors import InputError
from linkscope.topo.layout.placement import Placement, cluster_hosts, place_ranks
from linkscope.topo.machine.cluster import domain_hosts, is_domain
from linkscope.topo.model.snapshot import Snapshot


@dataclass(frozen=True)
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
            return f"{self.ranks} ranks: not placed ({self.basis})"
        unit = "NVLink domain" if is_domain(self.placement.hosts[0]) else "host"
        plural = "s" if self.nodes != 1 else ""
        return f"{self.ranks} ranks: {self.nodes} {unit}{plural} x {self.gpus_per_node} GPUs {self.basis}"

    def to_json(self) -> dict[str, object]:
        """The JSON form (`placement` of an expected row)."""
        return {"ranks": self.ranks, "nodes": self.nodes if self.placement else None,
                "gpus_per_node": self.gpus_per_node if self.placement else None, "assumed": self.assumed,
                "line": self.line}


def place_measured(ranks: int, snapshot: Snapshot, hosts: Sequence[str] = (),
                   gpus_per_host: int | None = None) -> MeasuredPlacement:
    """Place `ranks` measured ranks on `snapshot`. `hosts` are the distinct host names the evidence gives for
    them and `gpus_per_host` the most ranks it shows on one host; both count only when they cover every rank."""
    domains = domain_hosts(snapshot) if snapshot.hosts else ()
    if not domains or not domains[0].gpus:
        return MeasuredPlacement(ranks, None, basis="the SOURCE has no GPUs")
    if ranks < 2:
        return MeasuredPlacement(ranks, None, basis="fewer than 2 ranks")
    size = len(domains[0].gpus)
    multi_host_domain = is_domain(domains[0])
    covered = bool(hosts) and gpus_per_host is not None and len(hosts) * gpus_per_host == ranks
    if covered and gpus_per_host is not None:
        if multi_host_domain and ranks <= size:
            nodes, per_node = 1, ranks
            basis = (f"from the rank lines ({len(hosts)} hosts x {gpus_per_host} GPUs), inside one NVLink domain "
                     "of the SOURCE")
        else:
            nodes, per_node, basis = len(hosts), gpus_per_host, "from the rank lines"
        assumed = False
    else:
        said = f"the file names {len(hosts)} host(s) for {ranks} ranks" if hosts else "the file names no hosts"
        if ranks <= size:
            nodes, per_node = 1, ranks
        elif ranks % size == 0:
            nodes, per_node = ranks // size, size
        else:
            return MeasuredPlacement(ranks, None, basis=f"{ranks} ranks do not fill whole {size}-GPU hosts of the "
                                     f"SOURCE and {said}")
        basis, assumed = f"assumed ({said}; torchrun block order on the SOURCE)", True
    if per_node > size:
        return MeasuredPlacement(ranks, None, basis=f"{per_node} GPUs per host measured, the SOURCE has {size}")
    try:
        cluster, classes = cluster_hosts(snapshot, nodes)
    except InputError:
        cluster, classes = (domains[0],) * nodes, (0,) * nodes
    devices = [gpu.index for gpu in cluster[0].gpus[:per_node]]
    try:
        placement = place_ranks(cluster, classes, nodes * per_node, "block", devices)
    except InputError as error:
        return MeasuredPlacement(ranks, None, basis=str(error))
    return MeasuredPlacement(ranks, placement, nodes, per_node, basis, assumed)
