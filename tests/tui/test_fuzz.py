"""The app on snapshots the loader accepts, however odd: every tab opens without an exception.

What the loader refuses never reaches the app (`open` prints the loader's line and exits 2); what
it accepts must render. Mutated samples that pass validation are opened and every tab is shown.
"""

from __future__ import annotations

import asyncio
import json
import os

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from support.fuzz import SAMPLES, mutated_json
from support.tui import settle


async def _visit_every_tab(snapshot: object) -> None:
    from linkscope.tui.app import TABS, build_app

    app = build_app(snapshot=snapshot)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        for tab_id, _title in TABS:
            app.action_show_tab(tab_id)
            await settle(app)
            await pilot.pause()
    assert app.return_code in (None, 0), f"the app ended with {app.return_code}"


@settings(max_examples=int(os.environ.get("LINKSCOPE_FUZZ_APP_EXAMPLES", "8")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_app_renders_every_snapshot_the_loader_accepts(data: st.DataObject) -> None:
    from linkscope.topo.formats.source import parse_source_text

    sample = data.draw(st.sampled_from(sorted(SAMPLES.glob("*.json"))))
    mutated = data.draw(mutated_json(json.loads(sample.read_text())))
    try:
        snapshot = parse_source_text(json.dumps(mutated), "fuzz.json")
    except InputError:
        assume(False)
        return
    asyncio.run(_visit_every_tab(snapshot))
