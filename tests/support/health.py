"""Helpers for the health tests: sample machines with one thing changed, and recordings made by hand."""

from __future__ import annotations

import dataclasses
from typing import Any

from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.rules import run_health
from linkscope.topo.model.host import Gpu, Host
from linkscope.topo.model.recording import CounterSample, GpuCounters, Recording
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample


def with_host(snapshot: Snapshot, **changes: Any) -> Snapshot:
    """`snapshot` with its first host's fields replaced."""
    return dataclasses.replace(snapshot, hosts=(dataclasses.replace(snapshot.host, **changes), *snapshot.hosts[1:]))


def with_gpu(snapshot: Snapshot, index: int, **changes: Any) -> Snapshot:
    """`snapshot` with GPU `index` of its first host changed."""
    gpus = tuple(dataclasses.replace(gpu, **changes) if gpu.index == index else gpu for gpu in snapshot.host.gpus)
    return with_host(snapshot, gpus=gpus)


def with_capabilities(snapshot: Snapshot, **changes: Any) -> Snapshot:
    """`snapshot` with its first host's capabilities changed."""
    return with_host(snapshot, capabilities=dataclasses.replace(snapshot.host.capabilities, **changes))


def recording_of(host: Host, readings: list[dict[int, dict[str, Any]]], interval_s: float = 1.0) -> Recording:
    """A recording of `host`: per reading, per GPU index, the GpuCounters fields to set (others default)."""
    samples = []
    for number, per_gpu in enumerate(readings):
        gpus = tuple(GpuCounters(index=gpu.index, **per_gpu.get(gpu.index, {})) for gpu in host.gpus)
        samples.append(CounterSample(number * interval_s, gpus))
    return Recording(host.hostname, "2026-11-23T21:00:00+00:00", interval_s, tuple(samples))


def codes(findings: tuple[HealthFinding, ...]) -> list[str]:
    """The codes of `findings`, in order."""
    return [finding.code for finding in findings]


def health(snapshot: Snapshot | str, **context: Any) -> tuple[HealthFinding, ...]:
    """Every health finding of `snapshot` (or sample name) with the given context fields."""
    loaded = load_sample(snapshot) if isinstance(snapshot, str) else snapshot
    return run_health(HealthContext(loaded, **context))


def one(findings: tuple[HealthFinding, ...], code: str) -> HealthFinding:
    """The single finding with `code`."""
    matching = [finding for finding in findings if finding.code == code]
    assert len(matching) == 1, codes(findings)
    return matching[0]


def gpu(snapshot: Snapshot, index: int) -> Gpu:
    """GPU `index` of the first host."""
    return next(g for g in snapshot.host.gpus if g.index == index)
