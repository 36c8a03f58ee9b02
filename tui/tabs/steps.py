"""Steps: a slow job's profiler traces on this machine's links (`linkscope open SOURCE --trace DIR`).

Per step, compute against exposed communication as bars; the collectives furthest below their
links (or the longest, when the job's ranks cannot be placed); the rank everyone waited for.
Enter on a collective draws its group's ring on the Links tab. The traces are read and priced in
a worker thread (they can be hundreds of MB).
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import format_share
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.machine.links import DEGRADED_FRACTION
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.trace.report import CollectiveRow, StepRow, TraceReport
from linkscope.tui.messages import RingChosen
from linkscope.tui.rank_cells import rank_ranges, ring_overlay
from linkscope.tui.text import plain
from linkscope.tui.widgets.kept_table import KeptTable

TABLE_ROWS = 20

COMPUTE_GLYPH = "█"
EXPOSED_GLYPH = "▒"
OTHER_GLYPH = "·"
"""Each share of a step bar has a glyph of its own, so the bars read without colour (colour-blind readers,
monochrome terminals); colour only repeats it."""


def ms_label(time_us: float) -> Text:
    """Milliseconds with three decimals in every row (`5.990`, `0.024`), right-aligned so the points line up."""
    return Text(f"{time_us / 1e3:.3f}", justify="right")


def step_bars(steps: tuple[StepRow, ...], width: int) -> Text:
    """One line per step (median over ranks): compute, exposed communication, the rest, scaled to the longest step."""
    by_step: dict[int, list[StepRow]] = defaultdict(list)
    for row in steps:
        by_step[row.step].append(row)
    if not by_step:
        return Text("no ProfilerStep annotations in the traces")
    rows = [(step, median(r.time_us for r in rs), median(r.compute_us for r in rs), median(r.exposed_comm_us for r in rs))
            for step, rs in sorted(by_step.items())]
    longest = max(time for _, time, _, _ in rows) or 1.0
    label_width = max(len(str(step)) for step, *_ in rows) + 6
    tail_width = 30
    bar_width = max(10, width - label_width - tail_width - 2)
    text = Text()
    text.append(COMPUTE_GLYPH, style="green")
    text.append(" compute  ")
    text.append(EXPOSED_GLYPH, style="bold red")
    text.append(" exposed communication  ")
    text.append(OTHER_GLYPH, style="dim")
    text.append(" other (idle, launch, CPU)")
    for step, time, compute, exposed in rows:
        cells = max(1, round(bar_width * time / longest))
        compute_cells = min(cells, round(cells * compute / time)) if time else 0
        exposed_cells = min(cells - compute_cells, round(cells * exposed / time)) if time else 0
        text.append("\n" + f"step {step}".ljust(label_width))
        text.append(COMPUTE_GLYPH * compute_cells, style="green")
        text.append(EXPOSED_GLYPH * exposed_cells, style="bold red")
        text.append(OTHER_GLYPH * (cells - compute_cells - exposed_cells), style="dim")
        text.append(" " * (bar_width - cells + 1))
        share = exposed / time if time else 0.0
        text.append(f"{time / 1e3:7.1f} ms  exposed {share:4.0%}")
    return text


def _hosts_said(report: TraceReport) -> str:
    """` on node-a, node-b`, and how many traces say their host when not all do."""
    if not report.hosts:
        return ""
    naming = sum(1 for trace in report.traces if trace.host)
    return f" on {', '.join(report.hosts)}" + (f" ({naming} of {len(report.traces)} traces name their host)"
                                                if naming < len(report.traces) else "")


def _judged_said(report: TraceReport) -> str:
    """What was judged, as `trace --json`'s `judged` counts it: steps, and calls priced against their links."""
    judged = report.judged(report.placed is not None)
    said = f"{judged['steps']} rank-step(s), {judged['calls']} call(s)"
    if judged["priced"] is None:
        return f"{said}, none priced (no machine)"
    return f"{said}, {judged['priced']} priced against their links"


