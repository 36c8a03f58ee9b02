"""Monitor: live NVLink and PCIe throughput, error-counter deltas and PCIe link state per GPU.

A thread worker reads the sampler once a second and posts each reading; on a built-in sample or a saved
snapshot there are no live counters, and the tab says so instead of showing numbers. A snapshot
that carries a `linkscope record` recording is replayed at its recorded pace, saying so: those are
real counters of the box that recorded them, not of this machine now.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from linkscope.probes.live import GpuLive, LiveReading
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.messages import LiveReadingArrived, LiveUnavailable
from linkscope.tui.services import Services, Unavailable
from linkscope.tui.text import gbps_label, not_this_machine, plain
from linkscope.tui.widgets.kept_table import KeptTable

GPU_COLUMNS = ("GPU", "NVLink TX\nGB/s", "NVLink RX\nGB/s", "PCIe TX\nGB/s", "PCIe RX\nGB/s", "errors\nnew", "PCIe\ngen",
               "PCIe\nwidth")
"""Two-line headers: each rate column carries its unit and the table still fits 80 columns."""
LINK_COLUMNS = ("link", "TX GB/s", "RX GB/s")


def _pair(current: int | None, maximum: int | None, prefix: str) -> Text:
    """`cur/max`, marked when the current value is below the maximum."""
    if current is None and maximum is None:
        return Text("-")
    text = Text(f"{prefix}{current if current is not None else '?'}/{maximum if maximum is not None else '?'}")
    if current is not None and maximum is not None and current < maximum:
        text.append(" <", style="bold")
    return text


def _errors(gpu: GpuLive) -> Text:
    total = sum(delta for _, delta in gpu.nvlink_error_deltas)
    if not gpu.nvlink_error_deltas:
        return Text("-" if not gpu.nvlink_errors else "0")
    if total == 0:
        return Text("0")
    changed = ", ".join(f"{name} +{delta}" for name, delta in gpu.nvlink_error_deltas if delta)
    return Text(changed, style="bold reverse")


def gpu_row(gpu: GpuLive) -> list[Text]:
    """One table row for a GPU's reading."""
    return [
        plain(f"GPU{gpu.index}"),
        Text(gbps_label(gpu.nvlink_tx_gbps)),
        Text(gbps_label(gpu.nvlink_rx_gbps)),
        Text(gbps_label(gpu.pcie_tx_gbps)),
        Text(gbps_label(gpu.pcie_rx_gbps)),
        _errors(gpu),
        _pair(gpu.pcie_gen_current, gpu.pcie_gen_max, "Gen"),
        _pair(gpu.pcie_width_current, gpu.pcie_width_max, "x"),
    ]


def recorded_link_state(host: Host) -> tuple[GpuLive, ...]:
    """The PCIe generation and width each GPU had when the snapshot was taken (empty if none was recorded)."""
    if not any(gpu.pcie_gen_current is not None or gpu.pcie_width_current is not None for gpu in host.gpus):
        return ()
    return tuple(
        GpuLive(
            index=gpu.index,
            pcie_gen_current=gpu.pcie_gen_current,
            pcie_gen_max=gpu.pcie_gen_max,
            pcie_width_current=gpu.pcie_width_current,
            pcie_width_max=gpu.pcie_width_max,
        )
        for gpu in host.gpus
    )


