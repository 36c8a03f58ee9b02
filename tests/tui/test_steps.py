"""The Steps tab at the sizes people use: the collectives table stays visible at 80x24, every step can be
reached, and the status line says why calls were not priced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.screenshots import wait_idle
from support.paths import FIXTURES
from support.tui import async_test

REAL = FIXTURES / "real" / "traces"
SIX_STEPS = REAL / "hta-rank1-of-2-all_to_all-old-args.json.gz"
THREE_STEPS = REAL / "hta-2rank-nccl-allreduce-pg-ranks.json.gz"
PAIR = (REAL / "hta-rank0-of-128-sampled-no-pg.json.gz", REAL / "hta-rank1-of-128-sampled-no-pg.json.gz")


@async_test
async def test_table_visible_and_every_step_reachable_at_80x24() -> None:
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps", trace_paths=(str(SIX_STEPS), str(THREE_STEPS)))
    async with app.run_test(size=(80, 24)):
        await wait_idle(app)
        table = app.query_one("#steps-table", DataTable)
        assert table.row_count > 0 and table.size.height >= 5
        bars = app.query_one("#step-bars-scroll", VerticalScroll)
        lines = str(app.query_one("#step-bars", Static).render()).splitlines()
        assert len(lines) == 1 + 6 + 3 and "compute" in lines[0]  # legend, six steps of one rank, three of the other
        assert bars.virtual_size.height >= len(lines) and bars.can_focus


@async_test
async def test_calls_without_their_group_are_priced_as_the_whole_job() -> None:
    """The pair's calls name neither their process group's ranks nor its size: they are priced as the whole job
    (as `trace --source` prices them, `group_assumed` in its JSON), so the status lists the calls furthest below."""
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps", trace_paths=tuple(map(str, PAIR)))
    async with app.run_test(size=(120, 40)):
        await wait_idle(app)
        status = str(app.query_one("#steps-status", Static).render())
        assert "Collectives furthest below their links" in status


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
def test_bars_read_without_colour_ms_line_up_and_the_status_is_whole(size: tuple[int, int]) -> None:
    """Compute and exposed communication have glyphs of their own (not colour alone); every ms cell has three
    decimals; the status sentence is whole above the key bar."""
    from linkscope.tui.tabs.steps import COMPUTE_GLYPH, EXPOSED_GLYPH, OTHER_GLYPH

    @async_test
    async def run() -> None:
        app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps",
                        trace_paths=(str(SIX_STEPS), str(THREE_STEPS)))
        async with app.run_test(size=size):
            await wait_idle(app)
            legend, *bars = str(app.query_one("#step-bars", Static).render()).splitlines()
            assert len({COMPUTE_GLYPH, EXPOSED_GLYPH, OTHER_GLYPH}) == 3
            assert f"{COMPUTE_GLYPH} compute" in legend and f"{EXPOSED_GLYPH} exposed communication" in legend
            assert any(EXPOSED_GLYPH in bar for bar in bars) and any(COMPUTE_GLYPH in bar for bar in bars)
            table = app.query_one("#steps-table", DataTable)
            labels = [str(column.label) for column in table.columns.values()]
            for column in (index for index, label in enumerate(labels) if label.endswith("ms")):
                cells = [table.get_row_at(row)[column].plain for row in range(table.row_count)]
                assert all(re.fullmatch(r"\d+\.\d{3}|-", cell) for cell in cells), cells
            status = app.query_one("#steps-status", Static)
            said = Text(str(status.render())).wrap(app.console, status.content_size.width)
            assert len(said) <= status.content_size.height and status.region.bottom <= size[1] - 1

    run()


@async_test
async def test_steps_say_the_placement_what_was_judged_and_which_groups_were_assumed() -> None:
    """Ranks 0 and 1 of 128 (distributedInfo), no host name, no group: the summary says the one placement `trace
    --source` uses (16 hosts x 8 GPUs, assumed) and how many calls were priced, and every priced row marks its group
    as assumed (the whole job), as `group_assumed` does in `trace --json`."""
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps", trace_paths=tuple(map(str, PAIR)))
    async with app.run_test(size=(160, 50)):
        await wait_idle(app)
        rendered = str(app.query_one("#steps-summary", Static).render())
        assert any(line.startswith("placed: 128 ranks") for line in rendered.split("\n"))  # a line of its own
        assert "\\x0a" not in rendered  # the line break is not escaped as a control character
        summary = " ".join(rendered.split())
        assert "placed: 128 ranks: 16 hosts x 8 GPUs assumed" in summary
        assert "priced against their links" in summary and "priced as the whole job (assumed)" in summary
        table = app.query_one("#steps-table", DataTable)
        groups = [table.get_row_at(row)[-1].plain for row in range(table.row_count)]
        assert groups and all(group.endswith("(assumed: whole job)") for group in groups)


@async_test
async def test_steps_that_price_nothing_never_read_clean() -> None:
    """The kernel-less trace's 6 calls are known only from their CPU launches: none is priced, the summary says 0
    priced and the warning, never "No findings"."""
    no_kernels = REAL / "hta-no-distributedinfo-1-step-6-all_to_all-no-kernels-edited.json.gz"
    app = build_app(snapshot=load_sample("dgx-a100"), initial_tab="steps", trace_paths=(str(no_kernels),))
    async with app.run_test(size=(160, 50)):
        await wait_idle(app)
        summary = " ".join(str(app.query_one("#steps-summary", Static).render()).split())
        assert "6 call(s), 0 priced against their links" in summary and "collectives-not-judged" in summary
        assert "No findings" not in summary


@async_test
async def test_enter_draws_the_ring_where_the_traces_hosts_put_the_ranks(tmp_path: Path) -> None:
    """Four ranks whose traces say two hosts (ranks 0-1 on node-a, 2-3 on node-b): the all_reduce's ring drawn on
    Links leaves the first host twice (the one placement `trace --source` prices on), where ranks dealt 8 to a
    DGX H100 host would keep it inside one."""
    from support.trace import TraceBuilder

    paths = []
    for rank, host in enumerate(["node-a", "node-a", "node-b", "node-b"]):
        builder = TraceBuilder(rank=rank, world_size=4, host=host)
        builder.step(1, 0, 50_000)
        builder.collective("allreduce", 64 << 20, launch_us=30_000, start_us=30_100, duration_us=10_000)
        paths.append(str(builder.write(tmp_path / f"rank{rank}.json")))
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps", trace_paths=tuple(paths))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_idle(app)
        summary = " ".join(str(app.query_one("#steps-summary", Static).render()).split())
        assert "placed: 4 ranks: 2 hosts x 2 GPUs from the traces' hosts" in summary
        app.query_one("#steps-table", DataTable).focus()
        await pilot.press("enter")
        await wait_idle(app)
        from linkscope.tui.tabs.links import LinksView

        ring = app.query_one(LinksView).ring
        assert ring is not None and ring.off_node_hops == 2 and len(ring.hops) == 1
        assert "ring drawn on the Links tab" in str(app.query_one("#steps-status", Static).render())
