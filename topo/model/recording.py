"""Live counters of one host read at a fixed interval (`linkscope record`), replayed as recorded.
"""

from __future__ import annotations

from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import Gap


@frozen
class LinkCounters:
    """Traffic on one NVLink over one recording interval (GB/s)."""

    link: int
    tx_gbps: float | None = None
    rx_gbps: float | None = None


@frozen
class GpuCounters:
    """One GPU's live counters at one moment of a recording (rates in GB/s over the interval before it)."""

    index: int
    """NVML index."""
    nvlink_tx_gbps: float | None = None
    nvlink_rx_gbps: float | None = None
    links: tuple[LinkCounters, ...] = ()
    nvlink_errors: tuple[tuple[str, int], ...] = ()
    """Cumulative NVLink error totals by kind (`crc_flit`, `crc_data`, `replay`, `recovery`)."""
    pcie_tx_gbps: float | None = None
    pcie_rx_gbps: float | None = None
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None


@frozen
class CounterSample:
    """Every GPU's counters at one moment of a recording."""

    t_s: float
    """Seconds since the recording's first reading."""
    gpus: tuple[GpuCounters, ...] = ()


@frozen
class Recording:
    """Live counters of one host read at a fixed interval (`linkscope record`): real data, replayed as recorded."""

    hostname: str
    started: str | None = None
    """ISO 8601 time of the first reading."""
    interval_s: float = 1.0
    samples: tuple[CounterSample, ...] = ()
    gaps: tuple[Gap, ...] = ()
    """What could not be read while recording (first occurrence of each)."""

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last reading."""
        return self.samples[-1].t_s - self.samples[0].t_s if self.samples else 0.0