class MonitorView(Vertical):
    """The Monitor tab; the app sets `snapshot`, which starts (or stops) the sampling worker."""

    live: reactive[bool] = reactive(False)
    """Whether the snapshot is this machine now (bound from the app)."""
    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot on show; only one probed on this machine has live counters."""

    interval_s = 1.0
    """Seconds between two readings."""

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.reading: LiveReading | None = None
        """Set by the app: True when the snapshot is this machine now (else there are no counters to read)."""
        self._selected = 0
        self._replay: list[LiveReading] = []
        self._replay_at = 0
        self._replay_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("Waiting for a snapshot...", id="monitor-status", markup=False)
        yield KeptTable(id="monitor-gpus")
        yield Static("Per link of the selected GPU:", id="monitor-links-title", markup=False)
        yield KeptTable(id="monitor-links")

    def on_mount(self) -> None:
        gpus = self.query_one("#monitor-gpus", DataTable)
        gpus.header_height = 2
        gpus.add_columns(*GPU_COLUMNS)
        self.query_one("#monitor-links", DataTable).add_columns(*LINK_COLUMNS)

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        """Start sampling the new snapshot's machine (the previous worker is cancelled)."""
        if snapshot is None or not self.is_mounted:
            return
        if self.live and any(worker.group == "live" and worker.is_running for worker in self.workers):
            return
        self.reading = None
        self.query_one("#monitor-gpus", DataTable).clear()
        self.query_one("#monitor-links", DataTable).clear()
        self._stop_replay()
        if not self.live and snapshot.recording is not None and snapshot.recording.samples:
            self.workers.cancel_group(self, "live")
            self._start_replay(snapshot)
            return
        if not self.live:
            self.workers.cancel_group(self, "live")
            self.post_message(LiveUnavailable(f"No live counters: {not_this_machine(snapshot.source)}"))
            return
        self.query_one("#monitor-status", Static).update(Text("Opening the counters..."), layout=False)
        self.sample(snapshot)

    @work(thread=True, exclusive=True, group="live")
    def sample(self, snapshot: Snapshot) -> None:
        """Read the counters every `interval_s` until cancelled; post each reading."""
        worker = get_current_worker()
        try:
            feed = self.services.open_live(snapshot)
        except Unavailable as exc:
            self.post_message(LiveUnavailable(str(exc)))
            return
        try:
            while not worker.is_cancelled:
                started = time.monotonic()
                try:
                    reading = feed.read()
                except Exception as exc:  # a lost GPU or a driver error ends sampling, not the app
                    self.post_message(LiveUnavailable(f"reading the counters failed: {exc}"))
                    return
                if not reading.available:
                    reasons = "; ".join(f"{gap.subject}: {gap.reason}" for gap in reading.gaps) or "NVML did not start"
                    self.post_message(LiveUnavailable(f"no live data ({reasons})"))
                    return
                self.post_message(LiveReadingArrived(reading))
                while not worker.is_cancelled and time.monotonic() - started < self.interval_s:
                    time.sleep(0.05)
        finally:
            feed.close()

    def _start_replay(self, snapshot: Snapshot) -> None:
        """Show the recording's first reading now and the next ones at the recorded interval."""
        from linkscope.probes.record import replay_readings

        recording = snapshot.recording
        assert recording is not None
        fallback = snapshot.hosts[0] if snapshot.hosts else None
        host = next((h for h in snapshot.hosts if h.hostname == recording.hostname), fallback)
        self._replay = replay_readings(recording, host)
        self._replay_at = 0
        self._show_replayed()
        if len(self._replay) > 1:
            self._replay_timer = self.set_interval(recording.interval_s, self._next_replayed)

    def _stop_replay(self) -> None:
        if self._replay_timer is not None:
            self._replay_timer.stop()
            self._replay_timer = None
        self._replay = []

    def _next_replayed(self) -> None:
        if self._replay_at + 1 >= len(self._replay):
            if self._replay_timer is not None:
                self._replay_timer.stop()
                self._replay_timer = None
            return
        self._replay_at += 1
        self._show_replayed()

    def _show_replayed(self) -> None:
        recording = self.snapshot.recording if self.snapshot is not None else None
        if recording is None or not self._replay:
            return
        reading = self._replay[self._replay_at]
        self._show_reading(reading)
        ended = self._replay_at + 1 == len(self._replay)
        status = plain(f"Replaying a recording of {recording.hostname} (started {recording.started or '?'}, "
                       f"{len(self._replay)} readings every {recording.interval_s:g} s): t = {reading.timestamp_s:g} s, "
                       f"reading {self._replay_at + 1} of {len(self._replay)}{' - end of recording' if ended else ''}")
        status.append("   recorded counters of that box, not this machine now", style="bold")
        self.query_one("#monitor-status", Static).update(status, layout=False)

    def _show_reading(self, reading: LiveReading) -> None:
        """Redraw both tables from `reading`, keeping the selected row."""
        self.reading = reading
        table: DataTable[Text] = self.query_one("#monitor-gpus", DataTable)
        row = table.cursor_row
        table.clear()
        table.add_rows(gpu_row(gpu) for gpu in reading.gpus)
        if 0 <= row < table.row_count:
            table.move_cursor(row=row, animate=False)
        self._show_links()

    def on_live_unavailable(self, message: LiveUnavailable) -> None:
        """Say why there are no live numbers; show the PCIe link state the snapshot recorded, if any."""
        message.stop()
        recorded = recorded_link_state(self.snapshot.host) if self.snapshot is not None and self.snapshot.hosts else ()
        table: DataTable[Text] = self.query_one("#monitor-gpus", DataTable)
        table.clear()
        if recorded:
            table.add_rows(gpu_row(gpu) for gpu in recorded)
            note = "; the table shows only the PCIe link state recorded in the snapshot (no rates, no error deltas)."
        else:
            note = "; nothing to show."
        self.query_one("#monitor-status", Static).update(plain(message.reason + note), layout=False)

    def on_live_reading_arrived(self, message: LiveReadingArrived) -> None:
        """Redraw both tables from the new reading, keeping the selected row."""
        message.stop()
        host = self.snapshot.host.hostname if self.snapshot is not None and self.snapshot.hosts else "this machine"
        status = plain(f"Live counters of {host} in GB/s, every {self.interval_s:g} s")
        status.append("   '<' marks a PCIe link below its maximum (an idle GPU may train down; width below max is a fault)")
        self.query_one("#monitor-status", Static).update(status, layout=False)
        self._show_reading(message.reading)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "monitor-gpus":
            self._selected = event.cursor_row
            self._show_links()

    def _show_links(self) -> None:
        table: DataTable[Text] = self.query_one("#monitor-links", DataTable)
        table.clear()
        if self.reading is None or not 0 <= self._selected < len(self.reading.gpus):
            return
        gpu = self.reading.gpus[self._selected]
        self.query_one("#monitor-links-title", Static).update(plain(f"Per link of GPU{gpu.index}:"), layout=False)
        table.add_rows(
            [Text(str(link.link)), Text(gbps_label(link.tx_gbps)), Text(gbps_label(link.rx_gbps))] for link in gpu.links
        )
