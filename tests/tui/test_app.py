"""Pilot tests: the main interaction of every tab, driven by keys, with fake services."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import DataTable, Input, Select, Static, TabbedContent
from textual.widgets._tabs import Underline  # the tab bar's underline: Textual exports no public name for it

from linkscope.topo.model.host import Host
from linkscope.topo.model.measurements import Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample, sample_names
from linkscope.tui.app import TABS, build_app
from linkscope.tui.messages import RingChosen
from linkscope.tui.screens.export import ExportScreen
from linkscope.tui.screens.link_detail import LinkDetailScreen
from linkscope.tui.tabs.bench import BenchView
from linkscope.tui.tabs.links import LinksView
from linkscope.tui.tabs.monitor import MonitorView
from linkscope.tui.tabs.ranks import RanksView
from linkscope.tui.tabs.topology import TopologyView
from linkscope.tui.widgets.key_bar import KeyBar
from linkscope.tui.widgets.link_detail import LinkDetail
from linkscope.tui.widgets.link_grid import LinkGrid
from linkscope.tui.widgets.plain_tree import PlainTree
from linkscope.tui.widgets.rank_map import RankMap
from support.tui import (
    FakeFeed,
    FakeServices,
    async_test,
    counted_layouts,
    measured_copies,
    nvswitch_host,
    settle,
    small_snapshot,
    traffic_reading,
)

SIZE = (120, 40)


def static_text(widget: Static) -> str:
    """The plain text a Static shows."""
    return str(widget.render())


@async_test
async def test_links_cursor_shows_degraded_detail_and_nic_toggle() -> None:
    """Moving onto a measured slow pair shows its verdict (120 of 391 GB/s: far below); `n` switches to the GPU x NIC grid."""
    snapshot = dataclasses.replace(small_snapshot(), measurements=measured_copies(degraded=(0, 3)))
    app = build_app(snapshot=snapshot, services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.query_one(LinkGrid)
        assert grid.row_count == 8 and grid.column_count == 8
        assert grid.cursor == (0, 1), "the cursor starts on the first link, not on GPU0 with itself"
        await pilot.press("right", "right")
        await pilot.pause()
        detail = app.query_one(LinkDetail)
        assert detail.cell is not None and (detail.cell.row, detail.cell.col) == (0, 3)
        text = static_text(detail)
        assert "FAR BELOW" in text and "measured 120.0 GB/s" in text and "NV18" in text
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LinkDetailScreen), "Enter opens the cell's whole detail"
        whole = str(app.screen.query_one("#link-detail-full", Static).render())
        assert "then GPU0:" in whole and "then GPU3:" in whole and "FAR BELOW" in whole
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, LinkDetailScreen)
        await pilot.press("down")
        await pilot.pause()
        assert "DEGRADED" not in static_text(detail)
        await pilot.press("n")
        await pilot.pause()
        assert grid.column_count == 4
        assert "mlx5_" in static_text(detail)


@async_test
async def test_links_expected_toggle_shows_gbps() -> None:
    """`e` replaces link tokens by the expected GB/s of each unmeasured cell."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.query_one(LinkGrid)
        assert grid.render_cell(0, 1)[0] == "NV18"
        await pilot.press("e")
        await pilot.pause()
        assert grid.render_cell(0, 1)[0] == "392"


@async_test
async def test_links_grid_scrolls_for_72_gpus_at_80x24() -> None:
    """A 72-GPU host fits by scrolling: the cursor can reach the last cell at 80x24."""
    app = build_app(snapshot=small_snapshot(gpus=72), services=FakeServices())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        grid = app.query_one(LinkGrid)
        assert grid.row_count == 72
        await pilot.press("right", "down")
        grid.cursor = (70, 70)
        await pilot.press("right", "down")
        await pilot.pause()
        assert grid.cursor == (71, 71)
        assert grid.scroll_offset.x > 0 and grid.scroll_offset.y > 0
        detail = static_text(app.query_one(LinkDetail))
        assert detail.startswith("GPU71 <-> GPU71")


