"""How fast clusters are: merging 1,024 host snapshots, collecting 4 loopback "nodes", the Ranks map of
1,024 hosts x 8 GPUs.

Run: `python benchmarks/bench_cluster.py [merge] [codec] [collect] [ranks] [--baseline main] [--runs 2]` (all
when none is named); `codec` times, inside one process, decoding the 1,024 files and writing the cluster the Python
way and the typed way. Goals: merge < 2 s CPU; collect overhead beyond the probe < 1 s; rank map update < 100 ms (median
judged). `merge` runs the code before a change (a git revision, default main) and after it (this working tree)
in one run, on the same files, beside its floor: a plain loop that `json.loads` every file and writes their hosts
joined with `json.dumps`, rebuilding and checking nothing; it prints the ratio after / before of the CPU time and
whether the two cluster files are byte for byte the same. Exit status 1 when merge misses its goal or the files differ.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
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


MERGE_GOAL_S = 2.0
JOIN_FLOOR = ("import json, sys\n"
              "hosts = [host for path in sys.argv[2:] for host in json.loads(open(path).read())['hosts']]\n"
              "open(sys.argv[1], 'w').write(json.dumps({'hosts': hosts, 'source': 'merge'}))")
"""The floor under merge: the files' hosts joined as plain JSON, nothing rebuilt or checked."""


def merge_table(baseline: str, runs: int) -> bool:
    """Whole `linkscope merge` processes on 1,024 host files, before and after, beside the floor: print a table
    (median wall and CPU seconds); True when the goal is met and both wrote the same bytes."""
    from baseline import child_run, env_for, package_tree, revision_name

    template = load_sample("dgx-h100")
    with tempfile.TemporaryDirectory(prefix="linkscope-bench-merge-") as folder:
        files = []
        for number in range(HOSTS):
            host = dataclasses.replace(template.host, hostname=f"gpu{number:04d}")
            path = Path(folder) / f"host-{number:04d}.json"
            path.write_text(snapshot_to_json(dataclasses.replace(template, hosts=(host,))))
            files.append(str(path))
        tree = package_tree(baseline, Path(folder) / "before")
        outputs = {name: str(Path(folder) / f"{name}.json") for name in ("floor", "before", "after")}
        commands = {
            "floor": ([sys.executable, "-c", JOIN_FLOOR, outputs["floor"], *files], None, None),
            "before": ([sys.executable, "-m", "linkscope", "merge", *files, "-o", outputs["before"]], env_for(tree),
                       str(tree)),
            "after": ([sys.executable, "-m", "linkscope", "merge", *files, "-o", outputs["after"]], None, None),
        }
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):  # interleaved, so a change of load touches all three alike
            for name, (command, env, cwd) in commands.items():
                wall_s, cpu_s, _, status, _ = child_run(command, env, cwd)
                if status != 0:
                    raise SystemExit(f"merge {name} failed with exit status {status}")
                measured[name].append((wall_s, cpu_s))
        same = Path(outputs["before"]).read_bytes() == Path(outputs["after"]).read_bytes()
    median = {name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
              for name, values in measured.items()}
    print(f"merge of {HOSTS} DGX H100 host files; machine: {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; before = {revision_name(baseline)}, after = this working tree; median of {runs}")
    print(f"{'run':52} {'wall s':>7} {'CPU s':>7}  goal")
    labels = {"floor": "floor: json.loads every file, join, json.dumps", "before": "linkscope merge, before",
              "after": "linkscope merge, after"}
    for name, label in labels.items():
        goal = f"< {MERGE_GOAL_S:.0f} s CPU" if name == "after" else ""
        print(f"{label:52} {median[name][0]:7.2f} {median[name][1]:7.2f}  {goal}")
    print(f"after / before: {median['after'][1] / median['before'][1]:.2f} of the CPU time, "
          f"{median['after'][0] / median['before'][0]:.2f} of the wall time; cluster files "
          f"{'identical' if same else 'DIFFER'}")
    return same and median["after"][1] < MERGE_GOAL_S


