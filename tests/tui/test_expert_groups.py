"""The app's rank map coloured by the expert grid's groups (etp, ep, edp) and the dense gradient group."""

from __future__ import annotations

from textual.widgets import Input, Select

from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.tabs.ranks import COLOUR_DIMS, RanksView
from support.tui import FakeServices, async_test, settle

SIZE = (120, 40)


@async_test
async def test_rank_map_colours_by_expert_groups() -> None:
    """tp 2, ep 4 with the 8x7b model on 8 GPUs: colouring by ep, edp, etp groups the ranks as Megatron's expert grid."""
    app = build_app(snapshot=load_sample("dgx-h100"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app)
        view = app.query_one(RanksView)
        app.query_one("#size-tp", Input).value = "2"
        app.query_one("#size-ep", Input).value = "4"
        app.query_one("#model", Input).value = "8x7b"
        await pilot.pause()
        await settle(app)
        assert view.report is not None
        assert {"etp", "ep", "edp"} <= set(COLOUR_DIMS)
        # expert grid: etp 2 x ep 4 x expert-dp 8/(2*4) = 1
        for dim, expected in (("ep", [0, 1, 0, 1, 0, 1, 0, 1]), ("edp", list(range(8))),
                              ("etp", [0, 0, 1, 1, 2, 2, 3, 3])):
            app.query_one("#colour-dim", Select).value = dim
            await pilot.pause()
            assert view._group_of_rank == expected, dim
