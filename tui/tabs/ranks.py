"""Ranks: a layout form, the nodes x GPUs rank map coloured by group, live findings and the suggestion.

Every form change runs the checker (`topo.checks` through the services) in a thread worker; the
result comes back as a :class:`~tui.messages.LayoutChecked` message. Picking a group posts a
:class:`~tui.messages.RingChosen` so the Links tab draws which links its ring crosses.
"""

from __future__ import annotations

import time
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input, Label, Select, Static
from textual.worker import Worker, get_current_worker

from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.checks.suggest import Suggestion
from linkscope.topo.common.collector import collector_paused
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_AUTO_SUGGEST_RANKS, MAX_HOSTS, MAX_LAYOUT_RANKS
from linkscope.topo.common.numbers import parse_int
from linkscope.topo.layout.placement import Distribution, parse_visible_devices
from linkscope.topo.machine.cluster import domain_hosts
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.layout_export import export_command, suggested_form, suggestion_text
from linkscope.tui.messages import LayoutChecked, RingChosen, SuggestionReady
from linkscope.tui.rank_cells import group_index, rank_grid, rank_ranges, ring_overlay
from linkscope.tui.screens.export import ExportScreen
from linkscope.tui.services import LayoutForm, Services, Unavailable
from linkscope.tui.text import plain
from linkscope.tui.widgets.findings_table import FindingsTable
from linkscope.tui.widgets.rank_map import RankMap
from linkscope.tui.widgets.static_update import WrappedText, update_if_changed, update_in_place

DIMS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Parallel dimensions the form offers, in Megatron's default order."""
COLOUR_DIMS: tuple[str, ...] = (*DIMS, "etp", "edp", "dp_cp")
"""Group sets the map can be coloured by: the form's dimensions, the expert grid's groups, the gradient group."""

RANK_MAP_MAX_WIDTH = 64
"""Widest the rank map gets (columns); the findings list takes the rest."""
RANK_MAP_CHROME = 3
"""Columns for the map's border and vertical scrollbar."""

CHECKING_NOTE_S = 0.2
"""A check still running after this long says so on the status line. A faster one just shows its result:
a note drawn and overdrawn within a few frames would only slow the check down (the two share one CPU)."""


