"""NCCL's rings on the Links grid: the channels of its ring graph drawn on the machine's links, one at a time (g)."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from linkscope.topo.formats.nccl_graph import read_nccl_graph_xml
from linkscope.topo.formats.nccl_graph_source import load_nccl_graphs
from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of
from linkscope.topo.formats.nccl_topo_xml import read_nccl_topo_xml
from linkscope.topo.nccl.graphs import nccl_rings
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.screenshots import wait_idle
from linkscope.tui.widgets.link_grid import LinkGrid
from support.paths import FIXTURES
from support.tui import FakeServices, async_test

REAL = FIXTURES / "real"
NCV4_TOPO = REAL / "nccl_topo_xml" / "azure-ncv4-a100-pcie-4gpu-vendor-topo-nvlink-self-target-empty-link-speed-vm.xml"
NCV4_GRAPH = REAL / "nccl_graph_xml" / "azure-ncv4-a100-pcie-4gpu-vendor-graph-file-3-graphs-sys-pix.xml"
RTX3090_TOPO = REAL / "nccl_topo_xml" / "rtx3090-8gpu-2-plx-switches-fdr-nic-gdr0-dump.xml"
RTX3090_GRAPH = REAL / "nccl_graph_xml" / "rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml"


def _snapshot(path: Any) -> Any:
    return snapshot_of(read_nccl_topo_xml(path.read_text(), path.name))


def test_ring_channels_become_hops_on_the_host() -> None:
    """Azure's NCv4 graph file (read by hand): ring channels `0 1 2 3` and `0 3 2 1`, 12 GB/s, SYS."""
    rings = nccl_rings(read_nccl_graph_xml(NCV4_GRAPH.read_text(), "g.xml"), _snapshot(NCV4_TOPO).host)
    assert [ring.hops for ring in rings] == [((0, 1), (1, 2), (2, 3), (3, 0)), ((0, 3), (3, 2), (2, 1), (1, 0))]
    assert rings[0].label == "NCCL ring 0/2: 0 1 2 3 (SYS, 12 GB/s)" and rings[0].off_node_hops == 0


def test_a_ring_between_nodes_is_a_chain_with_its_net_ends() -> None:
    rings = nccl_rings(read_nccl_graph_xml(RTX3090_GRAPH.read_text(), "g.xml"), _snapshot(RTX3090_TOPO).host)
    (ring,) = rings
    assert ring.hops == tuple((n, n + 1) for n in range(7)) and ring.off_node_hops == 2


def test_bus_id_channels_of_a_log_find_their_gpu_and_rank_channels_are_left_out() -> None:
    h200 = REAL / "gpu" / "h200-580.159.04"
    graphs = load_nccl_graphs(str(h200 / "nccl-debug-ddp-step.txt"))
    probe = _snapshot(h200 / "nccl-topo-dump.xml")
    assert len(nccl_rings(graphs, probe.host)) == 32  # ` N : GPU/0-60`: bus 0000:00:06.0, the snapshot's GPU 0
    old = load_nccl_graphs(str(next((REAL / "nccl_debug").glob("rtx3090-2node-16rank-*.txt"))))
    assert nccl_rings(old, load_sample("dgx-h100").host) == ()


@async_test
async def test_links_grid_draws_nccls_ring_and_g_shows_the_next() -> None:
    snapshot = _snapshot(NCV4_TOPO)
    graphs = read_nccl_graph_xml(NCV4_GRAPH.read_text(), "g.xml")
    app = build_app(snapshot=snapshot, services=FakeServices(), nccl_graphs=graphs)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_idle(app)
        title = str(app.query_one("#links-title", Static).render())
        grid = app.query_one(LinkGrid)
        assert "NCCL ring 0/2: 0 1 2 3 (SYS, 12 GB/s) (g: next)" in title
        assert grid.render_cell(0, 1)[0] == "*SYS" and grid.render_cell(0, 2)[0] == "SYS"
        await pilot.press("g")
        await wait_idle(app)
        assert "NCCL ring 1/2: 0 3 2 1" in str(app.query_one("#links-title", Static).render())


def test_links_with_nccls_ring_between_nodes(snap_compare: Any) -> None:
    """The rtx3090 box's own dump and its NCCL ring `net0 0..7 net0` drawn on the Links grid."""
    graphs = read_nccl_graph_xml(RTX3090_GRAPH.read_text(), RTX3090_GRAPH.name)

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_idle(pilot.app)  # type: ignore[arg-type]

    app = build_app(snapshot=_snapshot(RTX3090_TOPO), services=FakeServices(), nccl_graphs=graphs)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
