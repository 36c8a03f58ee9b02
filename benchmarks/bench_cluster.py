"""How fast clusters are: merging 1,024 host snapshots, collecting 4 loopback "nodes", the Ranks map of
1,024 hosts x 8 GPUs.

Run: `python benchmarks/bench_cluster.py [merge] [collect] [ranks]` (all three when none is named).
Goals: merge < 2 s; collect overhead beyond the probe < 1 s; rank map update < 100 ms (median judged).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from linkscope.topo.model.codec import snapshot_to_json  # noqa: E402
from linkscope.topo.model.snapshot import Snapshot  # noqa: E402
from linkscope.topo.samples import load_sample  # noqa: E402

HOSTS = 1024
REPEATS = 2


def cluster_of(count: int) -> Snapshot:
    """`count` DGX H100 hosts with distinct names (each its own Host object, as a collected cluster has)."""
    template = load_sample("dgx-h100")
    return Snapshot(hosts=tuple(dataclasses.replace(template.host, hostname=f"gpu{n:04d}") for n in range(count)),
                    source="bench")


def merge_rows() -> list[tuple[str, float, float]]:
    """Whole `linkscope merge` process on 1,024 host files: wall and CPU seconds."""
    rows = []
    template = load_sample("dgx-h100")
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for number in range(HOSTS):
            host = dataclasses.replace(template.host, hostname=f"gpu{number:04d}")
            path = Path(folder) / f"host-{number:04d}.json"
            path.write_text(snapshot_to_json(dataclasses.replace(template, hosts=(host,))))
            files.append(str(path))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for _ in range(REPEATS):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "linkscope", "merge", *files, "-o", str(Path(folder) / "c.json")],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            rows.append((f"merge {HOSTS} host snapshots, whole process", wall * 1000, cpu * 1000))
    return rows


def collect_rows() -> list[tuple[str, float, float]]:
    """4 srun-style collect tasks on loopback with fake probes (a sample each): rank 0's own timings."""
    from support.cluster import finish, free_port, node_env

    rows = []
    for _ in range(REPEATS):
        port = free_port()
        with tempfile.TemporaryDirectory() as folder:
            tasks = []
            for rank in range(4):
                env = node_env(f"node{rank}", {"LINKSCOPE_COLLECT_FAKE": "sample:dgx-h100", "SLURM_PROCID": str(rank),
                                               "SLURM_NTASKS": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
                tasks.append(subprocess.Popen([sys.executable, "-m", "linkscope", "collect", "-o",
                                               str(Path(folder) / "c.json"), "--json"], env=env, cwd=ROOT,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            started = time.perf_counter()
            results = finish(tasks, 120)
            wall = time.perf_counter() - started
        timings = json.loads(results[0][1])["timings_s"]
        probe_ms = timings["probe"] * 1000
        rows.append(("collect 4 nodes: rendezvous (waits for the last process)", timings["rendezvous"] * 1000, float("nan")))
        rows.append(("collect 4 nodes: fake probe (a sample)", probe_ms, float("nan")))
        rows.append(("collect 4 nodes: gather + write (beyond the probe)", (timings["gather"] + timings["write"]) * 1000,
                     float("nan")))
        rows.append(("collect 4 nodes: whole run incl. python+torch start", wall * 1000, float("nan")))
    return rows


async def ranks_rows() -> list[tuple[str, float, float]]:
    """The Ranks tab on a 1,024-host cluster snapshot (8,192 ranks): edit tp, page down the map."""
    from bench_tui import FrameClock
    from textual.widgets import Input

    from linkscope.tui.app import build_app
    from linkscope.tui.messages import LayoutChecked
    from linkscope.tui.screenshots import wait_idle
    from linkscope.tui.tabs.ranks import RanksView
    from linkscope.tui.widgets.rank_map import RankMap

    rows = []
    app = build_app(snapshot=cluster_of(HOSTS), initial_tab="ranks")
    async with app.run_test(size=(120, 40)) as pilot:
        app.animation_level = "none"
        clock = FrameClock(app)
        await wait_idle(app)
        ranks = app.query_one(RanksView)
        assert ranks.report is not None and len(ranks.report.placement) == HOSTS * 8
        handled: list[tuple[float, float]] = []
        original = RanksView.on_layout_checked

        def measured(view: RanksView, message: LayoutChecked) -> None:
            started = time.perf_counter()
            original(view, message)
            handled.append((started, time.perf_counter()))

        RanksView.on_layout_checked = measured  # type: ignore[method-assign,assignment]
        try:
            for value in ["4", "8"] * 3:
                handled.clear()
                clock.frames.clear()
                started = time.perf_counter()
                app.query_one("#size-tp", Input).value = value
                await wait_idle(app)
                begin, end = handled[-1]
                rows.append((f"edit tp on {HOSTS} hosts: keystroke -> new map on screen",
                             (clock.first_after(end) - started) * 1000, float("nan")))
                rows.append((f"  of which map + findings update ({HOSTS * 8} ranks)", (end - begin) * 1000, float("nan")))
        finally:
            RanksView.on_layout_checked = original  # type: ignore[method-assign]
        rank_map = app.query_one(RankMap)
        rank_map.focus()
        await pilot.pause()

        async def scroll() -> None:
            await pilot.press("pagedown")
            await pilot.pause()

        shown, _ = await clock.timed(scroll)
        rows += [(f"rank map page down ({HOSTS} x 8): first frame", value, float("nan")) for value in shown]
    return rows


def main(argv: list[str]) -> int:
    """Run the chosen measurements and print one table (median and max per row)."""
    wanted = set(argv) or {"merge", "collect", "ranks"}
    rows: list[tuple[str, float, float]] = []
    if "merge" in wanted:
        rows += merge_rows()
    if "collect" in wanted:
        rows += collect_rows()
    if "ranks" in wanted:
        rows += asyncio.run(ranks_rows())
    grouped: dict[str, list[tuple[float, float]]] = {}
    for name, wall, cpu in rows:
        grouped.setdefault(name, []).append((wall, cpu))
    print(f"{'measurement':<56} {'median ms':>10} {'max ms':>9} {'CPU ms':>8}")
    for name, values in grouped.items():
        walls = [wall for wall, _ in values]
        cpus = [cpu for _, cpu in values if cpu == cpu]
        cpu_text = f"{statistics.median(cpus):>8.0f}" if cpus else f"{'-':>8}"
        print(f"{name:<56} {statistics.median(walls):>10.1f} {max(walls):>9.1f} {cpu_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
