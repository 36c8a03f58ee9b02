"""Bench: run peer-copy and collective benchmarks on demand, with progress, cancel, a table and a plot.

The run happens in a thread worker through the services (which start the engine's child
processes); progress and the result come back as messages. Results go up to the app, which
puts them into the snapshot so the Links grid and the checker use them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Button, DataTable, Input, Label, ProgressBar, Select, Static

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.sizes import format_size_bytes, parse_size_bytes
from linkscope.topo.cost.expect import Expected, RowExpectations, placement_lines, row_expectations, summary
from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.messages import BenchFinished, BenchProgressed, MeasurementsArrived
from linkscope.tui.services import BENCH_KINDS, NO_BENCH_PLAN, BenchPlan, BenchProgress, BenchRequest, Services, Unavailable
from linkscope.tui.text import gbps_label, not_this_machine, plain
from linkscope.tui.widgets.bandwidth_plot import BandwidthPlot
from linkscope.tui.widgets.kept_table import KeptTable

SIZE_FACTOR = 4
"""Sizes grow by this factor between `from` and `to`."""
GLOO_MAX_SIZE = "16M"
"""Largest size offered for gloo on CPUs (as `linkscope bench collectives --backend gloo` defaults to)."""


def sweep(min_bytes: int, max_bytes: int) -> tuple[int, ...]:
    """The sizes from `min_bytes` to `max_bytes` by :data:`SIZE_FACTOR` (the engine's own sweep rule)."""
    from linkscope.probes.bench.spec import size_sweep

    return size_sweep(min_bytes, max_bytes, SIZE_FACTOR)


def data_label(verified: bool | None) -> Text:
    """Whether a copy's data was checked and arrived intact: `ok`, `CORRUPTED` (red) or `-` (not checked)."""
    if verified is None:
        return Text("-")
    return Text("ok") if verified else Text("CORRUPTED", style="bold red")


def peer_copy_points(copies: Iterable[PeerCopy]) -> tuple[tuple[int, float], ...]:
    """Mean unidirectional GB/s over all GPU pairs, per size."""
    by_size: dict[int, list[float]] = {}
    for copy in copies:
        if copy.size_bytes is not None and copy.unidir_gbps is not None:
            by_size.setdefault(copy.size_bytes, []).append(copy.unidir_gbps)
    return tuple((size, sum(values) / len(values)) for size, values in sorted(by_size.items()))


def collective_points(results: Iterable[CollectiveResult], op: str) -> tuple[tuple[int, float], ...]:
    """Best bus bandwidth per size for `op`."""
    by_size: dict[int, float] = {}
    for result in results:
        if result.op == op:
            by_size[result.size_bytes] = max(by_size.get(result.size_bytes, 0.0), result.busbw_gbps)
    return tuple(sorted(by_size.items()))


VERDICT_STYLES: dict[str, str] = {"ok": "", "slow": "bold yellow", "far below": "bold reverse red",
                                  "faster than model": "bold magenta"}
"""How each verdict of :func:`topo.cost.expect.verdict` is shown in the table."""


def expected_cells(expected: Expected | None) -> list[Text]:
    """The expected GB/s, measured/expected and the verdict of one row (dashes where unknown)."""
    if expected is None or expected.expected_gbps is None:
        return [Text("-"), Text("-"), Text("-")]
    ratio, verdict = expected.ratio, expected.verdict
    return [Text(gbps_label(expected.expected_gbps)), Text("-" if ratio is None else f"{ratio:.0%}"),
            Text(verdict or "-", style=VERDICT_STYLES.get(verdict or "", ""))]


def expected_points(rows: Iterable[tuple[int | None, Expected | None]]) -> tuple[tuple[int, float], ...]:
    """Per size, the mean of what the model expects for the rows of that size (the plot's markers)."""
    by_size: dict[int, list[float]] = {}
    for size, expected in rows:
        if size is not None and expected is not None and expected.expected_gbps is not None:
            by_size.setdefault(size, []).append(expected.expected_gbps)
    return tuple((size, sum(values) / len(values)) for size, values in sorted(by_size.items()))


def judged_line(expected: RowExpectations, rows: int, why_not: str) -> Text:
    """Where the rows' ranks were placed and how many were judged (as `import --expect` says it), or why none was:
    never a clean verdict when nothing was judged."""
    asked = [*expected.collectives, *expected.peer_copies, *expected.host_copies]
    if not asked:
        return Text(f"NOTHING JUDGED: {rows} row(s): {why_not}", style="bold yellow") if rows else Text()
    text = Text()
    for line in placement_lines([row for row in asked if row is not None]):
        text.append(f"placed: {line}\n")
    said = summary(asked)
    text.append(said, style="bold yellow" if said.startswith("NOTHING JUDGED") else "")
    return text


def _short(name: str, most: int = 48) -> str:
    """A source or file name short enough for the two-line status at 80 columns."""
    return name if len(name) <= most else name[:16] + "..." + name[-(most - 19):]


class BenchView(Vertical):
    """The Bench tab; the app sets `snapshot` and `live`. `r` runs what this machine can run, `s` stops.

    Benchmarks always measure this machine: GPU benchmarks where it has GPUs, gloo collectives on its CPUs where
    it has none. When the snapshot on show is another machine (a sample, a saved snapshot), results are shown here
    as this machine's and do not replace the snapshot's figures on Links and Ranks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "Run"),
        Binding("s", "stop", "Stop"),
    ]

    live: reactive[bool] = reactive(False)
    """Whether the snapshot is this machine now (bound from the app)."""
    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot on show (its measurements are shown until a run here replaces them)."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.plan: BenchPlan = NO_BENCH_PLAN
        """What this machine can run (asked once, in a worker)."""
        self.running = False
        self._cancel = threading.Event()
        self._request: BenchRequest | None = None
        self._shown_here = False
        """True when the table shows a run on this machine rather than the snapshot's measurements."""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="form-row"):
            yield Label("benchmark", classes="form-label")
            yield Select([(kind, kind) for kind in BENCH_KINDS], id="bench-kind", value="p2p", allow_blank=False, compact=True)
            yield Label("from", classes="form-label")
            yield Input("1M", id="bench-min", compact=True, classes="bench-size")
            yield Label("to", classes="form-label")
            yield Input("256M", id="bench-max", compact=True, classes="bench-size")
            yield Button("Run", id="bench-run", compact=True, disabled=True)
            yield Button("Stop", id="bench-stop", compact=True, disabled=True)
        yield Static(id="bench-status", markup=False)
        yield Static(id="bench-judged", markup=False)
        yield ProgressBar(id="bench-progress", total=1.0, show_eta=False)
        with Horizontal(id="bench-body"):
            yield KeptTable(id="bench-table")
            yield BandwidthPlot(id="bench-plot")

    def on_mount(self) -> None:
        self._show_plan()
        self.find_plan()

    @work(thread=True, exclusive=True, group="bench-plan")
    def find_plan(self) -> None:
        """Ask the services what this machine can run (may look for GPUs)."""
        plan = self.services.bench_plan()
        self.app.call_from_thread(self._plan_found, plan)

    def _plan_found(self, plan: BenchPlan) -> None:
        self.plan = plan
        if plan.kinds:
            select = self.query_one("#bench-kind", Select)
            select.set_options([(kind, kind) for kind in plan.kinds])
            select.value = plan.kinds[0]
            if plan.backend == "gloo":  # CPU processes: the sizes the command line's gloo sweep uses
                self.query_one("#bench-max", Input).value = GLOO_MAX_SIZE
        self._show_plan()

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        """Show the measurements the snapshot carries (unless a run here is on show) and say what can run."""
        if snapshot is None or not self.is_mounted:
            return
        if snapshot.measurements is not None and not self.running:
            self._shown_here = False
            self.show_results(snapshot.measurements)
        self._show_plan()

    def _show_plan(self) -> None:
        """The status: what runs here and on what, what cannot and why, whose results are shown."""
        if not self.is_mounted:
            return
        plan, snapshot = self.plan, self.snapshot
        runnable = bool(plan.kinds)
        self.query_one("#bench-run", Button).display = runnable
        self.query_one("#bench-run", Button).disabled = not runnable or self.running
        self.query_one("#bench-stop", Button).display = runnable
        self.app.refresh_bindings()
        if self.running:
            return
        text = Text()
        if runnable:
            text.append(f"Runs here: {plan.where}. ", style="bold")
        else:
            text.append("Nothing can run here. ", style="bold")
        for reason in plan.cannot:
            text.append(f"{reason}. " if runnable else f"{reason[:1].upper()}{reason[1:]}. ")
        if snapshot is not None and not self.live:
            if runnable:
                text.append(f"{not_this_machine(snapshot.source)}: a run measures this machine, not it. ")
            if snapshot.measurements is not None and not self._shown_here:
                text.append(f"Shown: results of {_short(snapshot.measurements.source)}. ")
        if runnable:
            text.append("r: run")
        self._set_status(text)

    @property
    def _measures_snapshot(self) -> bool:
        """Whether a run here measures the links of the snapshot on show: it is this machine, and the run uses its GPUs."""
        return self.live and self.plan.backend == "nccl"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`r Run` only where something can run (hidden otherwise); `s Stop` only while a run goes on."""
        if action == "run":
            return bool(self.plan.kinds)
        if action == "stop":
            return True if self.running else None
        return True

    def _set_status(self, text: Text) -> None:
        self.query_one("#bench-status", Static).update(text)  # height auto: the sentence may take several lines

    def read_request(self) -> BenchRequest:
        """The form as a request; InputError naming the field when it is not valid."""
        kind = str(self.query_one("#bench-kind", Select).value)
        min_bytes = parse_size_bytes(self.query_one("#bench-min", Input).value, "from")
        max_bytes = parse_size_bytes(self.query_one("#bench-max", Input).value, "to")
        return BenchRequest(kind=kind, sizes_bytes=sweep(min_bytes, max_bytes))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "bench-run":
            self.action_run()
        elif event.button.id == "bench-stop":
            self.action_stop()

    def action_run(self) -> None:
        """Start the benchmark in the form (refused while one runs or when unavailable)."""
        if self.running:
            return
        if not self.plan.kinds:
            return
        try:
            request = self.read_request()
        except InputError as exc:
            self._set_status(plain(str(exc)))
            return
        self._request = request
        self._cancel = threading.Event()
        self.running = True
        self.app.refresh_bindings()
        self.query_one("#bench-run", Button).disabled = True
        self.query_one("#bench-stop", Button).disabled = False
        self.query_one(ProgressBar).update(progress=0.0)
        sizes = f"{format_size_bytes(request.sizes_bytes[0])} to {format_size_bytes(request.sizes_bytes[-1])}"
        self._set_status(plain(f"Running {request.kind} ({self.plan.where}), {len(request.sizes_bytes)} sizes from "
                               f"{sizes}... (s: stop)"))
        self.run_request(self.plan, request, self._cancel)

    def action_stop(self) -> None:
        """Ask the running benchmark to stop (its workers are ended by the engine)."""
        if self.running:
            self._cancel.set()
            self._set_status(Text("Stopping..."))

    @work(thread=True, exclusive=True, group="bench")
    def run_request(self, plan: BenchPlan, request: BenchRequest, cancel: threading.Event) -> None:
        """Run the benchmark off the UI thread; post progress and the outcome."""

        def report(progress: BenchProgress) -> None:
            self.post_message(BenchProgressed(progress))

        try:
            measurements = self.services.run_bench(plan, request, report, cancel)
        except (InputError, Unavailable) as exc:
            self.post_message(BenchFinished(None, cancelled=cancel.is_set(), error=str(exc)))
            return
        except Exception as exc:  # an engine failure is reported, not raised into the app
            self.post_message(BenchFinished(None, cancelled=cancel.is_set(), error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(BenchFinished(measurements, cancelled=cancel.is_set()))

    def on_bench_progressed(self, message: BenchProgressed) -> None:
        message.stop()
        progress = message.progress
        self.query_one(ProgressBar).update(progress=progress.fraction)
        self._set_status(plain(f"{progress.label} ({progress.fraction:.0%})  s: stop"))
        if progress.partial is not None:
            self._shown_here = True
            self.show_results(progress.partial)

    def on_bench_finished(self, message: BenchFinished) -> None:
        """Show the outcome; hand measurements to the app for the Links grid and the checker."""
        message.stop()
        self.running = False
        self.app.refresh_bindings()
        self.query_one("#bench-run", Button).disabled = not self.plan.kinds
        self.query_one("#bench-stop", Button).disabled = True
        if message.error is not None:
            self._set_status(plain(f"Benchmark failed: {message.error}"))
            return
        measurements = message.measurements
        if measurements is None:
            return
        self._shown_here = True
        self.show_results(measurements)
        used = ("the Links grid and the Ranks checker now use them" if self._measures_snapshot else
                f"these are this machine's, so Links and Ranks keep the figures of "
                f"{_short(self.snapshot.source or 'the snapshot') if self.snapshot is not None else 'the snapshot'}")
        if message.cancelled:
            self._set_status(plain(f"Stopped; the sizes measured before the stop are shown; {used}."))
        else:
            self.query_one(ProgressBar).update(progress=1.0)
            self._set_status(plain(f"Done: {self.plan.where}; {used}."))
        if self._measures_snapshot and (measurements.peer_copies or measurements.collectives):
            self.post_message(MeasurementsArrived(measurements))

    def show_results(self, measurements: Measurements) -> None:
        """Fill the table and the plot from `measurements`."""
        table: DataTable[Text] = self.query_one("#bench-table", DataTable)
        plot = self.query_one(BandwidthPlot)
        table.clear(columns=True)
        expected = RowExpectations()
        if self.snapshot is not None and (self._measures_snapshot or not self._shown_here):  # on the links crossed
            expected = row_expectations(measurements, self.snapshot)
        why_not = ("a run here measures this machine's CPU processes or another machine than the one on show: no link "
                   "of it to judge them against" if self.snapshot is not None else "no machine to judge them against")
        rows = len(measurements.peer_copies) or len(measurements.collectives)
        self.query_one("#bench-judged", Static).update(judged_line(expected, rows, why_not))
        if measurements.peer_copies:
            peer_expected = expected.peer_copies or (None,) * len(measurements.peer_copies)
            # the judgement first (measured, expected, ratio, verdict): the pane beside the plot is narrow
            table.add_columns("src", "dst", "size", "GB/s", "expect", "ratio", "verdict", "bidir", "latency us", "data")
            table.add_rows(
                [
                    Text(f"GPU{copy.src}"),
                    Text(f"GPU{copy.dst}"),
                    Text(format_size_bytes(copy.size_bytes) if copy.size_bytes else "-"),
                    Text(gbps_label(copy.unidir_gbps)),
                    *expected_cells(each),
                    Text(gbps_label(copy.bidir_gbps)),
                    Text(f"{copy.latency_us:.1f}" if copy.latency_us is not None else "-"),
                    data_label(copy.verified),
                ]
                for copy, each in zip(measurements.peer_copies, peer_expected, strict=True)
            )
            plot.title = "peer copy GB/s (mean over pairs)"
            plot.points = peer_copy_points(measurements.peer_copies)
            plot.expected = expected_points((copy.size_bytes, each) for copy, each in zip(measurements.peer_copies,
                                                                                          peer_expected, strict=True))
            if not plot.points:
                plot.empty_message = f"{measurements.source} does not say its buffer sizes: nothing to plot against size."
        elif measurements.collectives:
            collective_expected = expected.collectives or (None,) * len(measurements.collectives)
            table.add_columns("op", "size", "busbw", "expect", "ratio", "verdict", "time us", "algbw", "ranks", "wrong")
            table.add_rows(
                [
                    Text(result.op),
                    Text(format_size_bytes(result.size_bytes)),
                    Text(gbps_label(result.busbw_gbps)),
                    *expected_cells(each),
                    Text(f"{result.time_us:.1f}"),
                    Text(gbps_label(result.algbw_gbps)),
                    Text("?" if result.nranks is None else str(result.nranks)),
                    Text("-" if result.wrong is None else str(result.wrong)),
                ]
                for result, each in zip(measurements.collectives, collective_expected, strict=True)
            )
            op = measurements.collectives[0].op
            plot.title = f"{op} busbw GB/s"
            plot.points = collective_points(measurements.collectives, op)
            plot.expected = expected_points((result.size_bytes, each) for result, each in
                                            zip(measurements.collectives, collective_expected, strict=True)
                                            if result.op == op)
