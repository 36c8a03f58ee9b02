"""Links: the GPU x GPU (or GPU x NIC) grid of one host, its legend, and the detail of a cell."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from linkscope.topo.common.units import counted
from linkscope.topo.formats.nccl_graph import NcclGraphs
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.nccl.graphs import NcclRing, nccl_rings
from linkscope.topo.nccl.placement import NcclPlacement
from linkscope.tui.host_health import HostHealth
from linkscope.tui.link_cells import GridCell, gpu_cells, judged_said, nic_cells, nic_order
from linkscope.tui.messages import RingChosen
from linkscope.tui.screens.link_detail import LinkDetailScreen
from linkscope.tui.text import plain
from linkscope.tui.widgets.legend import Legend
from linkscope.tui.widgets.link_detail import LinkDetail
from linkscope.tui.widgets.link_grid import LinkGrid


class LinksView(Vertical):
    """The Links tab. The app sets `snapshot` and `ring`; keys toggle NICs, expected GB/s and host."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "toggle_nics", "GPU x NIC"),
        Binding("e", "toggle_expected", "GB/s"),
        Binding("x", "clear_ring", "Clear ring", show=False),
        Binding("g", "next_nccl_ring", "NCCL ring", show=False),
    ]

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot on show (with its measurements, if any)."""
    ring: reactive[RingChosen | None] = reactive(None, always_update=True)
    """The ring chosen on the Ranks tab, drawn over the grid."""
    nic_mode: reactive[bool] = reactive(False)
    """True to show GPU x NIC instead of GPU x GPU."""
    show_expected: reactive[bool] = reactive(False)
    """True to show expected GB/s in cells that have no measurement, instead of the token."""
    host_index: reactive[int] = reactive(0)
    """Which host of a multi-host snapshot is on show (bound from the app: every tab shows the same host)."""
    health: reactive[HostHealth | None] = reactive(None)
    """The health rules' verdicts by host (bound from the app): the title names the odd hosts of a cluster."""
    nccl: reactive[NcclPlacement | None] = reactive(None, always_update=True)
    """An NCCL log laid on the snapshot: the transport of each GPU pair is shown in its cell."""
    nccl_graphs: reactive[NcclGraphs | None] = reactive(None, always_update=True)
    """NCCL's searched graphs (a graph dump or a log's `Pattern` lines): its ring channels are drawn, one at a time."""
    nccl_ring_index: reactive[int] = reactive(0)
    """Which of NCCL's ring channels is drawn (g: next)."""

    def compose(self) -> ComposeResult:
        yield Static(id="links-title", markup=False)
        yield LinkGrid(id="link-grid")
        yield Legend(id="links-legend")
        yield LinkDetail(id="link-detail")

    @property
    def host(self) -> Host | None:
        """The host on show, or None before a snapshot arrives."""
        if self.snapshot is None or not self.snapshot.hosts:
            return None
        return self.snapshot.hosts[min(self.host_index, len(self.snapshot.hosts) - 1)]

    def on_mount(self) -> None:
        self._redraw()

    def watch_snapshot(self) -> None:
        self._redraw()

    def watch_ring(self) -> None:
        self._redraw()

    def watch_nic_mode(self) -> None:
        self._redraw()

    def watch_show_expected(self) -> None:
        self._redraw()

    def watch_host_index(self) -> None:
        self._redraw()

    def watch_nccl(self) -> None:
        self._redraw()

    def watch_nccl_graphs(self) -> None:
        self._redraw()

    def watch_nccl_ring_index(self) -> None:
        self._redraw()

    def _nccl_ring(self, host: Host) -> NcclRing | None:
        """NCCL's ring channel on show, when no ring of the Ranks tab is."""
        if self.nccl_graphs is None or self.ring is not None:
            return None
        rings = nccl_rings(self.nccl_graphs, host)
        return rings[self.nccl_ring_index % len(rings)] if rings else None

    def watch_health(self) -> None:
        self._redraw()

    def _title(self, host: Host, cells: list[list[GridCell]]) -> Text:
        title = Text()
        title.append(host.hostname or "host", style="bold")
        title.append(f"  {counted(len(host.gpus), 'GPU')}, {counted(len(host.nics), 'NIC')}")
        if self.snapshot is not None and len(self.snapshot.hosts) > 1:
            title.append(f"  (host {self.host_index + 1} of {len(self.snapshot.hosts)}; h: next)")
            if self.health is not None:
                note = self.health.odd_note([host.hostname for host in self.snapshot.hosts], host.hostname)
                if note:
                    title.append(f"  {note}", style="bold")
        measurements = self.snapshot.measurements if self.snapshot is not None else None
        if measurements is not None and measurements.peer_copies:
            said = "" if self.nic_mode else judged_said(cells)
            title.append_text(plain(f"  measured: {measurements.source}" + (f": {said}" if said else ""),
                                    "bold" if said.startswith("NOTHING") else ""))
        if self.nccl is not None and not self.nic_mode:
            pairs = sum(1 for row in cells for cell in row if cell.transports and cell.row < cell.col)
            slow = sum(1 for row in cells for cell in row if cell.transport_below_link and cell.row < cell.col)
            title.append(f"  NCCL log: transports of {counted(pairs, 'GPU pair')}")
            if slow:
                title.append(f", {slow} through SHM/NET where P2P should be", style="bold")
        nccl_ring = self._nccl_ring(host)
        if nccl_ring is not None and not self.nic_mode:
            title.append_text(plain(f"  {nccl_ring.label}", style="bold"))  # the label quotes the file
            if nccl_ring.off_node_hops:
                title.append(f", leaves the host through {counted(nccl_ring.off_node_hops, 'NET end')}")
            title.append(" (g: next)")
        if self.ring is not None and not self.nic_mode:
            title.append(f"  ring {self.ring.label}: {len(self.ring.hops)} hops in this host", style="bold")
            if self.ring.off_node_hops:
                title.append(f", {self.ring.off_node_hops} leave it")
            title.append(" (x: clear)")
        return title

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        grid = self.query_one(LinkGrid)
        detail = self.query_one(LinkDetail)
        title = self.query_one("#links-title", Static)
        host = self.host
        if host is None:
            title.update(Text(self.app.sub_title or "Waiting for a snapshot..."), layout=False)
            grid.show([], [], [], self.show_expected)
            return
        row_labels = [f"GPU{gpu.index}" for gpu in host.gpus]
        if self.nic_mode:
            cells = nic_cells(host)
            column_labels = [host.nics[b].name for b in nic_order(host)]
        else:
            nccl_ring = self._nccl_ring(host)
            ring = frozenset(self.ring.hops if self.ring is not None else nccl_ring.hops if nccl_ring else ())
            measurements = self.snapshot.measurements if self.snapshot is not None else None
            transports = self.nccl.pair_transports(self.host_index) if self.nccl is not None else None
            cells = gpu_cells(host, measurements, ring, _frozen(transports))
            column_labels = [f"GPU{gpu.index}" for gpu in host.gpus]
        title.update(self._title(host, cells), layout=False)
        grid.show(cells, row_labels, column_labels, self.show_expected)
        detail.host = host
        detail.nic_mode = self.nic_mode
        detail.cell = grid.cell_at(*grid.cursor)

    def on_link_grid_cell_chosen(self, event: LinkGrid.CellChosen) -> None:
        self.query_one(LinkDetail).cell = event.cell

    def on_link_grid_cell_opened(self, event: LinkGrid.CellOpened) -> None:
        """Enter on a cell: its whole detail in a window of its own (the pane may be cut on a small terminal)."""
        event.stop()
        detail = self.query_one(LinkDetail)
        detail.cell = event.cell
        self.app.push_screen(LinkDetailScreen(detail.describe()))

    def action_toggle_nics(self) -> None:
        """Switch between the GPU x GPU and GPU x NIC grids."""
        self.nic_mode = not self.nic_mode

    def action_toggle_expected(self) -> None:
        """Show expected GB/s instead of tokens in unmeasured cells (or back)."""
        self.show_expected = not self.show_expected

    def action_next_nccl_ring(self) -> None:
        """Draw NCCL's next ring channel."""
        self.nccl_ring_index += 1

    def action_clear_ring(self) -> None:
        """Stop drawing the ring chosen on the Ranks tab."""
        self.ring = None


def _frozen(pairs: dict[tuple[int, int], set[str]] | None) -> dict[tuple[int, int], frozenset[str]] | None:
    return None if pairs is None else {key: frozenset(value) for key, value in pairs.items()}
