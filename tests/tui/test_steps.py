"""The Steps tab at the sizes people use: the collectives table stays visible at 80x24, every step can be
reached, and the status line says why calls were not priced."""

from __future__ import annotations

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
async def test_status_says_why_nothing_was_priced() -> None:
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="steps", trace_paths=tuple(map(str, PAIR)))
    async with app.run_test(size=(120, 40)):
        await wait_idle(app)
        status = str(app.query_one("#steps-status", Static).render())
        assert "no call names its process group's ranks" in status
