"""What benchmarks measured, ours or imported from other tools: peer and host copies, collective sweeps.
"""

from __future__ import annotations

from linkscope.topo.common.frozen import frozen


@frozen
class PeerCopy:
    """A measured copy between two GPUs of one host (bench p2p, nvbandwidth, p2pBandwidthLatencyTest)."""

    src: int
    dst: int
    size_bytes: int | None = None
    unidir_gbps: float | None = None
    bidir_gbps: float | None = None
    latency_us: float | None = None
    p2p_enabled: bool | None = None
    verified: bool | None = None
    """True when the copied data was checked and correct, False when it was wrong."""
    host: str | None = None


@frozen
class HostCopy:
    """A measured host<->GPU copy from pinned memory on a given NUMA node."""

    gpu: int
    direction: str
    """`h2d` or `d2h`."""
    numa_node: int | None
    size_bytes: int | None
    """None when the source does not say (nvbandwidth prints no buffer size)."""
    gbps: float
    host: str | None = None
    verified: bool | None = None
    """True when the copied data was checked and correct, False when it was wrong."""
    local: bool | None = None
    """True when the pinned memory sat on the GPU's own NUMA node."""


@frozen
class CollectiveResult:
    """One row of a collective sweep, as nccl-tests reports it."""

    op: str
    """`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast`, `reduce` or `send_recv`."""
    size_bytes: int
    dtype: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    nranks: int | None
    """Ranks in the group; None when the source does not say."""
    wrong: int | None = None
    ranks: tuple[int, ...] = ()
    """Global ranks of the group that ran it; empty when the whole world did."""
    group: str | None = None
    """Label of the group in a layout run, e.g. `tp0`; None for the whole world."""
    in_place: bool = False
    backend: str | None = None
    op_source: str | None = None
    """How an imported row's op was found: `command` (the `*_perf` command line), `header` (nccl-tests'
    own `# Collective test starting/concluded` line), `inferred` (from the columns) or `given` (--op)."""
    nranks_source: str | None = None
    """How an imported row's rank count was found: `rank lines` (`# Rank N` lines), `threads x gpus x
    processes`, `size/count` (per-rank counts of all_gather and friends) or `busbw/algbw` (the printed
    ratio for the op); None when measured here or unknown."""
    hosts: tuple[str, ...] = ()
    """The distinct host names of the group's ranks, in rank order (runs across nodes); empty when not recorded."""
    table_line: int | None = None
    """For an imported row: the line of its file where its table starts (rows of one table share it)."""


@frozen
class MeasuredOn:
    """What measurements were taken on, as far as their tool said: the machine kind and its names."""

    gpu_model: str | None = None
    """GPU product name as the tool printed it, e.g. `NVIDIA H100 80GB HBM3`; None when not stated."""
    gpu_count: int | None = None
    """GPUs the run used on each host (the most on any one host)."""
    hosts: tuple[str, ...] = ()
    """Host names in rank order, each once; empty when not stated."""
    pci_bus_ids: tuple[str, ...] = ()
    """PCI bus ids of the devices in device order (first host), as the tool printed them; empty when not stated."""
    tool: str | None = None
    """`nccl-tests`, `nvbandwidth`, `p2pBandwidthLatencyTest`, `linkscope bench`."""
    tool_version: str | None = None


@frozen
class Measurements:
    """What benchmarks measured (ours or imported from other tools)."""

    source: str
    """Where the numbers come from: `linkscope bench p2p`, `nccl-tests`, `nvbandwidth`..."""
    peer_copies: tuple[PeerCopy, ...] = ()
    host_copies: tuple[HostCopy, ...] = ()
    collectives: tuple[CollectiveResult, ...] = ()
    group_setup_ms: tuple[tuple[str, float], ...] = ()
    """Process-group creation time per group label."""
    notes: tuple[str, ...] = ()
    identity: MeasuredOn | None = None
    """The machine the numbers come from; None for files written before linkscope recorded it."""

    def link_copies(self) -> tuple[PeerCopy, ...]:
        """The peer copies that measure each pair's link: a copy with P2P off (p2pBandwidthLatencyTest's
        P2P=Disabled baseline, staged through the host) is left out where the same pair on the same host
        has a copy with P2P on or not known to be off; a pair without one keeps its copies."""
        with_p2p = {(copy.host, copy.src, copy.dst) for copy in self.peer_copies if copy.p2p_enabled is not False}
        return tuple(copy for copy in self.peer_copies
                     if copy.p2p_enabled is not False or (copy.host, copy.src, copy.dst) not in with_p2p)


def merge_measurements(earlier: Measurements | None, later: Measurements) -> Measurements:
    """`later` appended to `earlier`, every field kept (where both measured the same thing, the later row comes
    after, so a reader taking the last row per pair sees the newest): the sources joined, the notes of both
    (each once), the later identity where it states one."""
    if earlier is None:
        return later
    return Measurements(
        source=f"{earlier.source} + {later.source}" if later.source not in earlier.source else earlier.source,
        peer_copies=earlier.peer_copies + later.peer_copies,
        host_copies=earlier.host_copies + later.host_copies,
        collectives=earlier.collectives + later.collectives,
        group_setup_ms=earlier.group_setup_ms + later.group_setup_ms,
        notes=tuple(dict.fromkeys(earlier.notes + later.notes)),
        identity=later.identity if later.identity is not None else earlier.identity,
    )
