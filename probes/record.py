"""`linkscope record`: the live counters of this machine read at a fixed interval into a Recording.

Rates, error totals and PCIe link state come from :class:`probes.live.LiveSampler` (one `read()`
per interval); SM and memory clocks from `nvmlDeviceGetClockInfo` (`nvidia-smi -q -d CLOCK`).
Nothing is set or reset. The recording goes into a snapshot of this machine, so `doctor` can judge
error-counter growth and PCIe generation under load, and the app's Monitor tab can replay it.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any, Protocol

from linkscope.probes.live import GpuLive, LinkRate, LiveReading
from linkscope.probes.nvml import NvmlQuery
from linkscope.topo.model.host import Gap, Host
from linkscope.topo.model.recording import CounterSample, GpuCounters, LinkCounters, Recording
from linkscope.topo.model.snapshot import Snapshot

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
"""`nvmlClockType_t`: SM and memory clock domains."""


class Sampler(Protocol):
    """What `record` needs of a live sampler (`probes.live.LiveSampler`)."""

    def read(self) -> LiveReading: ...

    def close(self) -> None: ...


class RecordUnavailable(Exception):
    """There are no live counters to record (no NVML, no GPU); the message says why."""


class ClockReader:
    """Current SM and memory clocks of every GPU, through the NVML wrapper; a failed call is a missing value."""

    def __init__(self, nvml: Any) -> None:
        self.query = NvmlQuery(nvml) if nvml is not None else None
        self._handles: dict[int, Any] = {}
        if self.query is None or (self.query("nvmlInit") is None and self.query.last_reason is not None):
            self.query = None
            return
        for index in range(int(self.query("nvmlDeviceGetCount") or 0)):
            handle = self.query("nvmlDeviceGetHandleByIndex", index, subject=f"gpu {index}", gpu=index)
            if handle is not None:
                self._handles[index] = handle

    def read(self, index: int) -> tuple[int | None, int | None]:
        """(SM MHz, memory MHz) of GPU `index`."""
        handle = self._handles.get(index)
        if self.query is None or handle is None:
            return None, None
        subject = f"gpu {index}"
        sm = self.query("nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM, subject=subject, gpu=index)
        memory = self.query("nvmlDeviceGetClockInfo", handle, NVML_CLOCK_MEM, subject=subject, gpu=index)
        return (int(sm) if sm is not None else None, int(memory) if memory is not None else None)

    def close(self) -> None:
        """Shut down this reader's NVML reference."""
        if self.query is not None:
            self.query("nvmlShutdown")
            self.query = None


def _counters(gpu: GpuLive, clocks: tuple[int | None, int | None]) -> GpuCounters:
    return GpuCounters(
        index=gpu.index,
        nvlink_tx_gbps=gpu.nvlink_tx_gbps,
        nvlink_rx_gbps=gpu.nvlink_rx_gbps,
        links=tuple(LinkCounters(rate.link, rate.tx_gbps, rate.rx_gbps) for rate in gpu.links),
        nvlink_errors=gpu.nvlink_errors,
        pcie_tx_gbps=gpu.pcie_tx_gbps,
        pcie_rx_gbps=gpu.pcie_rx_gbps,
        pcie_gen_current=gpu.pcie_gen_current,
        pcie_width_current=gpu.pcie_width_current,
        sm_clock_mhz=clocks[0],
        memory_clock_mhz=clocks[1],
    )