@async_test
async def test_topology_tree_and_identity_table() -> None:
    """The tree has a branch per NUMA node, down to the GPUs; the table names the nearest NIC."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=SIZE):
        await settle(app)
        tree = app.query_one(PlainTree)
        numa_labels = [str(node.label) for node in tree.root.children]
        assert [label.split()[:2] for label in numa_labels] == [["NUMA", "0"], ["NUMA", "1"]]
        table = app.query_one("#identity-table", DataTable)
        assert table.row_count == 8
        columns = [str(column.label) for column in table.columns.values()]
        assert columns[:5] == ["NVML", "health", "CUDA", "bus id", "PCIe"]
        assert [cell.plain for cell in table.get_row_at(0)[:5]] == ["0", "ok", "0", "00000000:18:00.0", "Gen5 x16"]
        assert table.get_row_at(0)[6].plain == "mlx5_0 (PIX)"
        assert table.get_row_at(7)[6].plain == "mlx5_3 (PIX)"
        assert "CUDA index: FASTEST_FIRST order" in static_text(app.query_one("#identity-note", Static))
        assert "a recording" not in static_text(app.query_one("#identity-note", Static))
        assert table.region.bottom == app.query_one(TopologyView).region.bottom, "no blank rows under the table"


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_topology_shows_gpus_at_every_size(size: tuple[int, int]) -> None:
    """On dgx-h100 (a host bridge, then five nested bridges before GPU0) chains of one bridge are one line, so
    GPU0 is in view at 80x24 too, and a bridge holding just one GPU is that GPU's line."""

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="topology")
        async with app.run_test(size=size):
            await settle(app)
            tree = app.query_one(PlainTree)
            lines = [tree.get_node_at_line(line) for line in range(tree.scrollable_content_region.height)]
            labels = [str(node.label) for node in lines if node is not None]
            assert any(label.startswith("GPU0 ") for label in labels), labels
            assert any("bridges)" in label for label in labels), "a chain of bridges is one line"
            assert not any(label.startswith("bridge 0000:19:00.0") for label in labels), "GPU0's own bridge is its line"

    run()


