"""How fast the app is: first paint of the real process, tab switches and layout edits on 1,024 nodes.

Run: `python benchmarks/bench_tui.py` (needs tmux for the first-paint rows). Prints one table;
goals: first paint < 1 s, every update < 100 ms (the ok column judges the median; the max is shown).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.widgets import Input

from linkscope.topo.samples import load_sample
from linkscope.tui.app import TABS, LinkscopeApp, build_app
from linkscope.tui.link_cells import gpu_cells
from linkscope.tui.messages import LayoutChecked
from linkscope.tui.screenshots import wait_idle
from linkscope.tui.tabs.links import LinksView
from linkscope.tui.tabs.ranks import RanksView
from linkscope.tui.widgets.link_grid import LinkGrid
from linkscope.tui.widgets.rank_map import RankMap

NODES = 1024
REPEATS = 5
GOAL_PAINT_MS = 1000.0
GOAL_UPDATE_MS = 100.0

Row = tuple[str, float, float, float]


def first_paint_ms(args: list[str], needle: str, repeats: int = 3) -> list[float]:
    """Milliseconds from starting `linkscope ARGS` in a tmux pane until `needle` is on its screen."""
    executable = Path(sys.executable).with_name("linkscope")
    times = []
    with tempfile.TemporaryDirectory() as folder:
        socket = str(Path(folder) / "tmux.sock")
        for attempt in range(repeats):
            session = f"paint{attempt}"
            started = time.perf_counter()
            subprocess.run(
                [
                    "tmux",
                    "-S",
                    socket,
                    "new-session",
                    "-d",
                    "-s",
                    session,
                    "-x",
                    "120",
                    "-y",
                    "40",
                    f"{executable} {' '.join(args)}; sleep 30",
                ],
                check=True,
            )
            while True:
                screen = subprocess.run(
                    ["tmux", "-S", socket, "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
                ).stdout
                if needle in screen:
                    times.append((time.perf_counter() - started) * 1000)
                    break
                if time.perf_counter() - started > 20:
                    times.append(float("inf"))
                    break
                time.sleep(0.005)
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", session, "C-q"], check=True)
            time.sleep(0.3)
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
    return times


class FrameClock:
    """Records when the app puts frames on the (headless) screen."""

    def __init__(self, app: LinkscopeApp) -> None:
        self.frames: list[float] = []
        display = app._display

        def recorded(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            self.frames.append(time.perf_counter())

        app._display = recorded  # type: ignore[method-assign]

    def first_after(self, moment: float) -> float:
        """Time of the first frame at or after `moment` (or `moment` when there was none)."""
        return next((frame for frame in self.frames if frame >= moment), moment)

    async def timed(self, action: Callable[[], Awaitable[None]], repeats: int = REPEATS) -> tuple[list[float], list[float]]:
        """Per call of `action`: ms to its first frame, and ms to its last frame (the app idle after it)."""
        first, last = [], []
        for _ in range(repeats):
            self.frames.clear()
            started = time.perf_counter()
            await action()
            first.append((self.first_after(started) - started) * 1000)
            last.append((max([started, *self.frames]) - started) * 1000)
        return first, last


async def cluster_rows() -> list[tuple[str, list[float]]]:
    """Tab switches, layout edits and redraws with the dgx-h100 sample repeated over 1,024 nodes."""
    rows: list[tuple[str, list[float]]] = []
    app = build_app(snapshot=load_sample("dgx-h100"), initial_tab="ranks")
    async with app.run_test(size=(120, 40)) as pilot:
        app.animation_level = "none"
        clock = FrameClock(app)
        await wait_idle(app)
        ranks = app.query_one(RanksView)
        app.query_one("#nodes", Input).value = str(NODES)
        await wait_idle(app)
        assert ranks.report is not None and len(ranks.report.placement) == NODES * 8

        handled: list[tuple[float, float]] = []
        original = RanksView.on_layout_checked

        def measured(view: RanksView, message: LayoutChecked) -> None:
            started = time.perf_counter()
            original(view, message)
            handled.append((started, time.perf_counter()))

        edits: list[float] = []
        redraws: list[float] = []
        RanksView.on_layout_checked = measured  # type: ignore[method-assign,assignment]
        try:
            for value in ["4", "8"] * REPEATS:
                handled.clear()
                clock.frames.clear()
                started = time.perf_counter()
                app.query_one("#size-tp", Input).value = value
                await wait_idle(app)
                assert ranks.checked_form is not None and dict(ranks.checked_form.sizes)["tp"] == int(value)
                begin, end = handled[-1]
                edits.append((clock.first_after(end) - started) * 1000)
                redraws.append((end - begin) * 1000)
        finally:
            RanksView.on_layout_checked = original  # type: ignore[method-assign]
        rows.append((f"edit tp on {NODES} nodes: keystroke -> new map on screen", edits))
        rows.append((f"  of which map + findings update ({NODES * 8} ranks)", redraws))

        for tab, _ in TABS:
            app.action_show_tab(tab)
            await pilot.pause()

        async def switch(order: list[str] = [tab for tab, _ in TABS]) -> None:  # noqa: B006
            order.append(order.pop(0))
            app.action_show_tab(order[0])
            await pilot.pause()

        shown, settled = await clock.timed(switch, repeats=2 * len(TABS))
        rows.append(("switch tab: new tab on screen", shown))
        rows.append(("switch tab: settled (focus moved, key bar updated)", settled))

        app.action_show_tab("ranks")
        await pilot.pause()
        rank_map = app.query_one(RankMap)
        rank_map.focus()
        await pilot.pause()

        async def scroll() -> None:
            await pilot.press("pagedown")
            await pilot.pause()

        shown, _ = await clock.timed(scroll)
        rows.append((f"rank map page down ({NODES} nodes)", shown))
        await wait_idle(app)
    return rows


async def grid_rows() -> list[tuple[str, list[float]]]:
    """Building the 72 x 72 Links grid."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.tui import small_snapshot

    snapshot = small_snapshot(gpus=72)
    app = build_app(snapshot=snapshot)
    rows: list[tuple[str, list[float]]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        clock = FrameClock(app)
        await pilot.pause()
        view = app.query_one(LinksView)

        async def redraw() -> None:
            view.show_expected = not view.show_expected
            await pilot.pause()

        rows.append(("Links grid 72 x 72 redraw (toggle GB/s)", (await clock.timed(redraw))[0]))

        async def move() -> None:
            await pilot.press("right")
            await pilot.pause()

        app.query_one(LinkGrid).focus()
        rows.append(("Links grid 72 x 72 cursor move + detail", (await clock.timed(move))[0]))
        started = time.perf_counter()
        gpu_cells(snapshot.host, None)
        rows.append(("  of which cell model (pure)", [(time.perf_counter() - started) * 1000]))
        assert app.query_one(LinkGrid).row_count == 72
    return rows


def main() -> int:
    """Measure and print the table."""
    results: list[tuple[str, list[float], float]] = []
    if shutil.which("tmux"):
        results.append(
            ("first paint: linkscope open sample:dgx-h100", first_paint_ms(["open", "sample:dgx-h100"], "NV18"), GOAL_PAINT_MS)
        )
        results.append(("first paint: linkscope (probe, no-GPU fallback)", first_paint_ms([], "NV18"), GOAL_PAINT_MS))
    else:
        print("tmux not found: first-paint rows skipped")
    results += [(name, times, GOAL_UPDATE_MS) for name, times in asyncio.run(cluster_rows())]
    results += [(name, times, GOAL_UPDATE_MS) for name, times in asyncio.run(grid_rows())]
    print(f"{'measurement':<52} {'median ms':>10} {'max ms':>9} {'goal ms':>8}  ok")
    for name, times, goal in results:
        median, worst = statistics.median(times), max(times)
        ok = "yes" if median < goal else "NO"
        print(f"{name:<52} {median:>10.1f} {worst:>9.1f} {goal:>8.0f}  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
