"""How fast the on-call commands are, whole process: `doctor` on an 8-GPU snapshot, `diff --odd-one-out`
over 1,024 host snapshots.

Goals: `linkscope doctor` on an 8-GPU snapshot carrying measurements and a 60-reading recording in
under 0.3 s; `linkscope diff --odd-one-out` over 1,024 host snapshot files in under 3 s. Prints a
table (with `show` as a reference row: on a busy machine every figure grows alike); exit status 1
when a goal is missed.

    python benchmarks/bench_doctor.py [--runs 5] [--hosts 1024]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from linkscope.topo.formats.results import read_measurements  # noqa: E402
from linkscope.topo.model.codec import snapshot_to_json  # noqa: E402
from linkscope.topo.model.recording import CounterSample, GpuCounters, LinkCounters, Recording  # noqa: E402
from linkscope.topo.model.snapshot import Snapshot  # noqa: E402
from linkscope.topo.samples import load_sample  # noqa: E402

DOCTOR_GOAL_S = 0.3
ODD_GOAL_S = 3.0
MEASUREMENTS = REPO / "tests/fixtures/real/p2p/h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"


def doctor_snapshot() -> Snapshot:
    """The degraded DGX H100 with real H100 peer-copy measurements and a 60 s recording at 1 s."""
    sample = load_sample("dgx-h100-degraded")
    measurements = read_measurements(MEASUREMENTS.read_text(), str(MEASUREMENTS))
    samples = tuple(
        CounterSample(float(t), tuple(
            GpuCounters(index, 120.0, 118.0, tuple(LinkCounters(link, 6.6, 6.5) for link in range(18)),
                        (("crc_flit", 0), ("crc_data", 0), ("replay", t if index == 3 else 0), ("recovery", 0)),
                        1.5, 1.4, 5, 8 if index == 3 else 16, 1980, 2619)
            for index in range(8)))
        for t in range(60))
    recording = Recording(sample.host.hostname, "2026-11-23T21:00:00+00:00", 1.0, samples)
    return dataclasses.replace(sample, measurements=measurements, recording=recording)


def host_files(directory: Path, count: int) -> list[str]:
    """`count` DGX H100 host snapshots, one of them degraded, as separate files."""
    healthy, degraded = load_sample("dgx-h100"), load_sample("dgx-h100-degraded")
    paths = []
    for number in range(count):
        base = degraded if number == count // 3 else healthy
        host = dataclasses.replace(base.host, hostname=f"gpu-node-{number:04d}")
        path = directory / f"gpu-node-{number:04d}.json"
        path.write_text(snapshot_to_json(dataclasses.replace(base, hosts=(host,), source="probe"), indent=None))
        paths.append(str(path))
    return paths


def process_seconds(argv: list[str], runs: int) -> list[float]:
    """Wall times of `python -m linkscope ARGV` (exit 0 or 1 both count as done), after one warm-up run."""
    command = [sys.executable, "-m", "linkscope", *argv]
    times = []
    for run in range(runs + 1):
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, cwd=REPO)
        if result.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv[:3])} failed: {result.stderr.decode()[-300:]}")
        if run:
            times.append(time.perf_counter() - start)
    return times


def main() -> int:
    """Run both cases and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=1024)
    args = parser.parse_args()
    rows: list[tuple[str, list[float], float | None]] = []
    with tempfile.TemporaryDirectory(prefix="linkscope-bench-doctor-") as tmp:
        directory = Path(tmp)
        times = process_seconds(["show", "sample:dgx-h100", "--json"], args.runs)
        rows.append(("reference: show sample:dgx-h100 --json (no goal here)", times, None))
        snapshot_path = directory / "box.json"
        snapshot_path.write_text(snapshot_to_json(doctor_snapshot()))
        times = process_seconds(["doctor", str(snapshot_path), "--json"], args.runs)
        rows.append(("doctor, 8 GPUs + measurements + recording (--json)", times, DOCTOR_GOAL_S))
        times = process_seconds(["doctor", str(snapshot_path)], args.runs)
        rows.append(("doctor, 8 GPUs + measurements + recording (rich)", times, DOCTOR_GOAL_S))
        hosts = directory / "hosts"
        hosts.mkdir()
        paths = host_files(hosts, args.hosts)
        times = process_seconds(["diff", "--odd-one-out", *paths, "--json"], max(1, args.runs // 2))
        rows.append((f"diff --odd-one-out, {args.hosts:,} host files (--json)", times, ODD_GOAL_S))
    missed = False
    print(f"{'case':56} {'median s':>9} {'max s':>7} {'goal s':>7}  result")
    for name, times, goal in rows:
        median = statistics.median(times)
        if goal is None:
            print(f"{name:56} {median:9.3f} {max(times):7.3f} {'-':>7}  -")
            continue
        ok = median < goal
        missed |= not ok
        print(f"{name:56} {median:9.3f} {max(times):7.3f} {goal:7.1f}  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
