"""An NCCL log on the Links grid: each GPU pair shows the transport NCCL chose; SHM where P2P should be stands out."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from linkscope.topo.formats.nccl_log import read_nccl_log_text
from linkscope.topo.nccl.placement import NcclPlacement, place_edges
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.link_cells import gpu_cells
from linkscope.tui.widgets.link_detail import LinkDetail
from linkscope.tui.widgets.link_grid import LinkGrid
from support.layout import run_cli
from support.nccl_log import H100_SHM
from support.paths import FIXTURES
from support.tui import FakeServices, async_test, settle

REAL = FIXTURES / "real" / "nccl_debug"


def h100_placement() -> NcclPlacement:
    return place_edges(read_nccl_log_text(H100_SHM, "h100.log"), load_sample("dgx-h100"))


def test_cells_carry_transports_and_flag_shm_on_nvlink() -> None:
    host = load_sample("dgx-h100").host
    pairs = {key: frozenset(value) for key, value in h100_placement().pair_transports().items()}
    cells = gpu_cells(host, None, frozenset(), pairs)
    assert cells[0][1].transports == frozenset({"SHM"}) and cells[0][1].transport_below_link
    assert cells[1][0].transport_below_link
    assert cells[1][2].transports == frozenset({"P2P"}) and not cells[1][2].transport_below_link
    assert cells[0][2].transports == frozenset() and not cells[0][2].transport_below_link
    assert cells[0][1].text(False) == "NV18:SHM"
    assert cells[0][0].text(False) == "X"


def test_shm_across_the_cpu_is_not_flagged() -> None:
    """On a PCIe box without P2P (the consumer sample's GPUs sit behind the CPU, PHB) SHM is NCCL's normal choice."""
    snapshot = load_sample("consumer-2gpu")
    log = (REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt").read_text()
    placement = place_edges(read_nccl_log_text(log, "consumer.log"), snapshot)
    pairs = {key: frozenset(value) for key, value in placement.pair_transports().items()}
    cell = gpu_cells(snapshot.host, None, frozenset(), pairs)[0][1]
    assert cell.token == "PHB" and cell.transports == frozenset({"SHM"}) and not cell.transport_below_link


@async_test
async def test_links_grid_shows_nccl_transports_and_the_slow_cell_stands_out() -> None:
    """The grid labels pairs with their transport; the SHM-on-NVLink cell is styled apart and its detail says why."""
    snapshot = load_sample("dgx-h100")
    app = build_app(snapshot=snapshot, services=FakeServices(), nccl=h100_placement())
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        grid = app.query_one(LinkGrid)
        slow_text, slow_style = grid.render_cell(0, 1)
        fine_text, fine_style = grid.render_cell(1, 2)
        plain_text, plain_style = grid.render_cell(0, 2)
        assert slow_text == "NV18:SHM" and fine_text == "NV18:P2P" and plain_text == "NV18"
        assert slow_style != fine_style and fine_style == plain_style
        title = str(app.query_one("#links-title", Static).render())
        assert "NCCL log" in title and "1 through SHM/NET where P2P should be" in title
        assert grid.cursor == (0, 1)  # the first link, the slow one here
        detail = str(app.query_one(LinkDetail).render())
        assert "NCCL log: connections via SHM" in detail and "P2P expected" in detail


@async_test
async def test_opening_another_sample_drops_the_log() -> None:
    snapshot = load_sample("dgx-h100")
    services = FakeServices(snapshots={"sample:dgx-h100": snapshot})
    app = build_app(snapshot=snapshot, services=services, nccl=h100_placement())
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.query_one(LinkGrid).render_cell(0, 1)[0] == "NV18:SHM"
        app.open_sample("dgx-h100")
        await settle(app)
        assert app.query_one(LinkGrid).render_cell(0, 1)[0] == "NV18"


def test_open_needs_a_source_for_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input is said before anything else, the missing terminal included."""
    code, _, err = run_cli(["open", "--nccl-log", str(REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt")], capsys)
    assert code == 2 and "--nccl-log" in err


def test_open_reads_the_log_before_the_app_starts(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    opened: list[object] = []
    monkeypatch.setattr("linkscope.tui.app.LinkscopeApp.run", lambda app: opened.append(app.nccl))
    monkeypatch.setattr("linkscope.commands.open_cmd.terminal_problem", lambda: None)  # pytest's output is no terminal
    log = str(REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt")
    code, _, _ = run_cli(["open", "sample:consumer-2gpu", "--nccl-log", log], capsys)
    assert code == 0 and len(opened) == 1 and opened[0] is not None
    code, _, err = run_cli(["open", "sample:consumer-2gpu", "--nccl-log", "/nonexistent.log"], capsys)
    assert code == 2 and "/nonexistent.log" in err


@async_test
async def test_pair_detail_shows_every_line_at_120x40() -> None:
    """With an NCCL log the pair detail has seven lines (the PCIe path of both GPUs last): none is cut off."""
    snapshot = load_sample("consumer-2gpu")
    placement = place_edges(read_nccl_log_text((REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt").read_text(), "c"),
                            snapshot)
    app = build_app(snapshot=snapshot, services=FakeServices(), nccl=placement)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("right")
        await settle(app)
        detail = app.query_one(LinkDetail)
        lines = str(detail.render()).splitlines()
        assert lines[-1].startswith(("PCIe GPU1", "  then GPU1")) and detail.content_region.height >= len(lines)
