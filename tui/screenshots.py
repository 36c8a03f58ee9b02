"""`python -m linkscope.tui.screenshots [DIR]`: write one SVG per tab of the app, made from the built-in samples.

The scenes here are also what the snapshot tests render, so the pictures in the README and the
tested screens are the same ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.text import say
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.samples import load_sample
from linkscope.tui.app import LinkscopeApp, build_app
from linkscope.tui.bench_adapter import gloo_plan
from linkscope.tui.local_services import LocalServices
from linkscope.tui.services import BenchPlan

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]

SCREENSHOT_SIZE = (120, 40)
"""Terminal size (columns, lines) of the screenshots."""


@frozen
class Scene:
    """One picture: a sample, the tab it opens on and the keys pressed before the shot."""

    name: str
    sample: str
    tab: str
    keys: tuple[str, ...] = ()
    """Keys to press in order; an entry starting with `#` focuses that widget instead."""
    description: str = ""
    measurements: str | None = None
    """Another tool's output (path from the repository root) recorded on this kind of machine, shown with it."""
    traces: tuple[str, ...] = ()
    """A job's profiler traces (paths from the repository root) for the Steps tab."""


SCENES: tuple[Scene, ...] = (
    Scene("links", "dgx1-v100", "links", ("right", "right"), "DGX-1 hybrid cube mesh: NV1/NV2 and SYS pairs"),
    Scene("topology", "dgx-a100", "topology", (), "DGX A100: NUMA nodes, PCIe switches, GPUs and NICs"),
    Scene(
        "ranks",
        "dgx1-v100",
        "ranks",
        ("#size-tp", "backspace", "2", "#rank-map", "right", "right"),
        "tp=2 on the DGX-1: slow-link findings and a better device order",
    ),
    Scene(
        "bench",
        "dgx-a100",
        "bench",
        (),
        "A sample's nccl-tests results with expected figures; what this machine can run (gloo on its CPUs) and what not",
        "tests/fixtures/real/nccl_tests/a100-8gpu-nvswitch-sendrecv-truncated.txt",
    ),
    Scene(
        "monitor",
        "dgx-h100-degraded",
        "monitor",
        (),
        "A sample has no live counters: the tab says so and shows the PCIe state it recorded (GPU 3 at x8)",
    ),
    Scene(
        "steps",
        "dgx-h100",
        "steps",
        (),
        "A job's profiler trace: time per step, exposed communication, collectives below their links' speed",
        traces=("tests/fixtures/real/traces/hta-2rank-nccl-allreduce-pg-ranks.json.gz",),
    ),
)
"""The screenshots, one per tab, in tab order."""


def scene_app(scene: Scene) -> LinkscopeApp:
    """The app of `scene`, with its sample already loaded (the real services)."""
    snapshot = load_sample(scene.sample)
    if scene.measurements is not None:
        path = REPOSITORY_ROOT / scene.measurements
        snapshot = dataclasses.replace(snapshot, measurements=read_measurements(path.read_text(), scene.measurements))
    traces = tuple(str(REPOSITORY_ROOT / trace) for trace in scene.traces)
    return build_app(snapshot=snapshot, initial_tab=scene.tab, trace_paths=traces, services=SceneServices())


class SceneServices(LocalServices):
    """The real services, except that the Bench tab is shown as on a machine without GPUs (gloo on two CPU
    processes) whatever machine draws the screenshots, so they and the snapshot tests come out the same."""

    def bench_plan(self) -> BenchPlan:
        """The plan of a machine with no GPU."""
        return gloo_plan(2, "NVML found no GPU")


async def wait_idle(app: LinkscopeApp) -> None:
    """Wait until no worker runs and the messages they posted have been handled (a handled result may
    start the next worker, so this repeats until quiet)."""
    pilot = Pilot(app)
    for _ in range(20):
        try:
            await asyncio.wait_for(app.workers.wait_for_complete(), timeout=60)
        except WorkerCancelled:  # an exclusive worker replaced by a newer one: wait for that one
            continue
        await pilot.wait_for_scheduled_animations()
        if all(worker.is_finished for worker in app.workers):
            await pilot.pause()  # the last refresh a finished worker's result asked for (a table's scrollbars)
            return


async def play(pilot: Pilot[None], scene: Scene) -> None:
    """Press the scene's keys, letting the app settle before and after."""
    app = pilot.app
    assert isinstance(app, LinkscopeApp)
    await wait_idle(app)
    for key in scene.keys:
        if key.startswith("#"):
            app.query_one(key).focus()
        else:
            await pilot.press(key)
        await wait_idle(app)


async def capture(scene: Scene, size: tuple[int, int] = SCREENSHOT_SIZE) -> str:
    """Render `scene` headless and return the SVG."""
    app = scene_app(scene)
    async with app.run_test(size=size) as pilot:
        await play(pilot, scene)
        return app.export_screenshot(title=f"linkscope - {scene.name} - sample:{scene.sample}")


def main(argv: list[str] | None = None) -> int:
    """Write `screenshots/<scene>.svg` (or into the directory given) for every scene."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    for scene in SCENES:
        path = folder / f"{scene.name}.svg"
        path.write_text(asyncio.run(capture(scene)), encoding="utf-8")
        say(f"{path}  {scene.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
