"""SVG snapshot tests of every tab on the built-in samples, at 120x40 and 80x24.

The scenes are the ones `python -m linkscope.tui.screenshots` draws for the README. Regenerate the
baselines after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.pilot import Pilot

from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.screenshots import SCENES, Scene, play, scene_app, wait_idle
from support.tui import measured_copies

SIZES = [(120, 40), (80, 24)]


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.name)
def test_tab_on_sample(snap_compare: Any, scene: Scene, size: tuple[int, int]) -> None:
    """Each tab on its sample looks as approved."""

    async def run_before(pilot: Pilot[None]) -> None:
        await play(pilot, scene)

    assert snap_compare(scene_app(scene), terminal_size=size, run_before=run_before)


def test_links_with_degraded_measurement(snap_compare: Any) -> None:
    """Measured cells show GB/s and ratio; the slow pair stands out with its detail open."""
    snapshot = dataclasses.replace(load_sample("dgx-h100"), measurements=measured_copies(degraded=(0, 3)))

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_idle(pilot.app)  # type: ignore[arg-type]
        await pilot.press("right", "right")  # from the first link (GPU0, GPU1) to the slow pair (GPU0, GPU3)

    assert snap_compare(build_app(snapshot=snapshot), terminal_size=(120, 40), run_before=run_before)


def test_links_with_ring_from_ranks(snap_compare: Any) -> None:
    """A tp group picked on the Ranks tab is drawn as a ring over the Links grid."""

    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        await wait_idle(app)  # type: ignore[arg-type]
        await pilot.press("backspace", "4")
        await wait_idle(app)  # type: ignore[arg-type]
        app.query_one("#rank-map").focus()
        await pilot.press("right", "right", "right", "right", "enter")
        await wait_idle(app)  # type: ignore[arg-type]
        await pilot.press("1")
        await wait_idle(app)  # type: ignore[arg-type]

    app = build_app(snapshot=load_sample("dgx1-v100"), initial_tab="ranks")
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_links_on_degraded_sample(snap_compare: Any) -> None:
    """GPU 3's NV16 pairs stand out against the NV18 box; the detail names the best pair's bandwidth."""

    async def run_before(pilot: Pilot[None]) -> None:
        await wait_idle(pilot.app)  # type: ignore[arg-type]
        await pilot.press("right", "right")  # from (GPU0, GPU1) to GPU3's NV16 pair

    assert snap_compare(build_app(snapshot=load_sample("dgx-h100-degraded")), terminal_size=(80, 24), run_before=run_before)
