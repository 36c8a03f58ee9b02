"""Live counters for the Monitor screen: NVLink and PCIe traffic, NVLink errors, PCIe link state.

Usage (the app calls this from a worker thread, never the UI thread)::

    sampler = LiveSampler()              # or LiveSampler(fake_nvml) in tests
    first = sampler.read()               # rates are None on the first read (no interval yet)
    ...                                  # one second later
    reading = sampler.read()             # LiveReading: per GPU rates over the last interval
    sampler.close()

Each `read()` costs per GPU one batched `nvmlDeviceGetFieldValues` (NVLink TX/RX counters of
every active link plus the NVLink error totals), two PCIe link-state getters and, when
`with_pcie` is set, two `nvmlDeviceGetPcieThroughput` calls, which block about 20 ms each inside
the driver (so a read of 8 GPUs takes about a third of a second). Shell equivalents:
`nvidia-smi nvlink -gt d`, `nvidia-smi dmon -s t`, `nvidia-smi nvlink -e`.
Errors become gaps in the reading; nothing is ever set or reset.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes.nvml import FI_NVLINK_GET_STATE, MAX_NVLINKS, NvmlQuery, field_value, load_pynvml, nvlink_up
from topo.model import Gap

FI_NVLINK_TX_KIB = 138
"""`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`: cumulative payload KiB sent on a link (scope = link)."""
FI_NVLINK_RX_KIB = 139
"""`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX`: cumulative payload KiB received on a link."""
NVLINK_ERROR_FIELDS: tuple[tuple[str, int], ...] = (("crc_flit", 38), ("crc_data", 45), ("replay", 52), ("recovery", 59))
"""NVLink error totals over all links (`NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`)."""
PCIE_TX, PCIE_RX = 0, 1
"""`NVML_PCIE_UTIL_TX_BYTES` / `NVML_PCIE_UTIL_RX_BYTES` counters of `nvmlDeviceGetPcieThroughput` (KiB/s)."""


@dataclass(frozen=True)
class LinkRate:
    """Traffic on one NVLink over the last interval."""

    link: int
    tx_gbps: float | None
    rx_gbps: float | None


@dataclass(frozen=True)
class GpuLive:
    """One GPU's counters at one reading. Rates are GB/s (1e9 bytes/s); None when not known yet or not read."""

    index: int
    nvlink_tx_gbps: float | None = None
    """Sum over active links of payload sent per second."""
    nvlink_rx_gbps: float | None = None
    links: tuple[LinkRate, ...] = ()
    """Per-link rates; filled only when the sampler was made with `per_link=True`."""
    nvlink_errors: tuple[tuple[str, int], ...] = ()
    """Cumulative error totals by kind (`crc_flit`, `crc_data`, `replay`, `recovery`)."""
    nvlink_error_deltas: tuple[tuple[str, int], ...] = ()
    """New errors since the previous reading, by kind (empty on the first reading)."""
    pcie_tx_gbps: float | None = None
    pcie_rx_gbps: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None

    @property
    def pcie_downgraded(self) -> bool:
        """True when the PCIe link runs narrower than it can (slower generation alone is normal when idle)."""
        return (
            self.pcie_width_current is not None
            and self.pcie_width_max is not None
            and self.pcie_width_current < self.pcie_width_max
        )


@dataclass(frozen=True)
class LiveReading:
    """One sample of every GPU's live counters."""

    timestamp_s: float
    """Monotonic clock at the reading."""
    interval_s: float | None
    """Seconds since the previous reading; None on the first."""
    gpus: tuple[GpuLive, ...] = ()
    gaps: tuple[Gap, ...] = ()
    available: bool = True
    """False when NVML could not be started (then `gaps` says why and `gpus` is empty)."""


@dataclass
class _GpuState:
    handle: Any
    active_links: list[int]
    pcie_gen_max: int | None
    pcie_width_max: int | None
    last_kib: dict[tuple[int, int], int]
    last_errors: dict[str, int]