def record(
    sampler: Sampler,
    seconds: float,
    interval_s: float,
    hostname: str,
    *,
    clocks: ClockReader | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Recording, bool]:
    """Read `sampler` every `interval_s` for `seconds` (readings at 0, interval, 2*interval ...).

    Returns the recording and whether it was cut short by Ctrl-C (what was read by then is kept).
    `progress(readings, elapsed_s)` is called after each reading. Raises RecordUnavailable when the
    first reading has no counters.
    """
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    first = sampler.read()
    if not first.available:
        reasons = "; ".join(f"{gap.subject}: {gap.reason}" for gap in first.gaps) or "NVML did not start"
        raise RecordUnavailable(f"no live counters on this machine ({reasons})")
    readings = int(seconds / interval_s + 1e-9) + 1
    start_s = clock()
    samples = [_sample(first, first.timestamp_s, clocks)]
    gaps: dict[tuple[str, str], Gap] = {(gap.subject, gap.reason): gap for gap in first.gaps}
    interrupted = False
    if progress is not None:
        progress(1, 0.0)
    try:
        for number in range(1, readings):
            wait_s = start_s + number * interval_s - clock()
            if wait_s > 0:
                sleep(wait_s)
            reading = sampler.read()
            samples.append(_sample(reading, first.timestamp_s, clocks))
            for gap in reading.gaps:
                gaps.setdefault((gap.subject, gap.reason), gap)
            if progress is not None:
                progress(len(samples), clock() - start_s)
    except KeyboardInterrupt:
        interrupted = True
    return Recording(hostname, started, interval_s, tuple(samples), tuple(gaps.values())), interrupted


def _sample(reading: LiveReading, origin_s: float, clocks: ClockReader | None) -> CounterSample:
    return CounterSample(
        t_s=round(reading.timestamp_s - origin_s, 6),
        gpus=tuple(_counters(gpu, clocks.read(gpu.index) if clocks else (None, None)) for gpu in reading.gpus),
    )


def record_snapshot(
    nvml: Any,
    seconds: float,
    interval_s: float,
    *,
    sysfs_root: str = "/",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Snapshot, bool]:
    """This machine's snapshot carrying a recording of its counters (and whether Ctrl-C cut it short).

    `nvml` is the pynvml module (or a fake with its functions); None when it is not installed.
    """
    from linkscope.probes.host import probe_host
    from linkscope.probes.live import LiveSampler

    if nvml is None:
        raise RecordUnavailable("no live counters: the nvidia-ml-py package is not installed")
    snapshot = probe_host(nvml=nvml, sysfs_root=sysfs_root)
    sampler = LiveSampler(nvml, per_link=True, clock=clock)
    clocks = ClockReader(nvml)
    try:
        recording, interrupted = record(sampler, seconds, interval_s, snapshot.host.hostname, clocks=clocks,
                                        clock=clock, sleep=sleep, progress=progress)
    finally:
        clocks.close()
        sampler.close()
    return dataclasses.replace(snapshot, recording=recording), interrupted


def replay_readings(recording: Recording, host: Host | None = None) -> list[LiveReading]:
    """The recording as the live readings it was made from (for the Monitor tab), with error deltas
    between consecutive readings and the PCIe maxima `host` (the snapshot's) records."""
    maxima = {gpu.index: (gpu.pcie_gen_max, gpu.pcie_width_max) for gpu in host.gpus} if host is not None else {}
    readings: list[LiveReading] = []
    previous: dict[int, dict[str, int]] = {}
    for number, sample in enumerate(recording.samples):
        gpus = []
        for counters in sample.gpus:
            before = previous.get(counters.index)
            deltas = tuple((kind, total - before[kind]) for kind, total in counters.nvlink_errors
                           if before is not None and kind in before)
            previous[counters.index] = dict(counters.nvlink_errors)
            gen_max, width_max = maxima.get(counters.index, (None, None))
            gpus.append(GpuLive(
                index=counters.index,
                nvlink_tx_gbps=counters.nvlink_tx_gbps,
                nvlink_rx_gbps=counters.nvlink_rx_gbps,
                links=tuple(LinkRate(link.link, link.tx_gbps, link.rx_gbps) for link in counters.links),
                nvlink_errors=counters.nvlink_errors,
                nvlink_error_deltas=deltas,
                pcie_tx_gbps=counters.pcie_tx_gbps,
                pcie_rx_gbps=counters.pcie_rx_gbps,
                pcie_gen_current=counters.pcie_gen_current,
                pcie_gen_max=gen_max,
                pcie_width_current=counters.pcie_width_current,
                pcie_width_max=width_max,
            ))
        interval = sample.t_s - recording.samples[number - 1].t_s if number else None
        readings.append(LiveReading(sample.t_s, interval, tuple(gpus)))
    return readings
