"""How fast the app is: first paint of the real process, tab switches and layout edits on 1,024 nodes, and the
memory a Monitor replay holds.

Run: `python benchmarks/bench_tui.py [--baseline REV] [--only paint|app|replay]` (tmux for the first-frame rows).
Goals: first frame <= 1 s on any source (a 1,024-host cluster file included; the floor row is a bare Textual app
on the same machine), every update < 100 ms, a Ranks keystroke on a 1,024-host cluster with odd nodes included
(the ok column judges the median; the max is shown), and a Monitor replay of 400 readings (2 minutes at 0.3 s)
whose resident memory stays flat. The first frames and the replay are measured for this tree and for git
revision REV (default main, unpacked by `baseline.py`) in one run, in turn, so both meet the same load; a first
frame gives the wall time and the CPU time of the app's process (the load of a shared machine moves the wall
time far more), and the goal is judged on CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from textual.widgets import Input

from linkscope.topo.model.snapshot import Snapshot
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
ODD_EVERY = 97
"""One host in this many is the degraded sample: the odd nodes a real cluster has."""
REPEATS = 5
GOAL_PAINT_MS = 1000.0
GOAL_UPDATE_MS = 100.0

Row = tuple[str, float, float, float]


FLOOR_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane
class Floor(App):
    def compose(self):
        yield Header()
        with TabbedContent():
            for title in ("Links", "Topology", "Ranks", "Bench", "Monitor", "Steps"):
                with TabPane(title):
                    yield Static(title)
        yield Footer()
Floor().run()
"""
"""The floor of a first frame: a bare Textual app with the same tabs and nothing to load."""


Paint = tuple[list[float], list[float]]
"""Wall ms until a needle is on the screen, and CPU ms of the app's process at its first frame, per start."""

FRAME_CLOCK = """
import runpy, sys, time
import textual.app
first_frame = textual.app.App._display
def display(self, screen, renderable):
    first_frame(self, screen, renderable)
    if textual.app.App._display is display:
        textual.app.App._display = first_frame
        with open(OUT, "w") as out:
            out.write(str(time.process_time() * 1000))
textual.app.App._display = display
OUT, flag, target, *rest = sys.argv[1:]
sys.argv = [target, *rest]
if flag == "-c":
    exec(compile(target, "<string>", "exec"))
else:
    runpy.run_module(target, run_name="__main__", alter_sys=True)
"""
"""Runs `python -c CODE` or `python -m MODULE ARGS` after noting, at the app's first frame, the CPU time its
process has used so far (into the file OUT): the first frame itself, however late the screen is looked at."""


