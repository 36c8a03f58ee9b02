"""The linkscope app: six tabs over one snapshot, and the one factory that builds it.

`build_app` is used by `linkscope open`, the tests and the screenshot script alike. The app owns
the snapshot on show and binds it into every tab's view once (`data_bind`); the views talk back with
messages (:mod:`tui.messages`).
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Button, Header, Input, Select, Static, Tab, TabbedContent, TabPane
from textual.widgets._tabs import Underline  # the tab bar's underline: Textual exports no public name for it

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.text import printable
from linkscope.tui.messages import HostPicked, HostsJudged, MeasurementsArrived, RingChosen, SnapshotFailed, SnapshotLoaded
from linkscope.tui.screens.help import HelpScreen, binding_keys, help_text
from linkscope.tui.text import printable_fields
from linkscope.tui.widgets.key_bar import KeyBar

if TYPE_CHECKING:
    from linkscope.topo.formats.nccl_graph import NcclGraphs
    from linkscope.topo.model.snapshot import Snapshot
    from linkscope.topo.nccl.placement import NcclPlacement
    from linkscope.tui.host_health import HostHealth
    from linkscope.tui.services import Services

FALLBACK_SAMPLE = "dgx-h100"
"""The sample opened when this machine has no NVIDIA GPU."""
NOTICE_S = 6
"""Seconds a notice about what was opened stays on screen (it covers the corner of the tab under it)."""

TABS: tuple[tuple[str, str], ...] = (
    ("links", "Links"),
    ("topology", "Topology"),
    ("ranks", "Ranks"),
    ("bench", "Bench"),
    ("monitor", "Monitor"),
    ("steps", "Steps"),
)
"""(id, title) of each tab, in order; digit keys 1-6 switch to them."""


class LinkscopeApp(App[None]):
    """Shows one snapshot in six tabs; loads it in a worker when it is not given."""

    CSS_PATH = "linkscope.tcss"
    TITLE = "linkscope"
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(number), f"show_tab('{tab_id}')", title, show=False) for number, (tab_id, title) in enumerate(TABS, 1)),
        Binding("h", "next_host", "Next host"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", show=False),
        Binding("q", "quit", "Quit"),
        Binding("escape", "leave_field", "Leave field", show=False),
    ]

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot on show, its strings made printable: bound into every tab's view (set by :meth:`show_snapshot`)."""
    live: reactive[bool] = reactive(False)
    """Whether the snapshot is this machine now (the Bench and Monitor tabs then measure and sample it)."""
    nccl: reactive[NcclPlacement | None] = reactive(None)
    """An NCCL log laid on the snapshot, shown on the Links grid."""
    nccl_graphs: reactive[NcclGraphs | None] = reactive(None)
    """NCCL's searched graphs: its ring channels are drawn on the Links grid."""
    host_index: reactive[int] = reactive(0)
    """The host of a cluster every tab shows (position in `Snapshot.hosts`); `h` or the hosts table moves it."""
    health: reactive[HostHealth | None] = reactive(None)
    """The health rules' verdicts on the snapshot by host (judged in a worker after it is shown; None until then)."""

    def __init__(
        self,
        services: Services,
        source: str | None = None,
        snapshot: Snapshot | None = None,
        notice: str | None = None,
        initial_tab: str = "links",
        live: bool = False,
        trace_paths: tuple[str, ...] = (),
        nccl: NcclPlacement | None = None,
        nccl_graphs: NcclGraphs | None = None,
    ) -> None:
        super().__init__()
        self.trace_paths = trace_paths
        self.set_reactive(LinkscopeApp.live, live)
        self.set_reactive(LinkscopeApp.nccl, nccl)
        self.set_reactive(LinkscopeApp.nccl_graphs, nccl_graphs)
        self.services = services
        self.source = source
        self._given_snapshot = snapshot
        """A snapshot given to the constructor: shown (made printable) once the app is mounted."""
        self._initial_notice = notice
        self._initial_tab = initial_tab
        self.load_error: str | None = None
        """Why the source given on the command line could not be opened (the app then exits with status 2)."""
        self._first_load = snapshot is None and source is not None

    def compose(self) -> ComposeResult:
        """The frame: header, six empty tabs and the key bar; the views are mounted into the tabs on mount (after
        the first frame when a source is still to load)."""
        yield Header()
        with TabbedContent(initial=self._initial_tab):
            for tab_id, title in TABS:
                with TabPane(title, id=tab_id):
                    yield Static(f"Starting the {title} tab...", classes="tab-starting", markup=False)
        yield KeyBar()

    async def mount_views(self) -> None:
        """Import the six views and mount them, each bound to the app's attributes. Their modules import most of
        linkscope, so a start that has a source to load paints the frame before this."""
        from linkscope.tui.tabs.bench import BenchView
        from linkscope.tui.tabs.links import LinksView
        from linkscope.tui.tabs.monitor import MonitorView
        from linkscope.tui.tabs.ranks import RanksView
        from linkscope.tui.tabs.steps import StepsView
        from linkscope.tui.tabs.topology import TopologyView

        # what the first workers run (the checker the Ranks tab calls, the health rules), imported here with the
        # views, on this thread: no two workers then import the same modules at once
        for module in ("linkscope.topo.checks.check", "linkscope.tui.host_health"):
            importlib.import_module(module)
        views = {
            "links": LinksView().data_bind(LinkscopeApp.nccl, LinkscopeApp.nccl_graphs, LinkscopeApp.host_index,
                                           LinkscopeApp.health, LinkscopeApp.snapshot),
            "topology": TopologyView().data_bind(LinkscopeApp.host_index, LinkscopeApp.health, LinkscopeApp.snapshot),
            "ranks": RanksView(self.services).data_bind(LinkscopeApp.snapshot),
            "bench": BenchView(self.services).data_bind(LinkscopeApp.live, LinkscopeApp.snapshot),
            "monitor": MonitorView(self.services).data_bind(LinkscopeApp.live, LinkscopeApp.snapshot),
            "steps": StepsView(self.trace_paths).data_bind(LinkscopeApp.snapshot),
        }
        tabbed = self.query_one(TabbedContent)
        for tab_id, view in views.items():
            await tabbed.get_pane(tab_id).mount(view)
        await self.query(".tab-starting").remove()
        self._focus_pane(tabbed.active_pane)

    async def on_mount(self) -> None:
        if self._given_snapshot is not None:
            await self.mount_views()
            self.post_message(SnapshotLoaded(self._given_snapshot, self._initial_notice, live=self.live))
        else:
            self.sub_title = f"loading {printable(self.source)}..." if self.source else "probing this machine..."
            self.call_after_refresh(self._start_loading)  # paint first

    async def _start_loading(self) -> None:
        await self.mount_views()
        self.load_source(self.source)

    @work(thread=True, exclusive=True, group="load")
    def load_source(self, source: str | None) -> None:
        """Load (or probe) in a thread; fall back to a sample when this machine has no GPU."""
        try:
            snapshot = self.services.load_snapshot(source)
        except InputError as exc:
            self.post_message(SnapshotFailed(str(exc)))
            return
        except Exception as exc:  # a probe failure must not kill the app
            if source is not None:
                self.post_message(SnapshotFailed(f"{source}: {exc}"))
                return
            snapshot = None
            reason = f"probing this machine failed ({exc})"
        else:
            reason = "no NVIDIA GPU found on this machine"
        if source is None and (snapshot is None or not any(host.gpus for host in snapshot.hosts)):
            try:
                sample = self.services.load_snapshot(f"sample:{FALLBACK_SAMPLE}")
            except InputError as exc:
                self.post_message(SnapshotFailed(f"{reason}, and the sample failed: {exc}"))
                return
            notice = f"{reason}: showing sample:{FALLBACK_SAMPLE}. Open another sample from the command palette (ctrl+p)."
            self.post_message(SnapshotLoaded(printable_fields(sample), notice, printable=True))
            return
        assert snapshot is not None
        if len(snapshot.hosts) > 1:
            self.call_from_thread(setattr, self, "sub_title", f"preparing {len(snapshot.hosts)} hosts for the screen...")
        self.post_message(SnapshotLoaded(printable_fields(snapshot), live=source is None, printable=True))

    @work(thread=True, exclusive=True, group="health")
    def judge(self, snapshot: Snapshot) -> None:
        """Run the health rules over the snapshot off the UI thread (seconds on a 1,024-host cluster)."""
        from linkscope.tui.host_health import judge_hosts

        self.post_message(HostsJudged(snapshot, judge_hosts(snapshot)))

    def on_hosts_judged(self, message: HostsJudged) -> None:
        """Hand the verdicts to the tabs, if they are about the snapshot still on show."""
        if self.snapshot is not None and message.snapshot.hosts is self.snapshot.hosts:
            self.health = message.health

    def action_leave_field(self) -> None:
        """Escape leaves a text field or a drop-down for the tab's main widget (so its keys work again)."""
        if not isinstance(self.focused, Input | Select):
            return
        pane = self.query_one(TabbedContent).active_pane
        preferred = pane.query(".initial-focus") if pane is not None else None
        if preferred:
            preferred.first().focus()
            return
        for widget in pane.query("*") if pane is not None else ():
            if widget.focusable and not any(isinstance(node, Input | Select | Button) for node in (widget, *widget.ancestors)):
                widget.focus()
                return
        self.set_focus(None)

    def _focus_pane(self, pane: TabPane | None) -> None:
        """Focus the pane's initial widget (or its first focusable one) now: `focus()` sets the focus a message
        later, after the frame that shows the new tab, so a switch took a frame more to settle."""
        if pane is None:
            return
        preferred = pane.query(".initial-focus")
        if preferred:
            self.screen.set_focus(preferred.first())
            return
        for widget in pane.query("*"):
            if widget.focusable:
                self.screen.set_focus(widget)
                return

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        """Another machine: the first host, no ring from the previous one, health judged anew."""
        self._first_load = False
        from linkscope.tui.tabs.links import LinksView

        self.live = message.live
        self.host_index = 0
        self.query_one(LinksView).ring = None
        self.show_snapshot(message.snapshot, printable=message.printable)
        if message.notice:
            self.sub_title += "  (no GPU here)"
            self.notify(printable(message.notice), title="No GPU", timeout=NOTICE_S, markup=False)

    def on_snapshot_failed(self, message: SnapshotFailed) -> None:
        """The source named on the command line ends the app (the command says why, exit status 2); a sample
        opened from the palette that fails only says so."""
        if self._first_load:
            self.load_error = message.reason
            self.exit(return_code=2)
            return
        self.sub_title = "nothing loaded"
        self.notify(printable(message.reason), title="Cannot open", severity="error", timeout=15, markup=False)

    def show_snapshot(self, snapshot: Snapshot, printable: bool = False) -> None:
        """Put `snapshot` on every tab (bound to `self.snapshot`; `self.live` says whether it is this machine now);
        its strings are made printable here, the one door through which snapshots reach the screen.

        Once the tabs hold it, everything alive is moved out of the garbage collector's sight
        (`gc.freeze`): a 1,024-host snapshot and the app's widgets are hundreds of thousands of objects
        that a full collection, triggered by a check's allocations, would scan for 50-60 ms on every
        edit of the Ranks form. They stay freed by reference counting as usual.

        `printable` says a loading worker already made the strings printable (a second pass over a 1,024-host
        snapshot would hold the UI for most of a second)."""
        if not printable:
            snapshot = printable_fields(snapshot)
        self.sub_title = (snapshot.source or "snapshot") + (" (this machine, live)" if self.live else "")
        self.health = None
        self.snapshot = snapshot
        self.judge(snapshot)
        self.refresh_bindings()  # `h` shows on a cluster only
        self.call_after_refresh(gc.freeze)

    def on_host_picked(self, message: HostPicked) -> None:
        """A tab picked a host: every tab shows it."""
        if self.snapshot is not None and 0 <= message.index < len(self.snapshot.hosts):
            self.host_index = message.index

    def action_next_host(self) -> None:
        """Show the next host of a cluster on every tab."""
        if self.snapshot is not None and self.snapshot.hosts:
            self.host_index = (self.host_index + 1) % len(self.snapshot.hosts)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`h` only where there is another host to go to (hidden from the key bar otherwise)."""
        if action == "next_host":
            return self.snapshot is not None and len(self.snapshot.hosts) > 1
        return True

    def action_help(self) -> None:
        """Show the keys of every tab and of the tab on show."""
        tabbed = self.query_one(TabbedContent)
        pane = tabbed.active_pane
        title = dict(TABS).get(tabbed.active, tabbed.active)
        view = pane.children[0] if pane is not None and pane.children else None
        keys = binding_keys(type(view).BINDINGS) if view is not None else []
        self.push_screen(HelpScreen(help_text(title, keys)))

    def on_ring_chosen(self, message: RingChosen) -> None:
        """Draw the ring on the Links tab, on the host (of a multi-host snapshot) where its hops are."""
        from linkscope.topo.machine.cluster import nvlink_domains, ring_on_host
        from linkscope.tui.tabs.links import LinksView

        links = self.query_one(LinksView)
        if self.snapshot is not None and len(nvlink_domains(self.snapshot)) != len(self.snapshot.hosts):
            node, hops, leaving = ring_on_host(self.snapshot, message.node, message.hops, message.off_node_hops)
            message = dataclasses.replace(message, node=node, hops=hops, off_node_hops=leaving)
        if self.snapshot is not None and 0 <= message.node < len(self.snapshot.hosts):
            self.host_index = message.node
        links.ring = message if message.hops or message.off_node_hops else None

    def on_measurements_arrived(self, message: MeasurementsArrived) -> None:
        """Benchmark results replace the snapshot's measurements, so the grid and checker use them."""
        from linkscope.topo.model.measurements import merge_measurements

        if self.snapshot is None:
            return
        self.show_snapshot(
            dataclasses.replace(self.snapshot, measurements=merge_measurements(self.snapshot.measurements, message.measurements))
        )

    def action_show_tab(self, tab_id: str) -> None:
        """Switch to the tab `tab_id` and put the keyboard focus in it.

        Focus moves here, not on every TabActivated: focusing a widget activates its tab a message
        later, so a handler that focused on activation would, after two quick switches, pull the
        focus back and forth between the two tabs for ever.
        """
        tabbed = self.query_one(TabbedContent)
        tabbed.active = tab_id
        self._underline_tab(tabbed, tabbed.get_tab(tab_id))
        self._focus_pane(tabbed.get_pane(tab_id))

    @staticmethod
    def _underline_tab(tabbed: TabbedContent, tab: Tab) -> None:
        """Put the tab bar's underline under `tab` in the frame that shows its pane. Textual's tabs move it after
        the screen's next refresh (they read where the tab is from the layout), so a switch took one frame more
        (15-40 ms) after the new tab was on screen; the tabs keep their places when another is picked, and the
        span is the one Textual's tabs give it (the tab's region less its gutter), which they then set again
        without a repaint. Left to them before the tab bar has been laid out."""
        start, end = tab.virtual_region.shrink(tab.styles.gutter).column_span
        if end > start:
            underline = tabbed.query_one(Underline)
            underline.highlight_start, underline.highlight_end = start, end

    def open_sample(self, name: str) -> None:
        """Load a built-in sample in place of the current snapshot."""
        self.nccl = None  # the log was laid on the machine opened first
        self.nccl_graphs = None
        self.sub_title = f"loading sample:{name}"
        self.load_source(f"sample:{name}")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for number, (tab_id, title) in enumerate(TABS, 1):
            yield SystemCommand(
                f"Show {title}", f"Switch to the {title} tab (key {number})", partial(self.action_show_tab, tab_id)
            )
        for name in self.services.sample_names():
            yield SystemCommand(
                f"Open sample: {name}", f"Show the built-in sample machine {name}", partial(self.open_sample, name)
            )


def build_app(
    source: str | None = None,
    *,
    snapshot: Snapshot | None = None,
    services: Services | None = None,
    notice: str | None = None,
    initial_tab: str = "links",
    live: bool = False,
    trace_paths: tuple[str, ...] = (),
    nccl: NcclPlacement | None = None,
    nccl_graphs: NcclGraphs | None = None,
) -> LinkscopeApp:
    """The app for `source` (None: this machine) or an already loaded `snapshot`.

    `services` defaults to the real ones (:class:`tui.local_services.LocalServices`); tests pass a fake.
    `live` marks a given snapshot as this machine now (the Monitor and Bench tabs then use it);
    `trace_paths` are a job's profiler traces for the Steps tab; `nccl` is an NCCL log laid on `snapshot`,
    shown on the Links grid; `nccl_graphs` NCCL's searched graphs, whose ring channels the Links grid draws.
    """
    if services is None:
        from linkscope.tui.local_services import LocalServices

        services = LocalServices()
    return LinkscopeApp(services, source=source, snapshot=snapshot, notice=notice,
                        initial_tab=initial_tab, live=live, trace_paths=trace_paths, nccl=nccl,
                        nccl_graphs=nccl_graphs)
