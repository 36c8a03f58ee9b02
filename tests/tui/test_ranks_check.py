"""The Ranks tab's check worker: the check runs with the cyclic garbage collector paused, and leaves it running."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

from textual.widgets import Input

from linkscope.topo.checks.report import CheckReport
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.services import LayoutForm
from support.tui import FakeServices, async_test, settle


@dataclass
class CollectorWatch(FakeServices):
    """Services that note, at each check of a layout (not a search for a better one), whether the collector runs."""

    collector_on: list[bool] = field(default_factory=list)

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        if not suggest:
            self.collector_on.append(gc.isenabled())
        return super().check(snapshot, form, measurements, suggest)


@async_test
async def test_a_check_runs_with_the_collector_paused_and_leaves_it_on() -> None:
    services = CollectorWatch()
    app = build_app(snapshot=load_sample("dgx-h100"), services=services, initial_tab="ranks")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        app.query_one("#size-tp", Input).value = "4"
        await pilot.pause()
        await settle(app)
        assert len(services.collector_on) >= 2 and not any(services.collector_on)
        assert gc.isenabled()
