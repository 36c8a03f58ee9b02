"""The app shows expected next to measured: the Bench table and plot, and the Links grid's verdicts."""

from __future__ import annotations

import dataclasses

from textual.widgets import DataTable, Static

from linkscope.topo.formats.results import read_measurements
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.widgets.bandwidth_plot import EXPECTED_MARK, BandwidthPlot, plot_lines
from support.bench import FIXTURES
from support.tui import FakeServices, async_test, settle

SIZE = (120, 40)
A100_SENDRECV = FIXTURES / "nccl_tests" / "a100-8gpu-nvswitch-sendrecv-truncated.txt"


@async_test
async def test_bench_table_and_plot_show_what_the_model_expects() -> None:
    """nccl-tests send_recv on a DGX A100: each row has the model's busbw, the ratio and the verdict."""
    measured = read_measurements(A100_SENDRECV.read_text(), "a100")
    snapshot = dataclasses.replace(load_sample("dgx-a100"), measurements=measured)
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=SIZE):
        await settle(app)
        table = app.query_one("#bench-table", DataTable)
        labels = [str(column.label) for column in table.columns.values()]
        assert labels[2:6] == ["busbw", "expect", "ratio", "verdict"]  # the judgement first: the pane is narrow
        rows = [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]
        assert rows[0][5] == "far below" and rows[-1][5] == "ok"
        assert all(row[3] != "-" for row in rows)
        verdict_end = sum(column.get_render_width(table) for column in list(table.columns.values())[:6])
        assert verdict_end <= table.size.width  # the verdict is on screen without scrolling
        plot = app.query_one(BandwidthPlot)
        assert [size for size, _ in plot.expected] == [size for size, _ in plot.points]
        assert EXPECTED_MARK in str(plot.render())


def test_plot_marks_the_expected_height() -> None:
    lines = plot_lines(((1024, 1.0), (4096, 2.0)), height=2, bar_width=3, expected=((1024, 2.0),))
    assert lines[0][2] == EXPECTED_MARK and EXPECTED_MARK not in "".join(lines[1:])
    assert EXPECTED_MARK not in "".join(plot_lines(((1024, 1.0), (4096, 2.0)), height=2))


def test_link_detail_names_the_verdict_of_every_measured_pair() -> None:
    from linkscope.tui.link_cells import gpu_cells
    from linkscope.tui.widgets.link_detail import describe_gpu_pair
    from support.tui import measured_copies, nvswitch_host

    host = nvswitch_host()
    cells = gpu_cells(host, measured_copies(degraded=(0, 3)))
    assert "FAR BELOW" in str(describe_gpu_pair(host, cells[0][3]))
    lines = str(describe_gpu_pair(host, cells[0][1])).splitlines()
    assert lines[1].startswith("typically measured") and lines[2].startswith("spec line rate")  # one figure a line
    assert lines[3].endswith("of typically measured  ok")
    small = gpu_cells(host, measured_copies(degraded=(0, 3), size_bytes=1 << 20))
    assert "too small to judge" in str(describe_gpu_pair(host, small[0][3]))


def test_link_detail_figures_carry_units() -> None:
    """Every figure in the link detail says its unit: `1 NVLink` (not `1 NVLinks`), `GB/s` on the spec and
    on the best pair of a box whose pair is below it."""
    from linkscope.tui.link_cells import gpu_cells
    from linkscope.tui.widgets.link_detail import describe_gpu_pair

    mesh = load_sample("dgx1-v100").host
    nv1 = str(describe_gpu_pair(mesh, gpu_cells(mesh, None)[0][1]))
    assert "1 NVLink," in nv1 and "NVLinks" not in nv1 and "GB/s spec" in nv1
    degraded = load_sample("dgx-h100-degraded").host
    reduced = str(describe_gpu_pair(degraded, gpu_cells(degraded, None)[0][3]))
    assert "best pair here:" in reduced and reduced.split("best pair here:")[1].split()[1] == "GB/s"


@async_test
async def test_bench_verdict_on_screen_at_80_columns() -> None:
    measured = read_measurements(A100_SENDRECV.read_text(), "a100")
    snapshot = dataclasses.replace(load_sample("dgx-a100"), measurements=measured)
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=(80, 24)):
        await settle(app)
        table = app.query_one("#bench-table", DataTable)
        verdict_end = sum(column.get_render_width(table) for column in list(table.columns.values())[:6])
        assert verdict_end <= table.size.width


RTX_NCCL = FIXTURES / "nccl_tests" / "rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt"


@async_test
async def test_bench_tab_says_where_the_ranks_were_placed_and_what_was_judged() -> None:
    """The send_recv file (8 rows of 128 MiB to 1 GiB, read by hand; no `# Rank` lines) on a DGX A100: the tab says the
    8 ranks were assumed onto the one host and that the 8 rows were judged, as `import --expect` does."""
    measured = read_measurements(A100_SENDRECV.read_text(), "a100")
    snapshot = dataclasses.replace(load_sample("dgx-a100"), measurements=measured)
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=SIZE):
        await settle(app)
        said = " ".join(str(app.query_one("#bench-judged", Static).render()).split())
        assert "placed: 8 ranks: 1 host x 8 GPUs assumed" in said and "8 row(s) judged:" in said


@async_test
async def test_bench_tab_that_judges_nothing_says_so() -> None:
    """The 2080 Ti file's tables ran 2 ranks on one host (its `# Rank 0/1 ... on autodl-container-xxxxx device 0/1`
    lines, read by hand); shown on a host of one GPU they cannot be placed, so nothing is judged: the tab says
    NOTHING JUDGED and why, never a count of ok rows."""
    measured = read_measurements(RTX_NCCL.read_text(), "rtx")
    box = load_sample("consumer-2gpu")
    host = dataclasses.replace(box.host, gpus=box.host.gpus[:1], links=())
    snapshot = dataclasses.replace(box, hosts=(host,), measurements=measured)
    app = build_app(snapshot=snapshot, services=FakeServices(), initial_tab="bench")
    async with app.run_test(size=SIZE):
        await settle(app)
        said = " ".join(str(app.query_one("#bench-judged", Static).render()).split())
        assert "NOTHING JUDGED" in said and "not placed" in said and "row(s) judged:" not in said


def test_links_title_counts_the_judged_pairs_and_never_reads_clean_on_none() -> None:
    """Copies between every ordered pair of 8 GPUs at 256 MiB: 56 pairs judged (placed by GPU index); the same pairs
    at 1 MiB, too small to judge, are NOTHING JUDGED, not ok."""
    from linkscope.tui.link_cells import gpu_cells, judged_said
    from support.tui import measured_copies, nvswitch_host

    host = nvswitch_host()
    assert judged_said(gpu_cells(host, measured_copies())).startswith("56 pair(s) judged by GPU index:")
    small = judged_said(gpu_cells(host, measured_copies(size_bytes=1 << 20)))
    assert small == "NOTHING JUDGED (copies too small to judge)"