class LiveSampler:
    """Reads live counters from NVML (the real module or a fake with the same functions); not thread-safe.

    Construct it anywhere; the first `read()` starts NVML and finds each GPU's active links.
    """

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        per_link: bool = False,
        with_pcie: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._module = nvml if nvml is not None else load_pynvml()
        self.per_link = per_link
        self.with_pcie = with_pcie
        self._clock = clock
        self._query: NvmlQuery | None = None
        self._gpus: dict[int, _GpuState] = {}
        self._last_time: float | None = None
        self._start_gaps: tuple[Gap, ...] = ()
        self._started = False

    @property
    def calls(self) -> int:
        """NVML calls made so far."""
        return self._query.calls if self._query else 0

    def _start(self) -> bool:
        self._started = True
        if self._module is None:
            self._start_gaps = (Gap("import pynvml", "nvidia-ml-py is not installed"),)
            return False
        query = NvmlQuery(self._module)
        self._query = query
        if query("nvmlInit") is None and query.last_reason is not None:
            self._start_gaps = tuple(query.gaps)
            self._query = None
            return False
        count = query("nvmlDeviceGetCount")
        for index in range(int(count or 0)):
            handle = query("nvmlDeviceGetHandleByIndex", index, subject=f"gpu {index}", gpu=index)
            if handle is None:
                continue
            self._gpus[index] = _GpuState(
                handle=handle,
                active_links=self._active_links(query, index, handle),
                pcie_gen_max=query("nvmlDeviceGetMaxPcieLinkGeneration", handle, subject=f"gpu {index}", gpu=index),
                pcie_width_max=query("nvmlDeviceGetMaxPcieLinkWidth", handle, subject=f"gpu {index}", gpu=index),
                last_kib={},
                last_errors={},
            )
        self._start_gaps = tuple(query.gaps)
        query.gaps.clear()
        return True

    @staticmethod
    def _active_links(query: NvmlQuery, index: int, handle: Any) -> list[int]:
        fields = [(FI_NVLINK_GET_STATE, link) for link in range(MAX_NVLINKS)]
        values = query("nvmlDeviceGetFieldValues", handle, fields, subject=f"gpu {index}", gpu=index,
                       expected=("NotSupported",))
        states = [field_value(value) for value in values] if values is not None else []
        if any(state is not None for state in states):
            return [link for (_, link), state in zip(fields, states, strict=False) if nvlink_up(state)]
        active = []
        for link in range(MAX_NVLINKS):
            state = query("nvmlDeviceGetNvLinkState", handle, link, subject=f"gpu {index}, link {link}", gpu=index,
                          expected=("NotSupported", "InvalidArgument"))
            if state is None:
                break
            if nvlink_up(state):
                active.append(link)
        return active

    def read(self) -> LiveReading:
        """Sample every GPU now; rates cover the time since the previous `read()`."""
        if not self._started and not self._start():
            return LiveReading(self._clock(), None, (), self._start_gaps, available=False)
        if self._query is None:
            return LiveReading(self._clock(), None, (), self._start_gaps, available=False)
        query = self._query
        now = self._clock()
        interval = now - self._last_time if self._last_time is not None else None
        gpus = tuple(self._read_gpu(query, index, state, interval) for index, state in sorted(self._gpus.items()))
        gaps = (*self._start_gaps, *query.gaps)
        self._start_gaps = ()
        query.gaps.clear()
        self._last_time = now
        return LiveReading(now, interval, gpus, gaps)

    def _read_gpu(self, query: NvmlQuery, index: int, state: _GpuState, interval: float | None) -> GpuLive:
        subject = f"gpu {index}"
        fields = [(field_id, link) for link in state.active_links for field_id in (FI_NVLINK_TX_KIB, FI_NVLINK_RX_KIB)]
        fields += [(field_id, 0) for _, field_id in NVLINK_ERROR_FIELDS] if state.active_links else []
        raw: dict[tuple[int, int], int | float | None] = {}
        if fields:
            values = query("nvmlDeviceGetFieldValues", state.handle, fields, subject=subject, gpu=index)
            if values is not None:
                raw = {key: field_value(value) for key, value in zip(fields, values, strict=False)}
        links = []
        tx_total = rx_total = 0.0
        rates_known = interval is not None and interval > 0 and bool(raw)
        for link in state.active_links:
            rates: list[float | None] = []
            for field_id in (FI_NVLINK_TX_KIB, FI_NVLINK_RX_KIB):
                value = raw.get((field_id, link))
                before = state.last_kib.get((field_id, link))
                rate = None
                if value is not None and before is not None and interval and value >= before:
                    rate = (value - before) * 1024 / interval / 1e9
                if value is not None:
                    state.last_kib[(field_id, link)] = int(value)
                rates.append(rate)
            if rates[0] is None or rates[1] is None:
                rates_known = False
            tx_total += rates[0] or 0.0
            rx_total += rates[1] or 0.0
            links.append(LinkRate(link, rates[0], rates[1]))
        errors = tuple((name, int(v)) for name, field_id in NVLINK_ERROR_FIELDS if (v := raw.get((field_id, 0))) is not None)
        deltas = tuple((name, count - state.last_errors[name]) for name, count in errors if name in state.last_errors)
        state.last_errors.update(dict(errors))
        pcie_tx = pcie_rx = None
        if self.with_pcie:
            tx = query("nvmlDeviceGetPcieThroughput", state.handle, PCIE_TX, subject=subject, gpu=index)
            rx = query("nvmlDeviceGetPcieThroughput", state.handle, PCIE_RX, subject=subject, gpu=index)
            pcie_tx = int(tx) * 1024 / 1e9 if tx is not None else None
            pcie_rx = int(rx) * 1024 / 1e9 if rx is not None else None
        return GpuLive(
            index=index,
            nvlink_tx_gbps=tx_total if rates_known and state.active_links else None,
            nvlink_rx_gbps=rx_total if rates_known and state.active_links else None,
            links=tuple(links) if self.per_link else (),
            nvlink_errors=errors,
            nvlink_error_deltas=deltas,
            pcie_tx_gbps=pcie_tx,
            pcie_rx_gbps=pcie_rx,
            pcie_gen_current=query("nvmlDeviceGetCurrPcieLinkGeneration", state.handle, subject=subject, gpu=index),
            pcie_gen_max=state.pcie_gen_max,
            pcie_width_current=query("nvmlDeviceGetCurrPcieLinkWidth", state.handle, subject=subject, gpu=index),
            pcie_width_max=state.pcie_width_max,
        )

    def close(self) -> None:
        """Shut NVML down (the sampler can be read again: it starts over)."""
        if self._query is not None:
            self._query("nvmlShutdown")
        self._query = None
        self._gpus.clear()
        self._started = False
        self._last_time = None

    def __enter__(self) -> LiveSampler:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