@async_test
async def test_ranks_form_updates_map_and_findings() -> None:
    """Typing tp=4 pp=2 regroups the map; picking a rank draws its tp ring on the Links grid."""
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="ranks")
    rings: list[RingChosen] = []
    async with app.run_test(size=SIZE, message_hook=lambda m: rings.append(m) if isinstance(m, RingChosen) else None) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        assert view.report is not None and view.report.groups["tp"] == [list(range(8))]
        app.query_one("#size-tp", Input).value = "4"
        app.query_one("#size-pp", Input).value = "2"
        await pilot.pause()
        await settle(app)
        assert view.report is not None
        assert view.report.groups["tp"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert view.report.groups["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
        rank_map = app.query_one(RankMap)
        rank_map.focus()
        await pilot.press("right", "right", "right", "right", "right", "enter")
        await pilot.pause()
        # on NVSwitch every ring prices alike: the one drawn is the checker's (4-7-6-5), the same cycle as rank order
        expected = {frozenset(hop) for hop in ((4, 5), (5, 6), (6, 7), (7, 4))}
        assert rings and {frozenset(hop) for hop in rings[-1].hops} == expected
        assert app.query_one(LinksView).ring == rings[-1]
        assert rank_map.picked_group == 1
        assert rank_map.render_cell(0, 5)[1].reverse and not rank_map.render_cell(0, 1)[1].reverse
        rank_map.set_picked_group(0)  # the styles of a frame drawn before do not outlive the pick
        assert rank_map.render_cell(0, 1)[1].reverse and not rank_map.render_cell(0, 5)[1].reverse


@async_test
async def test_ranks_bad_field_is_one_line_and_no_check() -> None:
    """A size that does not fit the machine shows the checker's one-line reason."""
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        app.query_one("#size-tp", Input).value = "3"
        await pilot.pause()
        await settle(app)
        status = static_text(app.query_one("#ranks-status", Static))
        assert "does not divide" in status
        assert app.query_one(RanksView).report is None


@async_test
async def test_ranks_apply_suggestion_and_export() -> None:
    """On the DGX-1 a tp=2 layout gets a device-order suggestion; `a` applies it; `c` opens the export."""
    app = build_app(snapshot=load_sample("dgx1-v100"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        app.query_one("#size-tp", Input).value = "2"
        await pilot.pause()
        await settle(app)
        view = app.query_one(RanksView)
        suggestion = view.suggestion
        assert suggestion is not None and suggestion.visible_devices is not None
        assert "faster" in static_text(app.query_one("#suggestion", Static))
        app.query_one(RankMap).focus()
        await pilot.press("a")
        await pilot.pause()
        await settle(app)
        assert app.query_one("#devices", Input).value == ",".join(map(str, suggestion.visible_devices))
        assert view.checked_form is not None and view.checked_form.visible_devices == suggestion.visible_devices
        app.query_one(RankMap).focus()
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        assert app.screen.command.startswith("linkscope check sample:dgx1-v100 --tp 2")
        assert '"groups"' in app.screen.document
        notices: list[str] = []
        app.notify = lambda message, **_: notices.append(str(message))  # type: ignore[method-assign]
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == app.screen.command
        said = " ".join(notices)
        assert "copied to the clipboard" not in said.lower() and "select the command shown here" in said
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)


@async_test
async def test_monitor_shows_live_reading_from_fake_feed() -> None:
    """A reading from the feed fills the GPU table, error deltas and the per-link table."""
    feed = FakeFeed([traffic_reading(replay_delta=3)])
    app = build_app(snapshot=small_snapshot(source="probe"), services=FakeServices(feed=feed), initial_tab="monitor", live=True)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MonitorView)
        while view.reading is None:
            await pilot.pause(0.05)
        table = app.query_one("#monitor-gpus", DataTable)
        assert table.row_count == 8
        assert table.get_row_at(2)[5].plain == "replay +3"
        assert table.get_row_at(1)[7].plain == "x8/16 <"
        assert app.query_one("#monitor-links", DataTable).row_count == 18
    for _ in range(100):  # the feed is closed by the worker's thread as it ends, after the app has gone
        if feed.closed:
            break
        time.sleep(0.01)
    assert feed.closed


@pytest.mark.parametrize("recording", ["sample", "probe-file"])
@async_test
async def test_monitor_on_a_saved_snapshot_says_no_live_counters(recording: str) -> None:
    """A sample or a saved snapshot has no counters to read here: the tab says which it is (not "a recording");
    only the PCIe link state it recorded is shown."""
    snapshot = load_sample("dgx-h100-degraded") if recording == "sample" else small_snapshot(source="probe")
    feed = FakeFeed([traffic_reading()])
    app = build_app(snapshot=snapshot, services=FakeServices(feed=feed), initial_tab="monitor")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        await pilot.pause()
        status = static_text(app.query_one("#monitor-status", Static))
        what = "a built-in sample, not this machine" if recording == "sample" else "a saved snapshot, not this machine now"
        assert status.startswith("No live counters: ") and what in status and "recording" not in status
        table = app.query_one("#monitor-gpus", DataTable)
        assert [str(column.label) for column in table.columns.values()][1:5] == [
            "NVLink TX\nGB/s", "NVLink RX\nGB/s", "PCIe TX\nGB/s", "PCIe RX\nGB/s"], "units on the rate columns"
        assert feed.reads == 0
        if recording == "sample":
            assert table.row_count == 8
            assert [table.get_row_at(3)[column].plain for column in range(1, 6)] == ["-"] * 5
            assert table.get_row_at(3)[7].plain == "x8/16 <"
            assert table.get_row_at(0)[7].plain == "x16/16"
        else:
            assert table.row_count == 0


@async_test
async def test_bench_run_feeds_links_grid() -> None:
    """`r` runs the (fake) benchmark; results fill the table, reach the Links grid and re-check the kept layout."""
    services = FakeServices()
    app = build_app(snapshot=small_snapshot(source="probe"), services=services, initial_tab="bench", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        app.query_one("#size-tp", Input).value = "4"
        await settle(app)
        ranks = app.query_one(RanksView)
        report_before = ranks.report
        app.query_one("#bench-kind").focus()
        await pilot.press("r")
        await settle(app)
        await pilot.pause()
        assert services.bench_calls and services.bench_calls[0].kind == "p2p"
        assert ranks.checked_form is not None and dict(ranks.checked_form.sizes)["tp"] == 4
        assert ranks.report is not None and ranks.report is not report_before
        assert app.query_one("#bench-table", DataTable).row_count == 4 * 7
        snapshot = app.query_one(LinksView).snapshot
        assert snapshot is not None and snapshot.measurements is not None
        assert app.query_one(LinkGrid).render_cell(0, 1)[0] == "!200 51%"


@async_test
async def test_bench_stop_cancels_the_run() -> None:
    """`s` stops a running benchmark; what was measured before the stop is kept."""
    gate = threading.Event()
    services = FakeServices(bench_gate=gate)
    app = build_app(snapshot=small_snapshot(source="probe"), services=services, initial_tab="bench", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        app.query_one("#bench-kind").focus()
        await pilot.press("r")
        view = app.query_one(BenchView)
        assert view.running
        await pilot.press("s")
        gate.set()
        await settle(app)
        await pilot.pause()
        assert not view.running
        assert "Stopped" in static_text(app.query_one("#bench-status", Static))


@async_test
async def test_bench_unavailable_refuses_to_run() -> None:
    """Without a benchmark engine the tab says why and runs nothing."""
    services = FakeServices(bench_reason="no CUDA GPU on this machine")
    app = build_app(snapshot=small_snapshot(source="probe"), services=services, initial_tab="bench", live=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        await pilot.pause()
        assert "Nothing can run here. No CUDA GPU" in static_text(app.query_one("#bench-status", Static))
        app.query_one("#bench-kind").focus()
        await pilot.pause()
        assert " r Run " not in app.query_one(KeyBar).render().plain, "r Run is hidden when nothing can run"
        assert not app.query_one("#bench-run").display
        await pilot.press("r")
        await pilot.pause()
        assert services.bench_calls == []


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_bench_runs_gloo_collectives_on_a_machine_without_gpus(size: tuple[int, int]) -> None:
    """On a machine with no GPU (a sample on show) the tab offers the collectives over gloo on its CPUs, says that
    peer copies need two GPUs, and runs: the results are this machine's, so the sample's Links keep theirs."""

    @async_test
    async def run() -> None:
        services = FakeServices(bench_backend="gloo")
        app = build_app(snapshot=load_sample("dgx-h100"), services=services, initial_tab="bench")
        async with app.run_test(size=size) as pilot:
            await settle(app)
            await pilot.pause()
            status = static_text(app.query_one("#bench-status", Static))
            assert "Runs here: collectives over gloo on this machine's CPUs" in status
            assert "p2p peer copies and NCCL collectives need two GPUs" in status
            assert "sample:dgx-h100 is a built-in sample" in status and "recording" not in status
            said = Text(status).wrap(app.console, app.query_one("#bench-status").content_size.width)
            assert len(said) <= app.query_one("#bench-status").content_size.height, "the whole status is on screen"
            kinds = app.query_one("#bench-kind", Select)
            assert kinds.value == "all_reduce" and app.query_one("#bench-max", Input).value == "16M"
            app.query_one("#bench-kind").focus()
            await pilot.pause()
            assert " r Run " in app.query_one(KeyBar).render().plain
            await pilot.press("r")
            await settle(app)
            await pilot.pause()
            assert services.bench_calls and services.bench_calls[0].kind == "all_reduce"
            table = app.query_one("#bench-table", DataTable)
            assert table.row_count == 4 and table.get_row_at(0)[0].plain == "all_reduce"
            assert [cell.plain for cell in table.get_row_at(0)[3:6]] == ["-", "-", "-"], "not judged on the sample's links"
            done = static_text(app.query_one("#bench-status", Static))
            assert done.startswith("Done: collectives over gloo") and "Links and Ranks keep the figures" in done
            assert app.query_one(LinksView).snapshot.measurements is None  # type: ignore[union-attr]

    run()


@async_test
async def test_no_gpu_falls_back_to_a_sample() -> None:
    """Probing a machine without GPUs opens the fallback sample with a notice."""
    empty = Snapshot(hosts=(Host("laptop"),), source="probe")
    sample = load_sample("dgx-h100")
    app = build_app(services=FakeServices(snapshots={None: empty, "sample:dgx-h100": sample}))
    notices: list[str] = []
    shown = app.notify
    app.notify = lambda message, **options: (notices.append(str(message)), shown(message, **options))[-1]  # type: ignore[method-assign,func-returns-value]
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        await pilot.pause()
        assert app.snapshot is sample
        assert any("no NVIDIA GPU" in notice for notice in notices)


@async_test
async def test_digit_keys_switch_tabs() -> None:
    """Keys 1-5 switch tabs and focus moves into the new tab."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tabs = app.query_one(TabbedContent)
        for key, tab in (("2", "topology"), ("5", "monitor"), ("1", "links")):
            await pilot.press(key)
            await pilot.pause()
            assert tabs.active == tab
        assert app.focused is app.query_one(LinkGrid)


@async_test
async def test_a_tab_switch_has_its_underline_and_focus_in_its_first_frame() -> None:
    """The frame that shows the new tab has the underline under its name and the focus in it: Textual's tabs
    move the underline after the screen's next refresh, and `focus()` moves the focus a message later, each one
    frame more (15-40 ms) before a switch settled."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        tabs = app.query_one(TabbedContent)
        underline = tabs.query_one(Underline)
        at_first_frame: list[tuple[int, int]] = []
        display = app._display

        def recorded(screen: Any, renderable: Any) -> None:
            if not at_first_frame:
                at_first_frame.append((underline.highlight_start, underline.highlight_end))
            display(screen, renderable)

        app._display = recorded  # type: ignore[method-assign]
        for tab_id in ("monitor", "ranks", "links"):
            at_first_frame.clear()
            app.action_show_tab(tab_id)
            assert app.focused is not None and tabs.get_pane(tab_id) in app.focused.ancestors
            await settle(app)
            await pilot.pause()
            tab = tabs.get_tab(tab_id)
            span = tab.virtual_region.shrink(tab.styles.gutter).column_span
            assert at_first_frame == [span] == [(underline.highlight_start, underline.highlight_end)]


@async_test
async def test_the_topology_note_shown_again_lays_nothing_out() -> None:
    """Each switch to the Topology tab resizes its view, which shows its note again: the same text is left as it
    is (Static.update laid the screen out once more after every switch)."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        note = static_text(app.query_one("#identity-note", Static))
        assert note
        with counted_layouts() as layouts:
            app.query_one(TopologyView)._show_note()
            await pilot.pause()
            await pilot.pause()
        assert not layouts and static_text(app.query_one("#identity-note", Static)) == note


@pytest.mark.parametrize("name", ["[bold red]evil[/]", "host[/link]"])
@async_test
async def test_untrusted_names_are_not_markup(name: str) -> None:
    """Host and device names from files show literally, brackets and all."""
    snapshot = small_snapshot()
    host = dataclasses.replace(snapshot.host, hostname=name)
    app = build_app(snapshot=Snapshot(hosts=(host,), source="x.json"), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert static_text(app.query_one("#links-title", Static)).startswith(name)
        assert str(app.query_one(PlainTree).root.label) == name
        assert app.query_one(TopologyView).snapshot is not None


def two_host_snapshot() -> Snapshot:
    """Two boxes of four GPUs each, with different names."""
    return Snapshot(hosts=(nvswitch_host("box-a", gpus=4, nics=2), nvswitch_host("box-b", gpus=4, nics=2)), source="two.json")


@pytest.mark.parametrize("source", [*sample_names(), "two-hosts", "probe-without-gpus"])
@async_test
async def test_every_tab_opens_on_every_source(source: str) -> None:
    """Each sample, a two-host snapshot and a GPU-less probe show on all five tabs without an error."""
    if source == "two-hosts":
        snapshot = two_host_snapshot()
    elif source == "probe-without-gpus":
        snapshot = Snapshot(hosts=(Host("vm"),), source="probe")
    else:
        snapshot = load_sample(source)
    app = build_app(snapshot=snapshot, services=FakeServices())
    async with app.run_test(size=(80, 24)) as pilot:
        for tab, _ in TABS:
            app.action_show_tab(tab)
            await settle(app)
        await pilot.pause()
        ranks = app.query_one(RanksView)
        if snapshot.host.gpus:
            assert ranks.report is not None
        else:
            assert "no GPUs" in static_text(app.query_one("#ranks-status", Static))
        assert app.query_one(LinkGrid).row_count == len(snapshot.host.gpus)


@async_test
async def test_two_hosts_rank_map_and_ring_host() -> None:
    """A two-host snapshot maps ranks onto both hosts by name; a ring on box-b switches the Links tab there."""
    app = build_app(snapshot=two_host_snapshot(), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        assert view.report is not None and view.report.groups["tp"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        rank_map = app.query_one(RankMap)
        assert rank_map.row_count == 2
        rank_map.cursor = (1, 0)
        await pilot.press("enter")
        await pilot.pause()
        links = app.query_one(LinksView)
        assert links.host_index == 1 and links.host is not None and links.host.hostname == "box-b"


@async_test
async def test_palette_offers_samples_and_opens_one() -> None:
    """The command palette lists the samples; its command loads one in place of the snapshot."""
    sample = load_sample("dgx-a100")
    services = FakeServices(snapshots={"sample:dgx-a100": sample})
    app = build_app(snapshot=small_snapshot(), services=services)
    async with app.run_test(size=SIZE) as pilot:
        commands = {command.title: command for command in app.get_system_commands(app.screen)}
        assert "Open sample: dgx-a100" in commands and "Show Ranks" in commands
        commands["Open sample: dgx-a100"].callback()
        await settle(app)
        await pilot.pause()
        assert app.snapshot is sample
        assert app.query_one(LinksView).snapshot is sample


@async_test
async def test_mouse_click_chooses_a_link_cell() -> None:
    """Clicking a cell of the Links grid moves the cursor there and shows its detail."""
    app = build_app(snapshot=small_snapshot(), services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.query_one(LinkGrid)
        label_width, cell_width = 7, 5
        await pilot.click("#link-grid", offset=(label_width + 2 * cell_width + 1, 2))
        await pilot.pause()
        assert grid.cursor == (1, 2)
        assert static_text(app.query_one(LinkDetail)).startswith("GPU1 <-> GPU2")


@async_test
async def test_bench_tab_shows_measurements_the_snapshot_carries() -> None:
    """A recording with measurements (open --measurements, import --attach) shows them on the Bench tab."""
    snapshot = dataclasses.replace(load_sample("dgx-h100"), measurements=measured_copies())
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=SIZE):
        await settle(app)
        assert app.query_one("#bench-table", DataTable).row_count == len(snapshot.measurements.peer_copies)  # type: ignore[union-attr]
        status = static_text(app.query_one("#bench-status", Static))
        assert "sample:dgx-h100 is a built-in sample" in status and "Shown: results of test copies" in status


@async_test
async def test_bench_table_says_whether_each_copys_data_arrived_intact() -> None:
    copies = (PeerCopy(0, 1, 1 << 20, 300.0, verified=True), PeerCopy(1, 0, 1 << 20, 300.0, verified=False),
              PeerCopy(0, 2, 1 << 20, 300.0))
    snapshot = dataclasses.replace(load_sample("dgx-h100"), measurements=Measurements("test", peer_copies=copies))
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=SIZE):
        await settle(app)
        table = app.query_one("#bench-table", DataTable)
        data = [str(table.get_row_at(index)[-1]) for index in range(table.row_count)]
        assert data == ["ok", "CORRUPTED", "-"]


@async_test
async def test_key_bar_follows_the_focused_tab_and_a_click_presses_its_key() -> None:
    """The bottom line lists the keys of the tab in focus; clicking `n GPU x NIC` toggles the NIC grid."""
    from linkscope.tui.widgets.key_bar import KeyBar

    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices())
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        bar = app.query_one(KeyBar)
        assert [key for key, _, _ in bar.keys][:3] == ["enter", "n", "e"] and bar.keys[-1][2] == "palette"
        x = next(column for column in range(SIZE[0]) if bar.key_at(column) == "n")
        await pilot.click(KeyBar, offset=(x, 0))
        await settle(app)
        assert app.query_one(LinksView).nic_mode
        await pilot.press("3")
        await settle(app)
        assert "Apply suggestion" in [description for _, _, description in bar.keys]
        assert bar.key_at(10_000) is None


@async_test
async def test_the_ring_drawn_is_the_ring_the_checker_priced() -> None:
    """DGX-1 V100, tp 8: the checker prices the NVLink-only ring 0-4-7-6-5-1-2-3; picking a rank draws
    that ring, not the rank-order one whose hops 3->4 and 7->0 cross SYS."""
    snapshot = load_sample("dgx1-v100")
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="ranks")
    rings: list[RingChosen] = []
    async with app.run_test(size=SIZE, message_hook=lambda m: rings.append(m) if isinstance(m, RingChosen) else None) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        assert view.report is not None and view.report.ring("tp", 0) == (0, 4, 7, 6, 5, 1, 2, 3)
        view.pick_group("tp", 0)
        await pilot.pause()
        hops = rings[-1].hops
        assert hops == ((0, 4), (4, 7), (7, 6), (6, 5), (5, 1), (1, 2), (2, 3), (3, 0))
        host = snapshot.host
        assert all(host.link(a, b).kind.name == "NVLINK" for a, b in hops)


def _counting_services() -> tuple[FakeServices, list[object]]:
    """Fake services that count the checks run (not the suggestion searches)."""
    services = FakeServices()
    checks: list[object] = []
    original = services.check

    def check(snapshot: Snapshot, form: object, measurements: Measurements | None, suggest: bool) -> object:
        if not suggest:
            checks.append(form)
        return original(snapshot, form, measurements, suggest)  # type: ignore[arg-type]

    services.check = check  # type: ignore[method-assign,assignment]
    return services, checks


@async_test
async def test_ranks_form_tabbing_escape_quit_and_one_check_per_fill() -> None:
    """Tabbing through untouched defaults paints nothing red; escape leaves a field; the key bar says
    ^q quits while typing; filling the form (apply a suggestion, a new machine) checks it once."""
    from linkscope.tui.services import LayoutForm
    from linkscope.tui.tabs.ranks import DIMS
    from linkscope.tui.widgets.key_bar import KeyBar

    services, checks = _counting_services()
    app = build_app(snapshot=load_sample("dgx-h100"), services=services, initial_tab="ranks")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        app.query_one("#size-tp", Input).focus()
        await pilot.pause()
        await pilot.press(*["tab"] * 8)
        await pilot.pause()
        inputs = [app.query_one(f"#size-{dim}", Input) for dim in DIMS]
        assert not [field.id for field in app.query(Input) if field.has_class("-invalid")]
        assert any(not field.value for field in inputs), "the test should pass empty default fields"
        app.query_one("#size-cp", Input).focus()
        await pilot.pause()
        shown = {shown: description for _key, shown, description in app.query_one(KeyBar).keys}
        assert shown.get("^q") == "Quit" and "q" not in shown and "esc" in shown
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.focused, RankMap)
        shown = {shown: description for _key, shown, description in app.query_one(KeyBar).keys}
        assert shown.get("q") == "Quit"
        checks.clear()
        view.fill_form(LayoutForm(sizes=(("tp", 4), ("pp", 2)), nodes=1, distribution="cyclic"))
        await settle(app)
        assert len(checks) == 1
        assert view.checked_form is not None and view.checked_form == checks[0]
        assert view.checked_form.distribution == "cyclic"
        app.query_one("#size-pp", Input).focus()
        await pilot.press("end", "backspace")
        await settle(app)
        assert len(checks) == 2, "one edit, one check"
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code == 0


@async_test
async def test_a_findings_message_and_fix_show_whole_at_80_columns() -> None:
    """The finding under the cursor shows whole, wrapped, under the list, even at 80x24."""
    app = build_app(snapshot=load_sample("a100-pcie-nvbridge-4"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        assert view.report is not None and view.report.findings
        finding = view.report.findings[0]
        await pilot.pause()
        detail = app.query_one("#finding-detail", Static)
        lines = [line.rstrip() for line in str(detail.render()).splitlines()]
        whole = f"{finding.severity} {finding.code} ({finding.dim}): {finding.message} fix: {finding.fix}"
        assert " ".join(lines).split() == whole.split()
        from rich.text import Text

        wrapped = Text(str(detail.render())).wrap(app.console, detail.content_size.width)
        assert len(wrapped) > 2 and detail.content_size.height >= len(wrapped), "every line of the finding fits"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_an_imported_sweep_plots_one_bar_row_per_line(size: tuple[int, int]) -> None:
    """A 31-size sweep draws its bars inside the plot at 80 and 120 columns (no bar row wraps onto the next line)."""
    from linkscope.topo.model.measurements import CollectiveResult
    from linkscope.tui.widgets.bandwidth_plot import BandwidthPlot

    rows = tuple(CollectiveResult("all_reduce", 1 << exponent, "float", 10.0, exponent * 5.0, exponent * 9.0, 8)
                 for exponent in range(3, 34))
    snapshot = dataclasses.replace(load_sample("dgx-h100"), measurements=Measurements("nccl-tests sweep", collectives=rows))

    @async_test
    async def run() -> None:
        app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
        async with app.run_test(size=size) as pilot:
            await settle(app)
            await pilot.pause()
            plot = app.query_one(BandwidthPlot)
            lines = plot.render().wrap(app.console, plot.content_size.width)
            assert len(lines) <= plot.content_size.height
            assert any("█" in line.plain for line in lines)
            assert all(len(line.plain) <= plot.content_size.width for line in lines)
            assert lines[-1].plain.startswith("8 B") and lines[-1].plain.rstrip().endswith("8 GiB")
            status = app.query_one("#bench-status", Static)
            from rich.text import Text

            said = Text(str(status.render())).wrap(app.console, status.content_size.width)
            assert len(said) <= status.content_size.height, "the status line fits"

    run()


@async_test
async def test_wide_grids_and_tables_say_there_is_more_to_the_side() -> None:
    """At 80 columns the GPU x NIC grid of a 12-NIC box marks `▸` (and `◂ more` once scrolled) without covering
    the name of the cursor's column, at every step across;
    the identity table puts bus id, NUMA and nearest NIC before the long name and UUID and says it goes on."""
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app)
        grid = app.query_one(LinkGrid)
        grid.focus()
        await pilot.press("n")
        await pilot.pause()
        assert grid.column_count == 12
        header = grid.render_line(0).text
        assert header.rstrip().endswith("▸") and "◂ more" not in header
        for column in range(1, 12):
            await pilot.press("right")
            await pilot.pause()
            assert grid.cursor == (0, column)
            assert re.search(rf" mlx5_{column}[ ▸]", grid.render_line(0).text), "the cursor column's name is whole"
        header = grid.render_line(0).text
        assert header.startswith("◂ more") and not header.rstrip().endswith("▸") and "mlx5_11" in header
        await pilot.press("2")
        await pilot.pause()
        await settle(app)
        table = app.query_one("#identity-table", DataTable)
        labels = [str(column.label) for column in table.columns.values()]
        assert labels[:7] == ["NVML", "health", "CUDA", "bus id", "PCIe", "NUMA", "nearest NIC"] and labels[-1] == "UUID"
        assert "More columns" in static_text(app.query_one("#identity-note", Static))
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(app)
        await pilot.pause()
        assert "More columns" not in static_text(app.query_one("#identity-note", Static))


@async_test
async def test_escape_leaves_a_bench_field_too() -> None:
    """Escape leaves any field (the key bar offers it wherever one is focused), here the Bench tab's size."""
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app)
        app.query_one("#bench-min", Input).focus()
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.focused, Input | Select)
        await pilot.press("5")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "monitor", "the tab keys work again"


@async_test
async def test_two_nodes_of_a_long_host_name_stay_apart_on_the_rank_map() -> None:
    """`dgx-h100-degraded` on 2 nodes at 80 columns: the rows keep the end that tells them apart."""
    app = build_app(snapshot=load_sample("dgx-h100-degraded"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app)
        app.query_one("#nodes", Input).value = "2"
        await pilot.pause()
        await settle(app)
        rank_map = app.query_one(RankMap)
        rows = [rank_map.render_line(y).text.split()[0] for y in (1, 2)]
        assert rows[0] != rows[1] and rows[0].endswith("#0") and rows[1].endswith("#1")


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_question_mark_and_f1_open_the_keys(size: tuple[int, int]) -> None:
    """`?` and F1 (what htop, nvitop and k9s users press first) show the keys of every tab and of the tab on
    show; Escape closes; `?` is in the key bar."""
    from linkscope.tui.screens.help import HelpScreen
    from linkscope.tui.widgets.key_bar import KeyBar

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices())
        async with app.run_test(size=size) as pilot:
            await settle(app)
            assert " ? Help " in app.query_one(KeyBar).render().plain
            for key, tab, tab_key in (("question_mark", "1", "GPU x NIC"), ("f1", "3", "Colour by")):
                await pilot.press(tab, key)
                await pilot.pause()
                assert isinstance(app.screen, HelpScreen)
                text = str(app.screen.query_one("#help-text", Static).render())
                assert "Keys on every tab" in text and "next host of a cluster" in text and tab_key in text
                await pilot.press("escape")
                await pilot.pause()
                assert not isinstance(app.screen, HelpScreen)

    run()


@async_test
async def test_opening_another_sample_starts_clean() -> None:
    """A ring drawn for one machine is gone on the next one opened from the palette, which starts on its first
    host; the no-GPU notice is short-lived and repeated in the title."""
    from linkscope.tui.app import NOTICE_S

    services = FakeServices(snapshots={"sample:dgx1-v100": load_sample("dgx1-v100"),
                                       "sample:dgx-h100": load_sample("dgx-h100")})
    app = build_app(snapshot=load_sample("dgx-h100"), services=services, notice="no NVIDIA GPU found on this machine")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        assert "(no GPU here)" in app.sub_title
        assert all(notification.timeout <= NOTICE_S for notification in app._notifications)
        links = app.query_one(LinksView)
        app.post_message(RingChosen("tp group 0", 0, ((0, 1), (1, 0))))
        await settle(app)
        assert links.ring is not None
        app.open_sample("dgx1-v100")
        await settle(app)
        await pilot.pause()
        assert app.snapshot is not None and app.snapshot.source == load_sample("dgx1-v100").source
        assert links.ring is None and app.host_index == 0


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_ranks_form_focus_is_plain_to_see_and_starts_at_tp(size: tuple[int, int]) -> None:
    """From the rank map, shift+tab and `f` land on `tp` (not on `model` at the far end); the focused field takes
    the theme's accent background, which no other field has."""
    from textual.color import Color

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="ranks")
        async with app.run_test(size=size) as pilot:
            await settle(app)
            app.query_one(RankMap).focus()
            await pilot.press("shift+tab")
            await pilot.pause()
            assert app.focused is app.query_one("#size-tp", Input)
            accent = Color.parse(app.theme_variables["accent"])
            fields = list(app.query_one(RanksView).query(Input))
            assert app.focused.styles.background == accent
            assert all(field.styles.background != accent for field in fields if field is not app.focused)
            await pilot.press("tab")
            assert app.focused is app.query_one("#size-cp", Input)
            await pilot.press("shift+tab")
            assert app.focused is app.query_one("#size-tp", Input), "shift+tab inside the form goes back a field"
            app.query_one(RankMap).focus()
            await pilot.press("f")
            await pilot.pause()
            assert app.focused is app.query_one("#size-tp", Input)

    run()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_groups_beyond_the_palette_look_different_and_are_named(size: tuple[int, int]) -> None:
    """tp 1 on eight GPUs makes eight groups for six colours: groups 0 and 6 share a colour but not a look, and
    the status line names the group under the cursor (colour alone never tells them apart)."""

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="ranks")
        async with app.run_test(size=size) as pilot:
            await settle(app)
            app.query_one("#size-tp", Input).value = "1"
            await settle(app)
            rank_map = app.query_one(RankMap)
            looks = {rank_map.render_cell(0, gpu)[1] for gpu in range(8)}
            assert len(looks) == 8, "eight groups, eight looks"
            rank_map.focus()
            await pilot.press("right", "right", "right", "right", "right", "right")
            await pilot.pause()
            assert static_text(app.query_one("#ranks-status", Static)).startswith("rank 6: tp group 6 of 8 (ranks 6)")

    run()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_links_detail_shows_both_pcie_paths(size: tuple[int, int]) -> None:
    """The pane under the grid shows all of a pair's detail, both PCIe paths too: the bridges they share, then each."""

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices())
        async with app.run_test(size=size):
            await settle(app)
            detail = app.query_one(LinkDetail)
            lines = Text(static_text(detail)).wrap(app.console, detail.content_size.width)
            assert len(lines) <= detail.content_size.height, "nothing is cut"
            said = static_text(detail)
            assert "PCIe path of both: pci0000:15 > 0000:15:01.0 > 0000:16:00.0\n" in said
            assert "  then GPU0: 0000:17:00.0 > 0000:18:00.0 > 0000:19:00.0\n" in said
            assert said.endswith("  then GPU1: 0000:17:01.0 > 0000:1d:00.0 > 0000:1e:00.0")

    run()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_the_frame_paints_before_the_source_loads(size: tuple[int, int]) -> None:
    """Given a source to load, the first frame is the tab bar and the title saying what loads (the views and their
    imports come after it); a source that does not open ends the app with the reason and status 2."""

    @async_test
    async def run() -> None:
        services = FakeServices(snapshots={"sample:dgx-h100": load_sample("dgx-h100")})
        app = build_app("sample:dgx-h100", services=services)
        first: list[tuple[str, int]] = []
        display = app._display

        def painted(screen: Any, renderable: Any) -> None:  # what the first frame put on the terminal
            if not first and app.query(TabbedContent):
                first.append((app.sub_title, len(app.query(LinksView))))
            display(screen, renderable)

        app._display = painted  # type: ignore[method-assign]
        async with app.run_test(size=size) as pilot:
            await settle(app)
            await pilot.pause()
            assert first and first[0] == ("loading sample:dgx-h100...", 0), first
            assert app.query_one(LinkGrid).row_count == 8 and not app.query(".tab-starting")
        bad = build_app("missing.json", services=services)
        async with bad.run_test(size=size):
            await settle(bad)
        assert bad.return_code == 2 and bad.load_error == "missing.json: no such test source"

    run()
