"""What each cell of the Links grid says: link class, expected and measured bandwidth, ring hops.

Pure functions over the snapshot model, so the grid widget only draws and tests need no terminal.
"""

from __future__ import annotations

from collections.abc import Mapping

from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.expect import VERDICTS, Verdict, copy_judged, is_below, speed_ratio, verdict
from linkscope.topo.machine.links import LINK_CLASS, LinkSpeed, link_speed, network_speed
from linkscope.topo.model.host import Host, Link, LinkKind, Nic, parse_link_token
from linkscope.topo.model.measurements import Measurements, PeerCopy

SLOW_TRANSPORTS = frozenset({"SHM", "NET"})
P2P_LINK_KINDS = frozenset({LinkKind.NVLINK, LinkKind.PIX, LinkKind.PXB})
"""Links NCCL rides with P2P unless P2P is disabled or broken."""


@frozen
class GridCell:
    """One cell: the link between row device and column device, with its numbers."""

    row: int
    col: int
    token: str
    """nvidia-smi legend token (`NV18`, `PIX`, `X`), or `?` when not recorded."""
    kind: LinkKind | None
    expected: LinkSpeed | None
    measured_gbps: float | None = None
    measured_size_bytes: int | None = None
    on_ring: bool = False
    best_gbps: float | None = None
    """Best expected bandwidth of any pair of the same kind on this host (to spot a link below its peers)."""
    transports: frozenset[str] = frozenset()
    """Transports an NCCL log shows between the two GPUs (`P2P`, `SHM`, `NET`), empty without a log."""

    @property
    def transport_below_link(self) -> bool:
        """True when NCCL went through host memory or the network on a link P2P should ride (NVLink, PCIe switch)."""
        return bool(self.transports & SLOW_TRANSPORTS) and self.kind in P2P_LINK_KINDS

    @property
    def ratio(self) -> float | None:
        """Measured over typical bandwidth, when both are known."""
        return speed_ratio(self.measured_gbps, self.expected.typical_gbps if self.expected is not None else None)

    @property
    def verdict(self) -> Verdict | None:
        """`ok`, `slow` or `far below` (:func:`topo.cost.expect.verdict`, shared with the command line); None when not
        measured, or measured with copies too small to judge."""
        return verdict(self.ratio) if copy_judged(self.measured_size_bytes) else None

    @property
    def degraded(self) -> bool:
        """True when a measurement's verdict is below `ok`."""
        return self.verdict is not None and is_below(self.ratio)

    @property
    def reduced(self) -> bool:
        """True when this link should be slower than the best of its kind on the host (e.g. NV16 among NV18)."""
        if self.expected is None or self.best_gbps is None:
            return False
        return self.expected.spec_gbps < self.best_gbps * 0.999

    @property
    def colour_class(self) -> str:
        """The component class name that colours this cell."""
        if self.kind is None:
            return "unknown"
        return LINK_CLASS[self.kind]

    def text(self, show_expected: bool) -> str:
        """The short cell text: measured GB/s and ratio, else expected GB/s or the token."""
        if self.kind is LinkKind.SELF:
            return "X"
        if self.transports:
            return f"{self._base_text(show_expected)}:{'/'.join(sorted(self.transports))}"
        return self._base_text(show_expected)

    def _base_text(self, show_expected: bool) -> str:
        ratio = self.ratio
        if self.measured_gbps is not None and ratio is not None:
            return f"{self.measured_gbps:.0f} {ratio:.0%}"
        if self.measured_gbps is not None:
            return f"{self.measured_gbps:.0f}"
        if show_expected and self.expected is not None:
            return f"{self.expected.typical_gbps:.0f}"
        return self.token


def judged_said(cells: list[list[GridCell]]) -> str:
    """How many measured GPU pairs of the grid were judged, per verdict (`56 pairs judged: 56 ok`), or that none was
    (copies too small to judge, or none placed on this host's GPUs): never a clean verdict when nothing was judged.
    Copies are placed on the host's GPUs by the device numbers the measurements give."""
    measured = [cell for row in cells for cell in row if cell.measured_gbps is not None and cell.row != cell.col]
    verdicts = [cell.verdict for cell in measured if cell.verdict is not None]
    if not verdicts:
        why = "copies too small to judge" if measured else "no copy placed on this host's GPUs"
        return f"NOTHING JUDGED ({why})"
    counts = ", ".join(f"{verdicts.count(name)} {name}" for name in VERDICTS if verdicts.count(name))
    left = len(measured) - len(verdicts)
    return f"{len(verdicts)} pair(s) judged by GPU index: {counts}" + (f"; {left} not judged" if left else "")


