"""The app's I/O layer as an interface: loading snapshots, live counters, benchmarks, the checker.

The app receives a :class:`Services` in its constructor and never calls probes directly, so tests
hand it a fake and the screens stay free of hardware code. Every method here may block; the app
only calls them from thread workers. :class:`LocalServices` is the real implementation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from probes.live import LiveReading
from topo.checks import CheckReport, CheckRequest, check_layout
from topo.model import Measurements, Snapshot


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
"""Benchmarks the Bench screen offers: peer copies between every GPU pair, then collectives."""


@dataclass(frozen=True)
class BenchRequest:
    """What to measure: `p2p` peer copies or one collective, over a sweep of sizes."""

    kind: str
    sizes_bytes: tuple[int, ...]


@dataclass(frozen=True)
class BenchProgress:
    """How far a benchmark run is, with what it measured so far."""

    fraction: float
    label: str
    partial: Measurements | None = None


@dataclass(frozen=True)
class LayoutForm:
    """The Ranks screen's form, as plain values: what `linkscope check` takes on its command line."""

    sizes: tuple[tuple[str, int], ...]
    """Dimensions given explicitly; a missing `dp` is inferred from the cluster size."""
    order: str = "tp-cp-ep-dp-pp"
    nodes: int = 1
    distribution: str = "block"
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

    def bench_unavailable_reason(self, snapshot: Snapshot) -> str | None:
        """Why benchmarks cannot run on this machine (whose probe is `snapshot`), or None when they can."""
        ...

    def run_bench(
        self,
        snapshot: Snapshot,
        request: BenchRequest,
        progress: Callable[[BenchProgress], None],
        cancel: threading.Event,
    ) -> Measurements:
        """Run one benchmark; call `progress` as it goes; stop early when `cancel` is set."""
        ...

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        """Expand and check a rank layout (`topo.checks.check_layout`); `suggest` also searches a better one."""
        ...


class LocalServices:
    """The real services: probes for this machine, files and samples, the checker in `topo`."""

    def load_snapshot(self, source: str | None) -> Snapshot:
        """Load a source the way every command does (`linkscope.source`-equivalent, without the CLI)."""
        if source is None:
            from probes.host import probe_host

            return probe_host()
        from topo.sources import load_source

        return load_source(source)

    def sample_names(self) -> list[str]:
        """The built-in samples, or none when the samples package is missing."""
        try:
            from topo.samples import sample_names
        except ImportError:
            return []
        return list(sample_names())

    def open_live(self, snapshot: Snapshot) -> LiveFeed:
        """A `probes.live.LiveSampler` for this machine (NVML starts on its first read)."""
        from probes.live import LiveSampler

        return LiveSampler(per_link=True)

    def bench_unavailable_reason(self, snapshot: Snapshot) -> str | None:
        """Benchmarks need GPUs in this machine's probe and the benchmark engine."""
        try:
            from tui.bench_adapter import unavailable_reason
        except ImportError as exc:
            return f"the benchmark engine is not available ({exc})"
        return unavailable_reason(snapshot)

    def run_bench(
        self,
        snapshot: Snapshot,
        request: BenchRequest,
        progress: Callable[[BenchProgress], None],
        cancel: threading.Event,
    ) -> Measurements:
        """Run the benchmark engine of `probes.bench` in its child processes."""
        reason = self.bench_unavailable_reason(snapshot)
        if reason is not None:
            raise Unavailable(reason)
        from tui.bench_adapter import run_request

        return run_request(snapshot, request, progress, cancel)

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        """Call `topo.checks.check_layout`."""
        request = CheckRequest(
            sizes=form.sizes,
            order=form.order,
            mesh=None,
            nodes=form.nodes,
            distribution=form.distribution,
            visible_devices=form.visible_devices,
            model=form.model,
        )
        return check_layout(snapshot, request, measurements=measurements, suggest=suggest)
