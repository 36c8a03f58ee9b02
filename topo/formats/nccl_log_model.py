"""What an NCCL_DEBUG=INFO log says, as frozen values: ranks, connections, communicators, messages.

Read by :mod:`topo.formats.nccl_log`; checked by :mod:`topo.nccl.checks`; laid on a machine by
:mod:`topo.nccl.placement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from linkscope.topo.formats.nccl_graph import NcclGraphs
    from linkscope.topo.formats.nccl_topo_model import NcclTopology

TRANSPORTS: tuple[str, ...] = ("P2P", "SHM", "NET", "NVLS", "COLLNET")
"""Transport classes of the JSON contract, from the first word after `via`."""


@dataclass(frozen=True, slots=True)
class Rank:
    """One rank of one communicator and what the log says about it (None where it says nothing)."""

    comm: str | None
    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    """PCI bus id as NCCL prints it (hex, e.g. `1b000` for 0000:1b:00.0), lower case."""
    device_index: int | None = None
    """The small number in a connection line's bracket: cudaDev in old versions, nvmlDev in new ones."""


class Edge(NamedTuple):
    """One connection NCCL set up: `src` sends to `dst` on `channel` over `transport`. A named tuple, not a frozen
    dataclass like the rest: a large log has 100,000 of them, and a tuple is built in a third of the time."""

    comm: str | None
    src: int
    dst: int | None
    """None for a CollNet line, which names one rank only."""
    channel: int
    transport: str
    detail: str
    """What NCCL printed after `via`, e.g. `NET/IB/0(2)/GDRDMA`, `P2P/CUMEM/read`."""
    side: str | None
    """`send` or `receive` for network lines (each side prints its own), else None."""
    line: int
    """First line that showed it."""


@dataclass(frozen=True, slots=True)
class Communicator:
    """A communicator: its id (`commId` hash, or the rank count when no id was printed) and size."""

    key: str
    nranks: int | None
    nnodes: int | None
    rings: tuple[tuple[int, tuple[int, ...]], ...]
    """(channel, rank order) per ring channel."""
    trees: tuple[tuple[int, int, tuple[int, ...], int], ...]
    """(rank, channel, children, parent) with -1 for none, as `Trees` lines say."""
    channels: tuple[int | None, int | None, int | None] = (None, None, None)
    """(collective, CollNet, NVLS) channel counts from `N coll channels, N collnet channels, N nvls channels`;
    NVLS prints no per-connection line, so a positive NVLS count is how a log shows NVLink SHARP in use."""


@dataclass(frozen=True, slots=True)
class NvlsSetup:
    """One rank's NVLink SHARP set-up: `NVLS comm 0x... headRank H nHeads N buffSize B ...`."""

    comm: str | None
    rank: int | None
    host: str | None
    head_rank: int
    nheads: int
    """NVLS heads: one per NIC rail between nodes (NVLS-tree), up to 16 inside one node."""
    line: int


@dataclass(frozen=True, slots=True)
class Nvls:
    """What a log says of NVLink SHARP (NVLS): NCCL prints no connection line for it, so these are the signs."""

    setups: tuple[NvlsSetup, ...] = ()
    channels: int | None = None
    """The most NVLS channels a `N coll channels, ... N nvls channels` line printed (None: no such line)."""
    tree: bool = False
    """`Connected NVLS tree`: NVLS combined with a tree between nodes (NVLS-tree)."""
    multicast: tuple[tuple[str | None, int | None, bool], ...] = ()
    """(host, cudaDev, available) from `NVLS multicast support is (not) available on dev N`."""

    @property
    def used(self) -> bool:
        """Whether NCCL set NVLS up for some communicator."""
        return bool(self.setups) or self.tree or (self.channels or 0) > 0


@dataclass(frozen=True, slots=True)
class Message:
    """A warning or error line: its text (after NCCL's prefix), the host that wrote it, where it first was, how often."""

    text: str
    host: str | None
    line: int
    count: int


@dataclass(frozen=True, slots=True)
class NcclLog:
    """Everything read from one log."""

    name: str
    version: str | None
    communicators: tuple[Communicator, ...]
    ranks: tuple[Rank, ...]
    edges: tuple[Edge, ...]
    env: tuple[tuple[str, str], ...]
    """(variable, value) NCCL reported as set by the environment, first value of each."""
    warnings: tuple[Message, ...]
    errors: tuple[Message, ...]
    lines: int
    nccl_lines: int
    skipped_lines: tuple[int, ...]
    """Numbers of lines that looked like NCCL's but could not be read (the first MAX_KEPT_MESSAGES)."""
    skipped_count: int
    edges_dropped: int = 0
    """Distinct connections beyond the reader's cap, counted but not kept."""
    hosts: tuple[str, ...] = ()
    """Every host that wrote an NCCL line (or that nccl-tests' `# Rank N ... on HOST` lines name), first seen first."""
    nvls: Nvls = Nvls()
    topologies: tuple[NcclTopology, ...] = ()
    """The machine NCCL printed (`=== System : maxBw ...` tree), the first of each host."""
    graphs: tuple[NcclGraphs, ...] = ()
    """The graphs NCCL searched (`Pattern 4, crossNic 0, nChannels ...` and its channel lines), one rank's per host."""


def bus_id_to_pci(bus_id: str) -> str:
    """NCCL's compact bus id (`1b000`) as `nvidia-smi` spells it (`00000000:1B:00.0`)."""
    digits = bus_id.rjust(5, "0")
    function = digits[-1]
    device = digits[-3:-1]
    bus = digits[-5:-3]
    domain = digits[:-5].rjust(8, "0")
    return f"{domain}:{bus}:{device}.{function}".upper()