def _largest_copies(measurements: Measurements | None, hostname: str) -> dict[tuple[int, int], PeerCopy]:
    """Per (src, dst) GPU index, the unidirectional copy of the largest size measured on `hostname`."""
    chosen: dict[tuple[int, int], PeerCopy] = {}
    if measurements is None:
        return chosen
    for copy in measurements.link_copies():
        if copy.unidir_gbps is None or (copy.host is not None and copy.host != hostname):
            continue
        key = (copy.src, copy.dst)
        previous = chosen.get(key)
        if previous is None or (copy.size_bytes or 0) >= (previous.size_bytes or 0):
            chosen[key] = copy
    return chosen


def gpu_cells(
    host: Host,
    measurements: Measurements | None,
    ring: frozenset[tuple[int, int]] = frozenset(),
    transports: Mapping[tuple[int, int], frozenset[str]] | None = None,
) -> list[list[GridCell]]:
    """The GPU x GPU grid of `host`; `ring` holds (position, position) hops to mark in both directions;
    `transports` the NCCL transports per (lower, higher) position pair, from a log."""
    copies = _largest_copies(measurements, host.hostname)
    count = len(host.gpus)
    pairs = {(link.a, link.b): link for link in host.links}
    speeds = {key: link_speed(host, link) for key, link in pairs.items() if link.a != link.b}
    best: dict[LinkKind, float] = {}
    for key, speed in speeds.items():
        kind = pairs[key].kind
        best[kind] = max(best.get(kind, 0.0), speed.spec_gbps)
    rows: list[list[GridCell]] = []
    for a in range(count):
        row: list[GridCell] = []
        for b in range(count):
            key = (min(a, b), max(a, b))
            link: Link | None = Link(a, a, LinkKind.SELF) if a == b else pairs.get(key)
            copy = copies.get((host.gpus[a].index, host.gpus[b].index))
            row.append(
                GridCell(
                    row=a,
                    col=b,
                    token=link.token if link is not None else "?",
                    kind=link.kind if link is not None else None,
                    expected=speeds.get(key) if a != b else None,
                    measured_gbps=copy.unidir_gbps if copy is not None else None,
                    measured_size_bytes=copy.size_bytes if copy is not None else None,
                    on_ring=(a, b) in ring or (b, a) in ring,
                    best_gbps=best.get(link.kind) if link is not None and a != b else None,
                    transports=transports.get(key, frozenset()) if transports and a != b else frozenset(),
                )
            )
        rows.append(row)
    return rows


def _nic_speed(nic: Nic) -> LinkSpeed | None:
    return network_speed(nic.rate_gbit_per_s) if nic.rate_gbit_per_s else None


def nic_order(host: Host) -> list[int]:
    """NIC indices, most useful first: active ports before down ones, then the fastest (a job's rails
    before a storage or management port), ties in the host's order. The GPU x NIC grid's columns."""
    return sorted(range(len(host.nics)),
                  key=lambda b: (host.nics[b].state not in (None, "ACTIVE"), -(host.nics[b].rate_gbit_per_s or 0.0)))


def nic_cells(host: Host) -> list[list[GridCell]]:
    """The GPU x NIC grid of `host` from its legend tokens, columns in :func:`nic_order` (a cell's `col`
    stays the NIC's index in `host.nics`); expected bandwidth is the NIC port's."""
    rows: list[list[GridCell]] = []
    for a in range(len(host.gpus)):
        tokens = host.gpu_nic[a] if a < len(host.gpu_nic) else ()
        row: list[GridCell] = []
        for b in nic_order(host):
            nic = host.nics[b]
            token = tokens[b] if b < len(tokens) else "?"
            try:
                kind: LinkKind | None = parse_link_token(token)[0]
            except ValueError:
                kind = None
            row.append(GridCell(row=a, col=b, token=token, kind=kind, expected=_nic_speed(nic)))
        rows.append(row)
    return rows