class RanksView(Vertical):
    """The Ranks tab; the app sets `snapshot` (and measurements inside it feed the checker)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "next_dim", "Colour by"),
        Binding("a", "apply_suggestion", "Apply suggestion"),
        Binding("g", "search_suggestion", "Suggest", show=False),
        Binding("c", "export", "Export"),
        Binding("f", "focus_form", "Form"),
        Binding("shift+tab", "focus_form(True)", "Form", show=False),
    ]

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot whose hosts the layout is placed on."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.report: CheckReport | None = None
        self.suggestion: Suggestion | None = None
        self.checked_form: LayoutForm | None = None
        self._pending: LayoutForm | None = None
        self._checking_note: Timer | None = None
        self._colour_dim = "tp"
        self._group_of_rank: list[int] = []
        self._shape_of: tuple[Host, ...] | None = None
        self._node_shape_seen = (0, 0)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="form-row"):
            for dim in DIMS:
                yield Label(dim, classes="form-label")
                yield Input(
                    "",
                    id=f"size-{dim}",
                    type="integer",
                    placeholder="auto" if dim == "dp" else "1",
                    valid_empty=True,  # an untouched field is the default, not an error
                    compact=True,
                    classes="size-input",
                )
            yield Label("nodes", classes="form-label")
            yield Input("1", id="nodes", type="integer", compact=True, classes="size-input")
            yield Label("colour", classes="form-label")
            yield Select([(dim, dim) for dim in COLOUR_DIMS], id="colour-dim", value="tp", allow_blank=False, compact=True)
        with Horizontal(classes="form-row"):
            yield Label("order", classes="form-label")
            yield Input("tp-cp-ep-dp-pp", id="order", compact=True)
            yield Label("place", classes="form-label")
            yield Select(
                [("block", "block"), ("cyclic", "cyclic")], id="distribution", value="block", allow_blank=False, compact=True
            )
            yield Label("devices", classes="form-label")
            yield Input("", id="devices", placeholder="0,1,2,...", valid_empty=True, compact=True)
            yield Label("model", classes="form-label")
            yield Input("", id="model", placeholder="(optional)", valid_empty=True, compact=True)
        yield Static(id="ranks-status", markup=False)
        with Horizontal(id="ranks-body"):
            yield RankMap(id="rank-map", classes="initial-focus")
            with Vertical(id="findings-column"):
                yield FindingsTable(id="findings")
                with VerticalScroll(id="finding-detail-scroll"):
                    yield WrappedText(id="finding-detail", markup=False)
        yield Static(id="suggestion", markup=False)

    def watch_snapshot(self, old: Snapshot | None, snapshot: Snapshot | None) -> None:
        """A new machine resets the form to one full node of tensor parallelism; new measurements re-check the form."""
        if snapshot is None or not self.is_mounted or not snapshot.hosts:
            return
        if old is not None and old.hosts == snapshot.hosts and self.checked_form is not None:
            self.request_check()
            return
        gpus, nodes = self._node_shape(snapshot)
        self.fill_form(LayoutForm(sizes=(("tp", max(gpus, 1)),), nodes=nodes))

    def _node_shape(self, snapshot: Snapshot) -> tuple[int, int]:
        """(most GPUs on one node, number of nodes) of `snapshot`, a multi-host NVLink domain (GB200 NVL72) being
        one node. Kept for the snapshot's hosts: merging the domains of 1,024 hosts took a third of the map's
        redraw on every keystroke, and the hosts do not change while the form is edited."""
        if self._shape_of is not snapshot.hosts:
            nodes_of = domain_hosts(snapshot)
            self._node_shape_seen = (max(len(host.gpus) for host in nodes_of), len(nodes_of))
            self._shape_of = snapshot.hosts
        return self._node_shape_seen

    def fill_form(self, form: LayoutForm) -> None:
        """Put `form` into the inputs and check it once (not once per field)."""
        with self.prevent(Input.Changed, Select.Changed):
            sizes = dict(form.sizes)
            for dim in DIMS:
                self.query_one(f"#size-{dim}", Input).value = str(sizes[dim]) if dim in sizes else ""
            self.query_one("#nodes", Input).value = str(form.nodes)
            self.query_one("#order", Input).value = form.order
            self.query_one("#distribution", Select).value = form.distribution
            self.query_one("#model", Input).value = form.model or ""
            devices = form.visible_devices
            self.query_one("#devices", Input).value = ",".join(map(str, devices)) if devices is not None else ""
        self.request_check()

    def read_form(self) -> LayoutForm:
        """The form's values; InputError naming the field when one is not valid."""
        sizes: list[tuple[str, int]] = []
        for dim in DIMS:
            text = self.query_one(f"#size-{dim}", Input).value.strip()
            if text:
                sizes.append((dim, parse_int(text, dim, 1, MAX_LAYOUT_RANKS)))
        nodes = parse_int(self.query_one("#nodes", Input).value.strip(), "nodes", 1, MAX_HOSTS)
        order = self.query_one("#order", Input).value.strip() or "tp-cp-ep-dp-pp"
        distribution: Distribution = "cyclic" if self.query_one("#distribution", Select).value == "cyclic" else "block"
        model = self.query_one("#model", Input).value.strip() or None
        devices_text = self.query_one("#devices", Input).value.strip()
        devices = parse_visible_devices(devices_text) if devices_text else None
        return LayoutForm(
            sizes=tuple(sizes), order=order, nodes=nodes, distribution=distribution, visible_devices=devices, model=model
        )

    @on(Input.Changed)
    @on(Select.Changed, "#distribution")
    def _form_changed(self) -> None:
        self.request_check()

    @on(Select.Changed, "#colour-dim")
    def _colour_changed(self, event: Select.Changed) -> None:
        self._colour_dim = str(event.value)
        self._draw_map()

    def request_check(self) -> None:
        """Read the form and check it in a worker; a bad field shows in the status line."""
        if self.snapshot is None:
            return
        try:
            form = self.read_form()
        except InputError as exc:
            self._status(plain(exc))
            return
        self._pending = form
        if self._checking_note is not None:
            self._checking_note.stop()
        self._checking_note = self.set_timer(CHECKING_NOTE_S, partial(self._status, Text(f"checking on {form.nodes} node(s)...")))
        self.run_check(self.snapshot, form)

    @work(thread=True, exclusive=True, group="check", description="check the layout")  # no repr of a 1,024-host snapshot
    def run_check(self, snapshot: Snapshot, form: LayoutForm) -> None:
        """Check off the UI thread and post the outcome; then search for a better layout (slower) and post that."""
        worker = get_current_worker()
        started = time.perf_counter()
        try:
            # The collector paused (for every thread, for the check's 25-40 ms): a check of 1,024 hosts builds tens
            # of thousands of lists (groups, ranks) that live on in its report, and the collections they set off
            # while it builds them, each scanning the young objects again, took 15-25 ms of CPU of each keystroke
            # (a check on a 1,024-host cluster with odd nodes: 56 ms median with, 34 ms paused).
            with collector_paused():
                report = self.services.check(snapshot, form, snapshot.measurements, False)
        except (InputError, Unavailable) as exc:
            self.post_message(LayoutChecked(form, None, str(exc)))
            return
        self.post_message(LayoutChecked(form, report, None, (time.perf_counter() - started) * 1000))
        if worker.is_cancelled or not self._auto_suggest(report):
            return
        self._search_suggestion(snapshot, form, worker)

    def _auto_suggest(self, report: CheckReport) -> bool:
        """Search for a better layout right away only for layouts small enough to search quickly."""
        return len(report.placement) <= MAX_AUTO_SUGGEST_RANKS

    @work(thread=True, exclusive=True, group="check", description="search a better layout")
    def run_suggestion(self, snapshot: Snapshot, form: LayoutForm) -> None:
        """Search for a better layout on request (large layouts), off the UI thread."""
        self._search_suggestion(snapshot, form, get_current_worker())

    def _search_suggestion(self, snapshot: Snapshot, form: LayoutForm, worker: Worker[None]) -> None:
        if worker.is_cancelled:
            return
        try:
            suggested = self.services.check(snapshot, form, snapshot.measurements, True).suggestion
        except (InputError, Unavailable):
            suggested = None
        self.post_message(SuggestionReady(form, suggested))

    def on_suggestion_ready(self, message: SuggestionReady) -> None:
        """Show the suggestion if it is for the layout on show."""
        message.stop()
        if message.form != self.checked_form or message.form != self._pending:
            return
        self.suggestion = message.suggestion
        self._suggestion_line(suggestion_text(message.suggestion))

    def on_layout_checked(self, message: LayoutChecked) -> None:
        """Show a fresh result (results of forms that were edited since are dropped)."""
        message.stop()
        if message.form != self._pending:
            return
        if self._checking_note is not None:
            self._checking_note.stop()
            self._checking_note = None
        if message.report is None:
            self.report = None
            self._status(plain(message.error or "no result"))
            self._draw_map()
            self.query_one(FindingsTable).show((), checked=False)
            self._detail(None)
            self.suggestion = None
            self.query_one("#suggestion", Static).update("", layout=False)
            return
        self.report = message.report
        self.checked_form = message.form
        findings = message.report.findings
        status = plain(f"{len(message.report.placement)} ranks on {message.form.nodes} node(s): ")
        status.append(f"{len(findings)} finding(s)", style="bold" if findings else "")
        status.append(f". Enter on a rank: its {self._colour_dim} ring on Links; f: the form")
        self._status(status)
        self._draw_map()
        self.query_one(FindingsTable).show(findings)
        self._detail(findings[0] if findings else None)
        self.suggestion = None
        if self._auto_suggest(message.report):
            self._suggestion_line(Text("Searching for a better layout..."))
        else:
            self._suggestion_line(Text("Large layout: g searches for a better one (takes a while; the form stays usable)."))

    def _status(self, text: Text) -> None:
        update_if_changed(self.query_one("#ranks-status", Static), text)

    def _suggestion_line(self, text: Text) -> None:
        update_if_changed(self.query_one("#suggestion", Static), text)

    def _draw_map(self) -> None:
        rank_map = self.query_one(RankMap)
        report, form = self.report, self.checked_form
        if report is None or form is None or self.snapshot is None:
            rank_map.show([], 0, [], [])
            return
        placement = report.placement
        gpus, _ = self._node_shape(self.snapshot)
        nodes = max([form.nodes, *(node + 1 for node, _ in placement[-1:])])
        labels = list(report.hostnames) if len(report.hostnames) >= nodes else [f"node{node}" for node in range(nodes)]
        self._group_of_rank = group_index(report.groups.get(self._colour_dim, []), len(placement))
        rank_map.picked_group = None
        rank_map.show(labels, gpus, rank_grid(placement, len(labels), gpus), self._group_of_rank)
        rank_map.styles.width = min(rank_map.virtual_size.width + RANK_MAP_CHROME, RANK_MAP_MAX_WIDTH)

    def on_rank_map_rank_under_cursor(self, event: RankMap.RankUnderCursor) -> None:
        """Name the group of the rank under the cursor on the status line (groups are told apart in words too)."""
        event.stop()
        report = self.report
        if report is None or not 0 <= event.rank < len(self._group_of_rank) or not self.rank_map_focused:
            return
        number = self._group_of_rank[event.rank]
        if number < 0:
            return
        members = report.groups.get(self._colour_dim, [])[number]
        self._status(plain(f"rank {event.rank}: {self._colour_dim} group {number} of "
                           f"{len(report.groups.get(self._colour_dim, []))} (ranks {rank_ranges(members)}). "
                           f"Enter: its ring on Links; f: the form"))

    @property
    def rank_map_focused(self) -> bool:
        """Whether the keyboard is on the rank map (the status then follows its cursor)."""
        return self.query_one(RankMap).has_focus

    def on_rank_map_rank_picked(self, event: RankMap.RankPicked) -> None:
        event.stop()
        self.pick_group(self._colour_dim, event.rank)

    def on_findings_table_finding_highlighted(self, event: FindingsTable.FindingHighlighted) -> None:
        event.stop()
        self._detail(event.finding)

    def _detail(self, finding: LayoutFinding | None) -> None:
        """The finding under the cursor, whole (message and fix), wrapped under the list."""
        detail = self.query_one("#finding-detail", Static)
        if finding is None:
            update_in_place(detail, plain("No findings: every group sits on the links it needs." if self.report else ""))
            return
        text = plain(f"{finding.severity} {finding.code}" + (f" ({finding.dim})" if finding.dim else "") + ": ", "bold")
        text.append(finding.message)
        if finding.fix:
            text.append("\nfix: ", style="bold")
            text.append(finding.fix)
        update_in_place(detail, text)

    def on_findings_table_finding_chosen(self, event: FindingsTable.FindingChosen) -> None:
        event.stop()
        finding = event.finding
        if finding.dim in COLOUR_DIMS and finding.ranks:
            self.query_one("#colour-dim", Select).value = finding.dim
            self._colour_dim = finding.dim
            self._draw_map()
            self.pick_group(finding.dim, finding.ranks[0])

    def pick_group(self, dim: str, rank: int) -> None:
        """Mark the `dim` group holding `rank` and send its ring to the Links tab."""
        report = self.report
        if report is None:
            return
        groups = report.groups.get(dim, [])
        owner = group_index(groups, len(report.placement))
        if not 0 <= rank < len(owner) or owner[rank] < 0:
            return
        number = owner[rank]
        members = groups[number]
        self.query_one(RankMap).set_picked_group(number if dim == self._colour_dim else None)
        overlay = ring_overlay(report.ring(dim, number), report.placement)
        label = f"{dim} group {number} (ranks {rank_ranges(members)})"
        self.post_message(RingChosen(label, overlay.node, overlay.hops, overlay.off_node_hops))
        where = f"{len(overlay.hops)} hop(s) on node {overlay.node}" + (
            f", {overlay.off_node_hops} between nodes" if overlay.off_node_hops else ""
        )
        self._status(plain(f"{label}: ring {where}; see the Links tab (1)"))

    def action_focus_form(self, backwards: bool = False) -> None:
        """Into the form at its first field, `tp` (`f`, or shift+tab from the map); shift+tab inside the form
        goes back a field as usual."""
        focused = self.screen.focused
        in_form = focused is not None and any("form-row" in node.classes for node in focused.ancestors)
        if backwards and in_form:
            self.screen.focus_previous()
            return
        self.query_one("#size-tp", Input).focus()

    def action_next_dim(self) -> None:
        """Colour the map by the next dimension."""
        select = self.query_one("#colour-dim", Select)
        select.value = COLOUR_DIMS[(COLOUR_DIMS.index(self._colour_dim) + 1) % len(COLOUR_DIMS)]

    def action_search_suggestion(self) -> None:
        """Search for a better layout than the one on show."""
        if self.snapshot is None or self.checked_form is None or self.checked_form != self._pending:
            return
        self._suggestion_line(Text("Searching for a better layout..."))
        self.run_suggestion(self.snapshot, self.checked_form)

    def action_apply_suggestion(self) -> None:
        """Put the checker's suggested layout into the form."""
        form = self.checked_form
        suggested = suggested_form(self.suggestion, form) if form is not None else None
        if suggested is None:
            self.app.notify("No suggested layout to apply.", markup=False)
            return
        self.fill_form(suggested)

    def action_export(self) -> None:
        """Show the checked layout as a `linkscope check` command and as JSON."""
        if self.report is None or self.checked_form is None or self.snapshot is None:
            self.app.notify("Nothing checked yet.", markup=False)
            return
        command, document = export_command(self.snapshot, self.checked_form, self.report)
        self.app.push_screen(ExportScreen(command, document))

