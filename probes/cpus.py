"""How many of this machine's CPUs a command may run on, and how many of those are idle now."""

from __future__ import annotations

import os

BUSY_SAMPLE_S = 0.1
"""How long :func:`idle_cpus` watches the CPUs before answering."""


def usable_cpu_ids() -> list[int]:
    """The CPUs this process may run on (its affinity mask where the OS has one, else every CPU)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def usable_cpus() -> int:
    """How many CPUs this process may run on."""
    return max(1, len(usable_cpu_ids()))


def idle_cpus() -> int:
    """Of the CPUs this process may run on, how many the rest of the machine leaves idle now: each one's busy
    share over BUSY_SAMPLE_S (psutil), at least 1. Not the load average, which remembers a minute of work already
    finished: after any command that ran a few seconds it kept 2 idle CPUs from starting trace workers (64 files of
    20 MB took 29-37 s in one process where two workers take half the wall time)."""
    import psutil  # only where a command weighs starting workers

    busy_percent = psutil.cpu_percent(interval=BUSY_SAMPLE_S, percpu=True)
    usable = usable_cpu_ids()
    busy_cpus = sum(busy_percent[cpu] for cpu in usable if cpu < len(busy_percent)) / 100
    return max(1, int(len(usable) - busy_cpus + 0.5))