def codec_table(runs: int) -> None:
    """In one process, the 1,024 host files' JSON decoded and the cluster written, the Python way (`json.loads`
    and the model's generic decoder, `json_text`) against the typed way (msgspec), beside `json.loads` alone:
    print a table of median CPU seconds."""
    from linkscope.topo.common.collector import collector_paused
    from linkscope.topo.common.jsonio import json_text
    from linkscope.topo.machine.cluster import combine_hosts
    from linkscope.topo.model.codec import from_jsonable, to_jsonable
    from linkscope.topo.model.typed import decode_snapshot, snapshot_text
    from linkscope.topo.model.validate import validate_snapshot

    template = load_sample("dgx-h100")
    texts = [snapshot_to_json(dataclasses.replace(template, hosts=(dataclasses.replace(template.host,
                                                                                       hostname=f"gpu{n:04d}"),)))
             for n in range(HOSTS)]
    cluster = combine_hosts([decode_snapshot(text) or template for text in texts], "merge").snapshot

    def generic() -> None:
        for text in texts:
            validate_snapshot(from_jsonable(Snapshot, json.loads(text)))

    def typed() -> None:
        for text in texts:
            snapshot = decode_snapshot(text)
            assert snapshot is not None
            validate_snapshot(snapshot)

    cases = {
        "floor: json.loads of every file": lambda: [json.loads(text) for text in texts],
        "decode + check, Python (json.loads, generic decoder)": generic,
        "decode + check, typed (msgspec)": typed,
        "write the cluster, Python (to_jsonable, json_text)": lambda: json_text(to_jsonable(cluster), indent=None),
        "write the cluster, typed (msgspec)": lambda: snapshot_text(cluster, None),
    }
    print(f"snapshot codec on {HOSTS} host files in one process (collector paused, as merge runs); load average "
          f"{os.getloadavg()[0]:.1f}; median of {runs}")
    print(f"{'run':56} {'CPU s':>7}")
    for name, case in cases.items():
        seconds = []
        for _ in range(runs):
            with collector_paused():
                start = time.process_time()
                case()
                seconds.append(time.process_time() - start)
        print(f"{name:56} {statistics.median(seconds):7.2f}")


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
    from bench_tui import FrameClock, handled_checks, timed_edit

    from linkscope.tui.app import build_app
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
        with handled_checks() as handled:
            for value in ["4", "8"] * 3:
                shown_ms, update_ms = await timed_edit(app, clock, handled, "#size-tp", value)
                rows.append((f"edit tp on {HOSTS} hosts: keystroke -> new map on screen", shown_ms, float("nan")))
                rows.append((f"  of which map + findings update ({HOSTS * 8} ranks)", update_ms, float("nan")))
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
    """Run the chosen measurements: merge's own table, then one table of the others (median and max per row)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("parts", nargs="*", metavar="merge|codec|collect|ranks")
    parser.add_argument("--baseline", default="main", help="git revision measured as merge's `before` (default main)")
    parser.add_argument("--runs", type=int, default=REPEATS, help="merge runs of each kind (median shown)")
    args = parser.parse_args(argv)
    parts = {"merge", "codec", "collect", "ranks"}
    wanted = set(args.parts) or parts
    if not wanted <= parts:
        parser.error(f"unknown part: {', '.join(sorted(wanted - parts))}")
    met = True
    if "merge" in wanted:
        met = merge_table(args.baseline, args.runs)
    if "codec" in wanted:
        codec_table(args.runs)
    rows: list[tuple[str, float, float]] = []
    if "collect" in wanted:
        rows += collect_rows()
    if "ranks" in wanted:
        rows += asyncio.run(ranks_rows())
    if not rows:
        return 0 if met else 1
    grouped: dict[str, list[tuple[float, float]]] = {}
    for name, wall, cpu in rows:
        grouped.setdefault(name, []).append((wall, cpu))
    print(f"{'measurement':<56} {'median ms':>10} {'max ms':>9} {'CPU ms':>8}")
    for name, values in grouped.items():
        walls = [wall for wall, _ in values]
        cpus = [cpu for _, cpu in values if cpu == cpu]
        cpu_text = f"{statistics.median(cpus):>8.0f}" if cpus else f"{'-':>8}"
        print(f"{name:<56} {statistics.median(walls):>10.1f} {max(walls):>9.1f} {cpu_text}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
