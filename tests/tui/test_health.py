"""The app on the on-call path: the Monitor tab replays a `linkscope record` recording, saying it is one;
the Topology tab marks GPUs with health findings."""

from __future__ import annotations

import dataclasses

from textual.widgets import DataTable, Static

from linkscope.topo.model.recording import CounterSample, GpuCounters, LinkCounters, Recording
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.tabs.monitor import MonitorView
from linkscope.tui.widgets.plain_tree import PlainTree
from support.tui import FakeFeed, FakeServices, async_test, settle, traffic_reading

SIZE = (120, 40)


def static_text(widget: Static) -> str:
    """The plain text a Static shows."""
    return str(widget.render())


def _recording(interval_s: float) -> Recording:
    """Three readings of the degraded DGX H100: traffic on every GPU, GPU3's replay counter jumping by 7."""
    samples = []
    for number in range(3):
        gpus = tuple(
            GpuCounters(index=index, nvlink_tx_gbps=100.0 + number, nvlink_rx_gbps=90.0,
                        links=(LinkCounters(0, 5.5, 5.0), LinkCounters(1, 5.5, 5.0)),
                        nvlink_errors=(("replay", 7 * number if index == 3 else 0),),
                        pcie_tx_gbps=1.0, pcie_rx_gbps=2.0, pcie_gen_current=5, pcie_width_current=8 if index == 3 else 16)
            for index in range(8))
        samples.append(CounterSample(number * interval_s, gpus))
    return Recording("dgx-h100-degraded", "2026-11-23T21:00:00+00:00", interval_s, tuple(samples))


@async_test
async def test_monitor_replays_a_recording_to_its_end() -> None:
    snapshot = dataclasses.replace(load_sample("dgx-h100-degraded"), recording=_recording(0.05), source="rec.json")
    feed = FakeFeed([traffic_reading()])
    app = build_app(snapshot=snapshot, services=FakeServices(feed=feed), initial_tab="monitor")
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MonitorView)
        status = app.query_one("#monitor-status", Static)
        for _ in range(100):
            if "end of recording" in static_text(status):
                break
            await pilot.pause(0.05)
        text = static_text(status)
        assert "Replaying a recording of dgx-h100-degraded" in text and "reading 3 of 3 - end of recording" in text
        assert feed.reads == 0, "a recording never touches this machine's counters"
        table = app.query_one("#monitor-gpus", DataTable)
        assert table.row_count == 8
        assert view.reading is not None and view.reading.gpus[3].nvlink_tx_gbps == 102.0
        assert table.get_row_at(3)[5].plain == "replay +7"
        assert table.get_row_at(3)[7].plain == "x8/16 <"
        assert app.query_one("#monitor-links", DataTable).row_count == 2


@async_test
async def test_topology_marks_the_degraded_gpu_with_its_health_codes() -> None:
    app = build_app(snapshot=load_sample("dgx-h100-degraded"), services=FakeServices(feed=FakeFeed([traffic_reading()])),
                    initial_tab="topology")
    async with app.run_test(size=SIZE):
        await settle(app)
        labels = []
        stack = [app.query_one(PlainTree).root]
        while stack:
            node = stack.pop()
            labels.append(str(node.label))
            stack.extend(node.children)
        flagged = [label for label in labels if "!" in label]
        assert len(flagged) == 1 and flagged[0].startswith("GPU3 ")
        assert "! nvlink-fewer-links, pcie-width-reduced" in flagged[0]
        table = app.query_one("#identity-table", DataTable)
        marks = [table.get_row_at(row)[1].plain for row in range(table.row_count)]
        assert marks == ["ok"] * 3 + ["! nvlink-fewer-links, pcie-width-reduced"] + ["ok"] * 4
        assert table.get_row_at(3)[4].plain == "Gen5 x8/16 <"
        assert "Health (linkscope doctor" in static_text(app.query_one("#identity-note", Static))
