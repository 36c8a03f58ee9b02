"""Probe performance: probe code time per sample through the fake NVML, and `linkscope probe --json` as a process.

Goals (issue 3): an 8-GPU machine probed through the fake NVML in at most 50 ms of probe code
(fake sysfs tree included, fake NVML's own work included), and `linkscope probe --json` as a
whole process on this machine in at most 0.5 s. Run: `python benchmarks/bench_probe.py`.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from linkscope.probes.capabilities import SoftwareFacts  # noqa: E402
from linkscope.probes.host import probe_host, run_nvml  # noqa: E402
from linkscope.probes.sysfs import read_sysfs  # noqa: E402
from linkscope.topo.samples import load_sample, sample_names  # noqa: E402
from support.fakes import FakeNvml, build_sysfs  # noqa: E402

REPEATS = 15
PROBE_GOAL_MS = 50.0
PROCESS_GOAL_S = 0.5


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def bench_sample(name: str, root: Path) -> tuple[int, int, float, float, float]:
    """(GPUs, NVML calls, NVML ms, sysfs ms, whole probe_host ms) for one sample, medians of REPEATS runs."""
    sample = load_sample(name)
    tree = build_sysfs(root / name, sample.host)
    nvml_s, sysfs_s, total_s = [], [], []
    calls = 0
    for _ in range(REPEATS):
        fake = FakeNvml.from_snapshot(sample)
        started = time.perf_counter()
        run_nvml(fake, 5.0)
        nvml_s.append(time.perf_counter() - started)
        calls = fake.total_calls
        started = time.perf_counter()
        read_sysfs(tree)
        sysfs_s.append(time.perf_counter() - started)
        fake = FakeNvml.from_snapshot(sample)
        started = time.perf_counter()
        probe_host(nvml=fake, sysfs_root=str(tree), hostname=name, software=SoftwareFacts())
        total_s.append(time.perf_counter() - started)
    return len(sample.host.gpus), calls, _median_ms(nvml_s), _median_ms(sysfs_s), _median_ms(total_s)


def bench_process(runs: int = 5) -> tuple[float, float, str]:
    """Median wall and CPU (user + system) seconds of `linkscope probe --json` as a fresh process, and the command.

    The CPU time does not grow when other work loads the machine; the wall time does.
    """
    script = shutil.which("linkscope")
    command = [script, "probe", "--json"] if script else [sys.executable, "-m", "linkscope", "probe", "--json"]
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if result.returncode != 0:
            raise SystemExit(f"`{' '.join(command)}` failed ({result.returncode}): {result.stderr.strip()[-300:]}")
    shown = " ".join(Path(command[0]).name if i == 0 else part for i, part in enumerate(command))
    return statistics.median(wall), statistics.median(cpu), shown


def main() -> int:
    print(f"probe_host() through the fake NVML + fake sysfs, median of {REPEATS} runs")
    print(f"{'sample':<22} {'GPUs':>4} {'NVML calls':>10} {'NVML ms':>8} {'sysfs ms':>8} {'probe ms':>8}  goal")
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        for name in sample_names():
            gpus, calls, nvml_ms, sysfs_ms, total_ms = bench_sample(name, Path(scratch))
            verdict = ""
            if gpus == 8:
                ok = total_ms <= PROBE_GOAL_MS
                failed |= not ok
                verdict = f"<= {PROBE_GOAL_MS:.0f} ms {'ok' if ok else 'MISSED'}"
            print(f"{name:<22} {gpus:>4} {calls:>10} {nvml_ms:>8.1f} {sysfs_ms:>8.1f} {total_ms:>8.1f}  {verdict}")
    wall_s, cpu_s, command = bench_process()
    ok = wall_s <= PROCESS_GOAL_S
    failed |= not ok
    print()
    print(f"`{command}` on this machine, median of 5 processes: {wall_s:.3f} s wall, {cpu_s:.3f} s CPU "
          f"(goal <= {PROCESS_GOAL_S} s wall: {'ok' if ok else 'MISSED'}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