def first_paint_ms(command: list[str], needles: tuple[str, ...], env: dict[str, str] | None = None,
                   repeats: int = 3) -> list[Paint]:
    """Per needle, milliseconds from starting `command` (`-c CODE` or `-m MODULE ARGS`, run by this Python) in a
    120x40 tmux pane until the needle is on its screen, and the CPU time its process had used at its first
    frame (the same for every needle; the load of a shared machine moves the wall times far more)."""
    times: list[Paint] = [([], []) for _ in needles]
    shell_env = " ".join(f"{key}={shlex.quote(value)}" for key, value in (env or {}).items())
    with tempfile.TemporaryDirectory() as folder:
        socket, clock, frame = str(Path(folder) / "tmux.sock"), Path(folder) / "clock.py", Path(folder) / "frame"
        clock.write_text(FRAME_CLOCK)
        for attempt in range(repeats):
            session = f"paint{attempt}"
            frame.unlink(missing_ok=True)
            started = time.perf_counter()
            run = shlex.join([sys.executable, str(clock), str(frame), *command])
            subprocess.run(["tmux", "-S", socket, "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                            f"env {shell_env} {run}; sleep 60"], check=True)
            for index, needle in enumerate(needles):
                while True:
                    screen = subprocess.run(["tmux", "-S", socket, "capture-pane", "-p", "-t", session],
                                            capture_output=True, text=True, check=True).stdout
                    if needle in screen:
                        times[index][0].append((time.perf_counter() - started) * 1000)
                        break
                    if time.perf_counter() - started > 60:
                        times[index][0].append(float("inf"))
                        break
                    time.sleep(0.005)
            while not frame.exists() and time.perf_counter() - started < 60:
                time.sleep(0.01)
            cpu_ms = float(frame.read_text() or "inf") if frame.exists() else float("inf")
            for index in range(len(needles)):
                times[index][1].append(cpu_ms)
            subprocess.run(["tmux", "-S", socket, "send-keys", "-t", session, "C-q"], check=True)
            time.sleep(0.3)
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
        # an app still loading a large file when its pane closed must not outlive the benchmark (only the processes
        # started through this run's own clock script are matched)
        subprocess.run(["pkill", "-f", str(clock)], capture_output=True)
    return times


def cluster_file(folder: Path, hosts: int = NODES, odd_every: int = ODD_EVERY) -> Path:
    """A cluster snapshot of `hosts` DGX H100s, one in `odd_every` the degraded sample (fewer NVLinks, x8 PCIe)."""
    from linkscope.topo.model.codec import snapshot_to_json
    from linkscope.topo.model.snapshot import Snapshot

    path = folder / f"cluster-{hosts}.json"
    path.write_text(snapshot_to_json(Snapshot(hosts=odd_cluster(hosts, odd_every).hosts, source=str(path))))
    return path


def odd_cluster(hosts: int = NODES, odd_every: int = ODD_EVERY) -> Snapshot:
    """`hosts` DGX H100 hosts with distinct names, every `odd_every`-th the degraded one (the odd node out)."""
    healthy, degraded = load_sample("dgx-h100").host, load_sample("dgx-h100-degraded").host
    return Snapshot(hosts=tuple(dataclasses.replace(degraded if number % odd_every == 5 else healthy,
                                                    hostname=f"gpu{number:04d}") for number in range(hosts)),
                    source="bench cluster")


def paint_rows(baseline: str | None, repeats: int) -> list[tuple[str, Paint, float]]:
    """First frame (the tab bar) and the grid on screen for a sample and a 1,024-host cluster file, beside the
    floor (a bare Textual app); with `baseline` (a git revision), the same rows for that revision's package,
    measured in turn with this tree's, so both run on one machine under one load."""
    rows: list[tuple[str, Paint, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        trees: list[tuple[str, str | None]] = [("", None)]
        if baseline:
            from baseline import package_tree, revision_name

            before = package_tree(baseline, Path(folder) / "before")
            trees.append((f" [before: {revision_name(baseline)}]", str(before)))
        cluster = str(cluster_file(Path(folder)))
        floor = first_paint_ms(["-c", FLOOR_APP], ("Links",), repeats=repeats)
        rows.append(("floor: bare Textual app, six tabs: first frame", floor[0], GOAL_PAINT_MS))
        for source, label in (("sample:dgx-h100", "sample:dgx-h100"), (cluster, f"{NODES}-host cluster")):
            for suffix, tree in trees:
                env = {"PYTHONPATH": tree} if tree else {}
                frame, grid = first_paint_ms(["-m", "linkscope", "open", source], ("Links", "GPU0 "), env, repeats=repeats)
                rows.append((f"open {label}: first frame{suffix}", frame, GOAL_PAINT_MS))
                rows.append((f"open {label}: grid on screen{suffix}", grid, float("nan")))
    return rows


async def odd_cluster_rows() -> list[tuple[str, list[float]]]:
    """A keystroke in the Ranks form on a 1,024-host cluster snapshot with odd nodes (1 in 97 degraded)."""
    rows: list[tuple[str, list[float]]] = []
    app = build_app(snapshot=odd_cluster(), initial_tab="ranks")
    async with app.run_test(size=(120, 40)):
        app.animation_level = "none"
        clock = FrameClock(app)
        await wait_idle(app)
        ranks = app.query_one(RanksView)
        assert ranks.report is not None and len(ranks.report.placement) == NODES * 8
        edits: list[float] = []
        with handled_checks() as handled:
            for value in ["4", "8"] * REPEATS:
                edits.append((await timed_edit(app, clock, handled, "#size-tp", value))[0])
                assert ranks.checked_form is not None and dict(ranks.checked_form.sizes)["tp"] == int(value)
        rows.append((f"edit tp, {NODES}-host cluster with odd nodes: keystroke -> new map on screen", edits))
    return rows


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


@contextlib.contextmanager
def handled_checks() -> Iterator[list[tuple[float, float]]]:
    """While inside: (start, end) of each time the Ranks tab handles a check's answer, latest last."""
    handled: list[tuple[float, float]] = []
    original = RanksView.on_layout_checked

    def measured(view: RanksView, message: LayoutChecked) -> None:
        started = time.perf_counter()
        original(view, message)
        handled.append((started, time.perf_counter()))

    RanksView.on_layout_checked = measured  # type: ignore[method-assign,assignment]
    try:
        yield handled
    finally:
        RanksView.on_layout_checked = original  # type: ignore[method-assign]


POLL_S = 0.002
"""How often an edit's measurement looks whether the new map's frame is out (a few ms of resolution, no load)."""
EDIT_LIMIT_S = 30.0
"""An edit with no new frame after this long is a failure of the app, not a slow row."""


async def timed_edit(app: LinkscopeApp, clock: FrameClock, handled: list[tuple[float, float]], field: str,
                     value: str) -> tuple[float, float]:
    """Type `value` into the Ranks form's `field`: (ms from then to the first frame after the check's answer was
    handled, ms the handling took). The frame is watched for with a light poll, as a person watches; waiting for
    the app to go idle inside the timed span (a callback to every widget, again and again while the check runs)
    cost the main thread 20-35 ms per keystroke that no real keystroke pays, so that wait comes after."""
    handled.clear()
    clock.frames.clear()
    started = time.perf_counter()
    app.query_one(field, Input).value = value
    while not handled or clock.first_after(handled[-1][1]) == handled[-1][1]:
        if time.perf_counter() - started > EDIT_LIMIT_S:
            raise SystemExit(f"no new frame {EDIT_LIMIT_S:.0f} s after typing {value!r} into {field}")
        await asyncio.sleep(POLL_S)
    begin, end = handled[-1]
    shown = clock.first_after(end)
    await wait_idle(app)  # settled before the next edit, outside the timed span
    return (shown - started) * 1000, (end - begin) * 1000


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

        edits: list[float] = []
        redraws: list[float] = []
        with handled_checks() as handled:
            for value in ["4", "8"] * REPEATS:
                shown_ms, update_ms = await timed_edit(app, clock, handled, "#size-tp", value)
                assert ranks.checked_form is not None and dict(ranks.checked_form.sizes)["tp"] == int(value)
                edits.append(shown_ms)
                redraws.append(update_ms)
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


REPLAY_READINGS = 400
REPLAY_INTERVAL_S = 0.3
"""A replayed recording: 400 readings 0.3 s apart, two minutes of replay (8 GPUs x 18 links each)."""
REPLAY_FLAT_MIB = 5.0
"""Growth of resident memory from the first quarter of the replay to 30 s after its end that still counts as flat."""


async def replay_memory_mib(readings: int, interval_s: float) -> list[tuple[str, float]]:
    """Resident memory (MiB) of this process at each eighth of a replay of `readings` readings `interval_s` apart
    and 30 s after its end (the tables' rows are replaced, never added to), and the replay's wall seconds."""
    import psutil

    from linkscope.topo.model.recording import CounterSample, GpuCounters, LinkCounters, Recording
    from linkscope.tui.tabs.monitor import MonitorView

    samples = tuple(CounterSample(number * interval_s, tuple(
        GpuCounters(index=index, nvlink_tx_gbps=100.0 + number % 7, nvlink_rx_gbps=90.0,
                    links=tuple(LinkCounters(link, 5.5, 5.0) for link in range(18)),
                    nvlink_errors=(("replay", number // 100),), pcie_tx_gbps=1.0, pcie_rx_gbps=2.0,
                    pcie_gen_current=5, pcie_width_current=16) for index in range(8)))
        for number in range(readings))
    recording = Recording("dgx-h100", "2026-11-27T00:00:00+00:00", interval_s, samples)
    snapshot = dataclasses.replace(load_sample("dgx-h100"), recording=recording, source="rec.json")
    process = psutil.Process()
    app = build_app(snapshot=snapshot, initial_tab="monitor")
    marks: list[tuple[str, float]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(MonitorView)
        started = time.monotonic()
        for target in [readings * eighth // 8 for eighth in range(1, 9)]:
            while view._replay_at < target - 1:
                await pilot.pause(0.05)
            marks.append((f"{target}", process.memory_info().rss / 2**20))
        replay_s = time.monotonic() - started
        await pilot.pause(30)
        marks.append(("+30 s", process.memory_info().rss / 2**20))
    return [*marks, ("replay s", replay_s)]


def replay_rows(baseline: str | None) -> list[tuple[str, list[tuple[str, float]]]]:
    """The replay's memory marks, each tree in a process of its own (this one and `baseline`, side by side, so
    both replay under the same load and nothing else the benchmark did sits in their memory)."""
    with tempfile.TemporaryDirectory() as folder:
        trees: list[tuple[str, Path | None]] = [("after: this tree", None)]
        if baseline:
            from baseline import package_tree, revision_name

            trees.append((f"before: {revision_name(baseline)}", package_tree(baseline, Path(folder) / "before")))
        from baseline import env_for

        script = str(Path(__file__).resolve())
        workers = [(label, subprocess.Popen([sys.executable, script, "--replay-worker"], stdout=subprocess.PIPE, text=True,
                                            env=env_for(tree), cwd=tree or Path(script).parent.parent))
                   for label, tree in trees]
        rows = []
        for label, worker in workers:
            out, _ = worker.communicate()
            if worker.returncode != 0:
                raise SystemExit(f"the replay of {label} failed (status {worker.returncode})")
            rows.append((label, [(name, float(value)) for name, value in json.loads(out)]))
    return rows


def print_replay(rows: list[tuple[str, list[tuple[str, float]]]]) -> None:
    """One line per tree: resident MiB at each eighth of the replay and after it, growth, and the verdict."""
    names = [name for name, _ in rows[0][1] if name != "replay s"]
    print(f"\nMonitor replay of {REPLAY_READINGS} readings every {REPLAY_INTERVAL_S:g} s "
          f"({REPLAY_READINGS * REPLAY_INTERVAL_S / 60:.0f} min), resident MiB after reading N, in a process of its own:")
    print(f"{'tree':<32} " + " ".join(f"{name:>6}" for name in names) + f" {'growth':>7} {'replay s':>9}  flat")
    for label, marks in rows:
        values = dict(marks)
        quarter = values[names[1]]
        growth = max(values[name] for name in names[1:]) - quarter
        flat = "yes" if growth < REPLAY_FLAT_MIB else "NO"
        print(f"{label:<32} " + " ".join(f"{values[name]:6.1f}" for name in names)
              + f" {growth:+7.1f} {values['replay s']:9.0f}  {flat} (< {REPLAY_FLAT_MIB:g} MiB from reading "
              f"{names[1]} on)")


def print_paint(rows: list[tuple[str, Paint, float]]) -> None:
    """The first-frame table: wall and CPU medians, the worst wall, the goal judged on CPU."""
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of "
          f"{len(rows[0][1][0])} starts in a 120x40 tmux pane")
    print(f"{'first frame, whole process':<66} {'wall ms':>8} {'CPU ms':>7} {'max wall':>9} {'goal ms':>8}  ok (CPU)")
    for name, (wall, cpu), goal in rows:
        ok = "-" if goal != goal else "yes" if statistics.median(cpu) <= goal else "NO"
        cpu_ms = f"{statistics.median(cpu):.0f}" if goal == goal else "-"  # the CPU clock stops at the first frame
        print(f"{name:<66} {statistics.median(wall):8.0f} {cpu_ms:>7} {max(wall):9.0f} {goal:8.0f}  {ok}")


def main(argv: list[str] | None = None) -> int:
    """Measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="main", metavar="REV",
                        help="git revision whose first frames and replay are measured as `before` (default main; "
                        "'' for this tree alone)")
    parser.add_argument("--only", choices=("paint", "app", "replay"),
                        help="only the first-frame rows, only the in-app rows, or only the replay's memory")
    parser.add_argument("--repeats", type=int, default=5, help="starts per first-frame row (default 5)")
    parser.add_argument("--replay-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.replay_worker:
        print(json.dumps(asyncio.run(replay_memory_mib(REPLAY_READINGS, REPLAY_INTERVAL_S))))
        return 0
    if args.only in (None, "paint"):
        if shutil.which("tmux"):
            print_paint(paint_rows(args.baseline or None, args.repeats))
        else:
            print("tmux not found: first-paint rows skipped")
    if args.only in (None, "app"):
        results = [(name, times, GOAL_UPDATE_MS) for name, times in asyncio.run(cluster_rows())]
        results += [(name, times, GOAL_UPDATE_MS) for name, times in asyncio.run(odd_cluster_rows())]
        results += [(name, times, GOAL_UPDATE_MS) for name, times in asyncio.run(grid_rows())]
        print(f"\n{'in the app':<58} {'median ms':>10} {'max ms':>9} {'goal ms':>8}  ok")
        for name, times, goal in results:
            median, worst = statistics.median(times), max(times)
            ok = "-" if goal != goal else "yes" if median < goal else "NO"
            print(f"{name:<58} {median:>10.1f} {worst:>9.1f} {goal:>8.0f}  {ok}")
    if args.only in (None, "replay"):
        print_replay(replay_rows(args.baseline or None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
