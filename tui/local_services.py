"""The real :class:`tui.services.Services`: probes for this machine, files and samples, the benchmark
engine (through :mod:`tui.bench_adapter`) and the checker in `topo`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from linkscope.tui.services import BenchPlan, BenchProgress, BenchRequest, LayoutForm, LiveFeed, Unavailable

if TYPE_CHECKING:  # each service imports what it runs when first called: the app paints before they load
    from linkscope.topo.checks.report import CheckReport
    from linkscope.topo.model.measurements import Measurements
    from linkscope.topo.model.snapshot import Snapshot


class LocalServices:
    """The real services: probes for this machine, files and samples, the checker in `topo`."""

    def load_snapshot(self, source: str | None) -> Snapshot:
        """Load a source the way every command does (`linkscope.source`-equivalent, without the CLI)."""
        if source is None:
            from linkscope.probes.host import probe_host

            return probe_host()
        from linkscope.topo.formats.source import load_source

        return load_source(source)

    def sample_names(self) -> list[str]:
        """The built-in samples, or none when the samples package is missing."""
        try:
            from linkscope.topo.samples import sample_names
        except ImportError:
            return []
        return list(sample_names())

    def open_live(self, snapshot: Snapshot) -> LiveFeed:
        """A `probes.live.LiveSampler` for this machine (NVML starts on its first read)."""
        from linkscope.probes.live import LiveSampler

        return LiveSampler(per_link=True)

    def bench_plan(self) -> BenchPlan:
        """Ask the benchmark engine what this machine can run (imports torch: call from a worker)."""
        from linkscope.tui.bench_adapter import bench_plan

        return bench_plan()

    def run_bench(
        self,
        plan: BenchPlan,
        request: BenchRequest,
        progress: Callable[[BenchProgress], None],
        cancel: threading.Event,
    ) -> Measurements:
        """Run the benchmark engine of `probes.bench` in its child processes."""
        if request.kind not in plan.kinds:
            raise Unavailable(f"{request.kind} cannot run here: " + "; ".join(plan.cannot))
        from linkscope.tui.bench_adapter import run_request

        return run_request(plan, request, progress, cancel)

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        """Call `topo.checks.check.check_layout`."""
        from linkscope.topo.checks.check import check_layout
        from linkscope.topo.checks.request import CheckRequest

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
