"""How many CPUs are idle now: what decides whether `trace` starts worker processes."""

from __future__ import annotations

import pytest

import linkscope.probes.cpus as cpus_module


@pytest.mark.parametrize(("busy_percent", "usable", "idle"), [
    ([3.0, 1.0], [0, 1], 2),                  # idle, whatever the load average remembers
    ([100.0, 4.0], [0, 1], 1),                # another process on one CPU
    ([100.0, 100.0], [0, 1], 1),              # all busy: one, this process
    ([25.0] * 8, list(range(8)), 6),
    ([100.0] * 60 + [0.0] * 4, [60, 61, 62, 63], 4),  # an affinity mask of 4 idle CPUs on a busy machine
])
def test_idle_cpus_are_those_idle_now(busy_percent: list[float], usable: list[int], idle: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Trace workers start on the CPUs this process may use that are idle at the moment (sampled), not on what the
    last minute's load average says."""
    import psutil

    sampled: list[tuple[float | None, bool]] = []

    def cpu_percent(interval: float | None = None, percpu: bool = False) -> list[float]:
        sampled.append((interval, percpu))
        return busy_percent

    monkeypatch.setattr(psutil, "cpu_percent", cpu_percent)
    monkeypatch.setattr(cpus_module, "usable_cpu_ids", lambda: usable)
    monkeypatch.setattr(cpus_module.os, "getloadavg", lambda: (9.0, 9.0, 9.0), raising=False)
    assert cpus_module.idle_cpus() == idle
    assert sampled == [(cpus_module.BUSY_SAMPLE_S, True)]