class StepsView(Vertical):
    """The Steps tab; the app sets `trace_paths` (from `--trace`) and `snapshot`."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "show_ring", "Ring on Links", show=False)]

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The machine the traces are priced on."""
    report: reactive[TraceReport | None] = reactive(None, always_update=True)
    """What the traces say, once read."""

    def __init__(self, trace_paths: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.trace_paths = trace_paths
        self._rows: list[CollectiveRow] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="steps-summary-scroll"):
            yield Static(id="steps-summary", markup=False)
        with VerticalScroll(id="step-bars-scroll"):
            yield Static(id="step-bars", markup=False)
        yield KeptTable(id="steps-table", classes="initial-focus")
        yield Static(id="steps-status", markup=False)

    def on_mount(self) -> None:
        if not self.trace_paths:
            self._summary(Text("No traces loaded. Open the app with the job's profiler traces:\n"
                               "  linkscope open SOURCE --trace DIR   (one .json/.json.gz per rank)\n"
                               "or read them without the app: linkscope trace DIR --source SOURCE"))

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None or not self.trace_paths or not self.is_mounted:
            return
        self._summary(Text(f"reading {len(self.trace_paths)} trace path(s)..."))
        self.read_traces(self.trace_paths, snapshot)

    @work(thread=True, exclusive=True, group="traces")
    def read_traces(self, paths: tuple[str, ...], snapshot: Snapshot) -> None:
        """Read, price and analyse the traces off the UI thread."""
        from linkscope.probes.cpus import idle_cpus
        from linkscope.topo.model.provenance import gpu_names
        from linkscope.topo.trace.files import place_traces, trace_paths
        from linkscope.topo.trace.pool import default_jobs, read_traces
        from linkscope.topo.trace.report import analyse

        try:
            files = trace_paths(paths)

            def on_read(count: int) -> None:
                self.app.call_from_thread(self._summary, Text(f"reading traces: {count} of {len(files)}..."))

            traces = read_traces(files, default_jobs(files, idle_cpus), on_read=on_read)
            report = analyse(traces, place_traces(snapshot, traces), machine_gpus=gpu_names(snapshot))
        except InputError as exc:
            self.app.call_from_thread(self._summary, plain(f"Cannot read the traces: {printable(str(exc))}", "bold"))
            return
        self.app.call_from_thread(setattr, self, "report", report)

    def watch_report(self, report: TraceReport | None) -> None:
        if report is None or not self.is_mounted:
            return
        ranks = sorted({t.rank for t in report.traces if t.rank is not None})
        summary = Text(printable(f"{len(report.traces)} trace(s), ranks {rank_ranges(ranks) or '?'}"
                                 + _hosts_said(report)))
        if report.straggler is not None:
            s = report.straggler
            summary.append(printable(f"; last to arrive: rank {s.rank}" + (f" ({s.host})" if s.host else "")
                                     + f", {s.last_arrivals} of {s.matched_calls} calls"), style="bold")
        if report.placed is not None:
            summary.append("\nplaced: " + printable(report.placed.line))
        summary.append(f"\njudged: {_judged_said(report)}")
        if (assumed := report.assumed_groups_note()) is not None:
            summary.append(f"\nnote: {assumed}", style="bold")
        for finding in report.findings:
            summary.append(f"\n{finding.severity} {finding.code}: ", style="bold")
            summary.append(printable(finding.message))
        if (verdict := report.verdict_line()) is not None:
            summary.append(f"\n{verdict}", style="" if verdict == "No findings." else "bold yellow")
        self._summary(summary)
        self.query_one("#step-bars", Static).update(step_bars(report.steps, self.size.width or 80))
        priced = report.slowest(TABLE_ROWS)
        self._rows = priced or sorted(report.collectives, key=lambda row: -row.call.duration_us)[:TABLE_ROWS]
        table = self.query_one("#steps-table", DataTable)
        table.clear(columns=True)
        # most telling first (how far below its links a call ran), so 80 columns show it; the group last
        columns = ["rank", "step", "op", "size", "ms"]
        if priced:
            columns += ["expected ms", "speed", "link"]
        table.add_columns(*columns, "busbw GB/s", "ranks")
        for row in self._rows:
            call = row.call
            cells = [plain(row.rank), plain(call.step), plain(call.op),
                     plain(format_size_bytes(call.size_bytes) if call.size_bytes is not None else "?"),
                     ms_label(call.duration_us)]
            if priced:
                ratio = row.ratio
                cells += [ms_label(row.expected.time_us) if row.expected else plain("-"),
                          plain(format_share(ratio) if ratio is not None else "-",
                                "bold red" if ratio is not None and ratio < DEGRADED_FRACTION else ""),
                          plain(printable(row.expected.link) if row.expected else "-")]
            group = rank_ranges(call.group_ranks) if call.group_ranks else str(call.group_size or "?")
            cells += [plain(f"{row.busbw_gbps:.1f}" if row.busbw_gbps is not None else "-"),
                      plain(f"{group} (assumed: whole job)" if row.group_assumed else group,
                            "italic" if row.group_assumed else "")]
            table.add_row(*cells)
        title = ("furthest below their links" if priced else
                 f"longest, not priced: {printable(report.why_unpriced())}")
        self.query_one("#steps-status", Static).update(plain(f"Enter: a call's ring on Links (1). Collectives {title}"))

    def on_resize(self) -> None:
        if self.report is not None:
            self.query_one("#step-bars", Static).update(step_bars(self.report.steps, self.size.width or 80))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_show_ring()

    def action_show_ring(self) -> None:
        """Send the chosen collective's group ring to the Links tab (its ranks where the report placed them)."""
        table = self.query_one("#steps-table", DataTable)
        placed = self.report.placed if self.report is not None else None
        if not self._rows or placed is None:
            return
        row = self._rows[min(table.cursor_row, len(self._rows) - 1)]
        members = row.call.group_ranks
        if not members:
            self.query_one("#steps-status", Static).update(plain("this call's trace does not name its group's ranks"))
            return
        if placed.placement is None or max(members) >= placed.placement.world_size:
            self.query_one("#steps-status", Static).update(plain(printable(f"no ring to draw: {placed.line}")))
            return
        ring = GroupPricer(placed.placement, CostModel()).ring_order(members)
        overlay = ring_overlay(ring, placed.placement.pairs())
        label = f"{row.call.op} group (ranks {rank_ranges(members)})"
        self.post_message(RingChosen(label, overlay.node, overlay.hops, overlay.off_node_hops))
        self.query_one("#steps-status", Static).update(plain(f"{label}: ring drawn on the Links tab (1)"))

    def _summary(self, text: Text) -> None:
        self.query_one("#steps-summary", Static).update(text)
