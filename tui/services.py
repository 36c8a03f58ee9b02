"""The app's I/O layer as an interface: loading snapshots, live counters, benchmarks, the checker.

The app receives a :class:`Services` in its constructor and never calls probes directly, so tests
hand it a fake and the tabs stay free of hardware code. Every method here may block; the app
only calls them from thread workers. The real implementation is :class:`tui.local_services.LocalServices`;
this module holds only the interface and the values that cross it, so nothing here imports an implementation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from linkscope.topo.common.frozen import frozen

if TYPE_CHECKING:
    from linkscope.probes.live import LiveReading
    from linkscope.topo.checks.report import CheckReport
    from linkscope.topo.layout.placement import Distribution
    from linkscope.topo.model.measurements import Measurements
    from linkscope.topo.model.snapshot import Snapshot



class Unavailable(Exception):
    """A service cannot run here; the message is one line for the user (no GPU, no checker...)."""


class LiveFeed(Protocol):
    """An open counter sampler: each `read()` returns rates since the previous one."""

    def read(self) -> LiveReading:
        """Read the counters once; rates are over the time since the previous read (may block briefly)."""
        ...

    def close(self) -> None:
        """Release the sampler."""
        ...


BENCH_KINDS: tuple[str, ...] = ("p2p", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")
"""Benchmarks the Bench tab offers: peer copies between every GPU pair, then collectives."""


@frozen
class BenchPlan:
    """What this machine can benchmark, found out once: which kinds run, on what, and what cannot and why."""

    kinds: tuple[str, ...]
    """The kinds of :data:`BENCH_KINDS` that can run here (empty: nothing can)."""
    backend: str | None = None
    """`nccl` (one process per GPU) or `gloo` (processes on this machine's CPUs); None when nothing runs."""
    processes: int = 0
    """Processes a collective runs in."""
    where: str = ""
    """What runs, in words: `NCCL on this machine's 8 GPUs`, `gloo on this machine's CPUs (2 processes)`."""
    cannot: tuple[str, ...] = ()
    """What cannot run here, each with why (one line each)."""


NO_BENCH_PLAN = BenchPlan(kinds=(), cannot=("looking for GPUs and torch...",))
"""The plan before the services have answered."""


@frozen
class BenchRequest:
    """What to measure: `p2p` peer copies or one collective, over a sweep of sizes."""

    kind: str
    sizes_bytes: tuple[int, ...]


@frozen
class BenchProgress:
    """How far a benchmark run is, with what it measured so far."""

    fraction: float
    label: str
    partial: Measurements | None = None


@frozen
class LayoutForm:
    """The Ranks tab's form, as plain values: what `linkscope check` takes on its command line."""

    sizes: tuple[tuple[str, int], ...]
    """Dimensions given explicitly; a missing `dp` is inferred from the cluster size."""
    order: str = "tp-cp-ep-dp-pp"
    nodes: int = 1
    distribution: Distribution = "block"
    visible_devices: tuple[int, ...] | None = None
    """CUDA_VISIBLE_DEVICES for every node, as GPU indices; None for all GPUs in order."""
    model: str | None = None

    def cli_args(self) -> list[str]:
        """The `linkscope check` arguments that reproduce this form."""
        args: list[str] = []
        for dim, size in self.sizes:
            if size != 1:
                args += [f"--{dim}", str(size)]
        args += ["--order", self.order, "--nodes", str(self.nodes), "--distribution", self.distribution]
        if self.visible_devices is not None:
            args += ["--visible-devices", ",".join(map(str, self.visible_devices))]
        if self.model:
            args += ["--model", self.model]
        return args


class Services(Protocol):
    """Everything the app asks of the outside world. Every call may block: call from workers."""

    def load_snapshot(self, source: str | None) -> Snapshot:
        """Load `source` (file, `sample:NAME`) or probe this machine when it is None."""
        ...

    def sample_names(self) -> list[str]:
        """Names of the built-in sample machines."""
        ...

    def open_live(self, snapshot: Snapshot) -> LiveFeed:
        """Open the counter sampler of this machine (whose probe is `snapshot`); Unavailable when there is none."""
        ...

    def bench_plan(self) -> BenchPlan:
        """What this machine can benchmark (GPU benchmarks where there are GPUs, gloo collectives on its CPUs
        otherwise), and what it cannot and why."""
        ...

    def run_bench(
        self,
        plan: BenchPlan,
        request: BenchRequest,
        progress: Callable[[BenchProgress], None],
        cancel: threading.Event,
    ) -> Measurements:
        """Run one benchmark of `plan` on this machine; call `progress` as it goes; stop early when `cancel` is set."""
        ...

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        """Expand and check a rank layout (`topo.checks.check.check_layout`); `suggest` also searches a better one."""
        ...
