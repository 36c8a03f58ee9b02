"""App-level messages: small dataclasses that the tabs and workers post upwards.

Workers run on threads and never touch widgets; they post one of these and the app (on the UI
thread) sets the attributes of the widgets that show it ("attributes down, messages up").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from linkscope.tui.services import BenchProgress, LayoutForm

if TYPE_CHECKING:
    from linkscope.probes.live import LiveReading
    from linkscope.topo.checks.report import CheckReport
    from linkscope.topo.checks.suggest import Suggestion
    from linkscope.topo.model.measurements import Measurements
    from linkscope.topo.model.snapshot import Snapshot
    from linkscope.tui.host_health import HostHealth


@dataclass
class SnapshotLoaded(Message):
    """A snapshot finished loading (probe, file or sample) and replaces the one on show."""

    snapshot: Snapshot
    notice: str | None = None
    live: bool = False
    """True when the snapshot is this machine now (probed by this process): live counters and benchmarks apply."""
    printable: bool = False
    """True when its strings were already made printable (by the loading worker)."""


@dataclass
class SnapshotFailed(Message):
    """Loading a snapshot failed; `reason` is one line for the user."""

    reason: str


@dataclass
class HostPicked(Message):
    """A tab picked a host of a cluster (the hosts table, `h`): every tab shows that host."""

    index: int
    """Position of the host in `Snapshot.hosts`."""


@dataclass
class HostsJudged(Message):
    """The health rules ran over `snapshot` (in a worker): the odd hosts and each GPU's codes."""

    snapshot: Snapshot
    health: HostHealth


@dataclass
class RingChosen(Message):
    """The Ranks tab picked a group: draw its ring on the Links grid (empty: clear it)."""

    label: str
    node: int
    """Node (host index) whose links the hops are on."""
    hops: tuple[tuple[int, int], ...]
    """(GPU position, GPU position) pairs on the shown host that the ring crosses, in ring order."""
    off_node_hops: int = 0
    """Hops of the ring that leave the host (drawn as a note, not as a cell)."""


@dataclass
class MeasurementsArrived(Message):
    """A benchmark produced measurements: they feed the Links grid and the checker."""

    measurements: Measurements


@dataclass
class LiveReadingArrived(Message):
    """The live sampler read the counters once."""

    reading: LiveReading


@dataclass
class LiveUnavailable(Message):
    """There is no live data for this snapshot; `reason` says why."""

    reason: str


@dataclass
class BenchProgressed(Message):
    """A benchmark run advanced (high-rate; each one replaces the previous)."""

    progress: BenchProgress

    def can_replace(self, message: Message) -> bool:
        """A newer progress message makes an older queued one redundant."""
        return isinstance(message, BenchProgressed)


@dataclass
class BenchFinished(Message):
    """A benchmark run ended: with measurements, cancelled, or failed (then `error` is set)."""

    measurements: Measurements | None
    cancelled: bool = False
    error: str | None = None


@dataclass
class LayoutChecked(Message):
    """The checker finished with the form's layout: a report, or one line saying why not."""

    form: LayoutForm
    report: CheckReport | None
    error: str | None = None
    elapsed_ms: float = 0.0


@dataclass
class SuggestionReady(Message):
    """The slower search for a better layout finished for `form` (None: nothing better)."""

    form: LayoutForm
    suggestion: Suggestion | None
