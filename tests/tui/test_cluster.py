"""Pilot tests of the app on a cluster: the Topology tab's host list with findings, picking a host, the
Ranks tab on a multi-host NVLink domain."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.tabs.links import LinksView
from linkscope.tui.tabs.ranks import RanksView
from linkscope.tui.tabs.topology import TopologyView
from linkscope.tui.widgets.key_bar import KeyBar
from linkscope.tui.widgets.plain_tree import PlainTree
from support.tui import FakeServices, async_test, settle

SIZE = (120, 40)


@async_test
async def test_topology_lists_hosts_with_their_findings_and_picks_one() -> None:
    """On h100-cluster-mixed the host list names node02's and node03's findings; Enter on node03 shows it
    on Topology and on Links."""
    app = build_app(snapshot=load_sample("h100-cluster-mixed"), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        table: DataTable[object] = app.query_one("#hosts-table", DataTable)
        assert table.display and table.row_count == 4
        rows = [[str(cell) for cell in table.get_row_at(index)] for index in range(4)]
        assert rows[1][0] == "! node02" and rows[1][-1] == "host-fewer-nvlinks, host-pcie-narrower"
        assert rows[2][4] == "7" and "host-nic-missing" in rows[2][-1] and rows[0][-1] == "-"
        assert rows[0][0] == "  node01", "a host that is not odd has no mark"
        table.focus()
        await pilot.press("down", "down", "enter")
        await settle(app)
        assert app.host_index == 2
        assert app.query_one(TopologyView).host_index == 2
        assert str(app.query_one(PlainTree).root.label) == "node03"
        assert app.query_one(LinksView).host_index == 2


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_h_moves_every_tab_to_the_next_host_and_odd_hosts_are_named(size: tuple[int, int]) -> None:
    """`h` is in the key bar on a cluster (not on one box); on Links it moves Topology's tree, identity table and
    hosts table along; node01's Links title says that node02 and node03 are the odd ones."""

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("h100-cluster-mixed"), services=FakeServices())
        async with app.run_test(size=size) as pilot:
            await settle(app)
            assert " h Next host " in app.query_one(KeyBar).render().plain
            title = str(app.query_one("#links-title", Static).render())
            assert "odd ones out: node02, node03" in title
            await pilot.press("h")
            await settle(app)
            assert app.query_one(LinksView).host_index == 1 and app.query_one(TopologyView).host_index == 1
            assert "this host is an odd one out (host-fewer-nvlinks" in str(app.query_one("#links-title", Static).render())
            await pilot.press("2")
            await settle(app)
            assert str(app.query_one(PlainTree).root.label) == "node02"
            assert app.query_one("#hosts-table", DataTable).cursor_row == 1
            gpus = app.query_one("#identity-table", DataTable)
            assert gpus.get_row_at(0)[1].plain.startswith("! host-fewer-nvlinks") or any(
                gpus.get_row_at(row)[1].plain.startswith("!") for row in range(gpus.row_count))
        app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices())
        async with app.run_test(size=size):
            await settle(app)
            assert " h Next host " not in app.query_one(KeyBar).render().plain

    run()


@async_test
async def test_single_host_has_no_host_list() -> None:
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="topology")
    async with app.run_test(size=SIZE):
        await settle(app)
        assert not app.query_one("#hosts-table", DataTable).display


@async_test
async def test_ranks_on_nvl72_place_72_gpus_per_node() -> None:
    """An NVL72 rack is one node of 72 GPUs on the Ranks tab, not 18 nodes of 4."""
    app = build_app(snapshot=load_sample("gb200-nvl72"), initial_tab="ranks")
    async with app.run_test(size=SIZE):
        await settle(app)
        ranks = app.query_one(RanksView)
        assert ranks.checked_form is not None and ranks.checked_form.nodes == 1
        assert dict(ranks.checked_form.sizes)["tp"] == 72
        assert ranks.report is not None and len(ranks.report.placement) == 72
        assert not [finding for finding in ranks.report.findings if finding.code == "tp-crosses-node"]


def test_a_ring_on_an_nvlink_domain_is_drawn_on_the_host_of_its_first_hop() -> None:
    """Ranks 4-11 of NVL72 (trays 02 and 03) as a TP ring: on Links it is tray02's four GPUs with two hops leaving."""
    from linkscope.topo.machine.cluster import ring_on_host

    snapshot = load_sample("gb200-nvl72")
    hops = (*((position, position + 1) for position in range(4, 11)), (11, 4))
    assert ring_on_host(snapshot, 0, hops, 0) == (1, ((0, 1), (1, 2), (2, 3)), 2)
    mixed = load_sample("h100-cluster-mixed")
    assert ring_on_host(mixed, 2, ((0, 1),), 0) == (2, ((0, 1),), 0)
