"""Live counters for the Monitor tab: NVLink and PCIe traffic, NVLink errors, PCIe link state.

Usage (the app calls this from a worker thread, never the UI thread)::

    sampler = LiveSampler()              # or LiveSampler(fake_nvml) in tests
    first = sampler.read()               # rates are None on the first read (no interval yet)
    ...                                  # one second later
    reading = sampler.read()             # LiveReading: per GPU rates over the last interval
    sampler.close()

Each `read()` costs per GPU one batched `nvmlDeviceGetFieldValues` (the GPU's NVLink TX/RX totals,
read with scopeId UINT_MAX, the aggregate over all links; per-link counters only for the per-link
view; and the NVLink error counters), two PCIe link-state getters and, when
`with_pcie` is set, two `nvmlDeviceGetPcieThroughput` calls, which block about 20 ms each inside
the driver (so a read of 8 GPUs takes about a third of a second). Shell equivalents:
`nvidia-smi nvlink -gt d`, `nvidia-smi dmon -s t`, `nvidia-smi nvlink -e`.
Errors become gaps in the reading; nothing is ever set or reset.

Drivers differ in what they answer, and each difference is handled here: some report the GPU-wide
total on every per-link counter (then per-link rates are unknown, and the total is not multiplied
by the link count); Hopper and Blackwell drivers may refuse the legacy error totals, so the newer
per-link error fields and the NVLink5 count fields are read first, the legacy totals after, and a
GPU for which none answers has unknown errors (a gap), never zero errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linkscope.probes.nvlink import FI_NVLINK_GET_STATE, FI_NVLINK_LINK_COUNT, NVML_NVLINK_MAX_LINKS, nvlink_up
from linkscope.probes.nvml import load_pynvml
from linkscope.probes.nvml_query import NvmlQuery, field_value
from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import Gap

FI_NVLINK_TX_KIB = 138
"""`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`: cumulative payload KiB sent on a link (scope = link)."""
FI_NVLINK_RX_KIB = 139
"""`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX`: cumulative payload KiB received on a link."""
SCOPE_ALL_LINKS = 0xFFFFFFFF
"""scopeId UINT_MAX: a throughput field's aggregate over every link of the GPU."""
NVLINK_ERROR_FIELDS: tuple[tuple[str, int], ...] = (("crc_flit", 38), ("crc_data", 45), ("replay", 52), ("recovery", 59))
"""Legacy NVLink error totals over all links (`NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`, scope 0)."""
NVLINK_LINK_ERROR_FIELDS: tuple[tuple[str, int], ...] = (("replay", 161), ("recovery", 162), ("crc", 163))
"""Per-link error counters (`NVML_FI_DEV_NVLINK_ERROR_DL_*`, scope = link), summed over active links."""
NVLINK5_ERROR_FIELDS: tuple[tuple[str, int], ...] = (
    ("rcv_errors", 208), ("xmit_discards", 212), ("recovery_failed", 214), ("effective_errors", 219),
    ("symbol_errors", 221),
)
"""NVLink5 per-link counts (`NVML_FI_DEV_NVLINK_COUNT_*`, scope = link), summed over active links."""
PCIE_TX, PCIE_RX = 0, 1
"""`NVML_PCIE_UTIL_TX_BYTES` / `NVML_PCIE_UTIL_RX_BYTES` counters of `nvmlDeviceGetPcieThroughput` (KiB/s)."""


@frozen
class LinkRate:
    """Traffic on one NVLink over the last interval."""

    link: int
    tx_gbps: float | None
    rx_gbps: float | None


@frozen
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


@frozen
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
    aggregate: bool | None = None
    """Whether the TX/RX counters answer scopeId UINT_MAX (None until the first reading)."""
    error_fields: tuple[tuple[str, int, bool], ...] | None = None
    """(kind, field id, per link) of the error counters this GPU answers; None until known."""
    reported: set[str] = field(default_factory=set)
    """Quirks already reported as gaps for this GPU (each once)."""


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
        fields = [(FI_NVLINK_LINK_COUNT, 0), *((FI_NVLINK_GET_STATE, link) for link in range(NVML_NVLINK_MAX_LINKS))]
        values = query("nvmlDeviceGetFieldValues", handle, fields, subject=f"gpu {index}", gpu=index,
                       expected=("NotSupported",))
        answers = [field_value(value) for value in values] if values is not None else []
        count = int(answers[0]) if answers and answers[0] is not None else NVML_NVLINK_MAX_LINKS
        states = answers[1 : 1 + count]
        if any(state is not None for state in states):
            return [link for link, state in enumerate(states) if nvlink_up(state)]
        active = []
        for link in range(NVML_NVLINK_MAX_LINKS):
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

    def _fields(self, state: _GpuState) -> list[tuple[int, int]]:
        """The counters one reading asks for (see the module docstring)."""
        links = state.active_links
        if not links:
            return []
        fields: list[tuple[int, int]] = []
        if state.aggregate is not False:
            fields += [(FI_NVLINK_TX_KIB, SCOPE_ALL_LINKS), (FI_NVLINK_RX_KIB, SCOPE_ALL_LINKS)]
        if self.per_link or state.aggregate is not True:
            fields += [(field_id, link) for link in links for field_id in (FI_NVLINK_TX_KIB, FI_NVLINK_RX_KIB)]
        candidates = state.error_fields
        if candidates is None:
            candidates = (*((kind, field_id, True) for kind, field_id in (*NVLINK_LINK_ERROR_FIELDS, *NVLINK5_ERROR_FIELDS)),
                          *((kind, field_id, False) for kind, field_id in NVLINK_ERROR_FIELDS))
        for _, field_id, per_link in candidates:
            fields += [(field_id, link) for link in links] if per_link else [(field_id, 0)]
        return fields

    def _gap_once(self, query: NvmlQuery, state: _GpuState, key: str, gap: Gap) -> None:
        if key not in state.reported:
            state.reported.add(key)
            query.gaps.append(gap)

    def _errors(self, query: NvmlQuery, index: int, state: _GpuState,
                raw: dict[tuple[int, int], int | float | None]) -> tuple[tuple[str, int], ...]:
        """Error totals by kind: newer per-link fields first, legacy totals after; () when none answered."""
        links = state.active_links
        if not links or not raw:
            return ()

        def family(fields: tuple[tuple[str, int], ...], per_link: bool) -> list[tuple[str, int, int]]:
            found = []
            for kind, field_id in fields:
                values = [raw.get((field_id, link)) for link in links] if per_link else [raw.get((field_id, 0))]
                if all(value is not None for value in values):
                    found.append((kind, field_id, sum(int(value or 0) for value in values)))
            return found

        newer = [(*found, True) for found in family(NVLINK_LINK_ERROR_FIELDS, True) + family(NVLINK5_ERROR_FIELDS, True)]
        chosen = newer or [(*found, False) for found in family(NVLINK_ERROR_FIELDS, False)]
        if state.error_fields is None:
            state.error_fields = tuple((kind, field_id, per_link) for kind, field_id, _, per_link in chosen)
        if not chosen:
            self._gap_once(query, state, "errors", Gap(
                f"NVLink error counters (gpu {index})",
                "no error field answered (per-link, NVLink5 and legacy totals): errors unknown, not zero"))
        return tuple((kind, total) for kind, _, total, _ in chosen)

    def _rate(self, state: _GpuState, key: tuple[int, int], value: int | float | None, interval: float | None) -> float | None:
        before = state.last_kib.get(key)
        if value is not None:
            state.last_kib[key] = int(value)
        if value is None or before is None or not interval or value < before:
            return None
        return (value - before) * 1024 / interval / 1e9

    def _direction(
        self, query: NvmlQuery, subject: str, state: _GpuState, field_id: int,
        raw: dict[tuple[int, int], int | float | None], interval: float | None,
    ) -> tuple[float | None, list[float | None]]:
        """The GPU's rate in one direction (TX or RX field) and each active link's rate, GB/s."""
        per_link = [raw.get((field_id, link)) for link in state.active_links]
        aggregate = raw.get((field_id, SCOPE_ALL_LINKS))
        # some drivers put the GPU's total on every per-link counter: then no link's own traffic is known,
        # and without the aggregate counter neither is the total
        same = len(per_link) > 1 and bool(per_link[0]) and all(value == per_link[0] for value in per_link) and (
            aggregate is None or aggregate == per_link[0])
        if same:
            self._gap_once(query, state, "same", Gap(
                f"nvmlDeviceGetFieldValues({subject}, per-link NVLink throughput)",
                "every link reports the same counter (the GPU total): per-link traffic unknown"))
        rates = [self._rate(state, (field_id, link), value, interval)
                 for link, value in zip(state.active_links, per_link, strict=True)]
        if aggregate is not None:
            total = self._rate(state, (field_id, SCOPE_ALL_LINKS), aggregate, interval)
        elif same:
            total = None  # equal links without an aggregate: the sum may be n times the truth, one link 1/n
        else:
            known = bool(rates) and all(rate is not None for rate in rates)
            total = sum(rate or 0.0 for rate in rates) if known else None
        return (total if state.active_links else None), ([None] * len(rates) if same else rates)

    def _read_gpu(self, query: NvmlQuery, index: int, state: _GpuState, interval: float | None) -> GpuLive:
        subject = f"gpu {index}"
        fields = self._fields(state)
        raw: dict[tuple[int, int], int | float | None] = {}
        if fields:
            values = query("nvmlDeviceGetFieldValues", state.handle, fields, subject=subject, gpu=index)
            if values is not None:
                raw = {key: field_value(value) for key, value in zip(fields, values, strict=False)}
        if raw and state.aggregate is None:
            state.aggregate = raw.get((FI_NVLINK_TX_KIB, SCOPE_ALL_LINKS)) is not None
        tx_total, tx_rates = self._direction(query, subject, state, FI_NVLINK_TX_KIB, raw, interval)
        rx_total, rx_rates = self._direction(query, subject, state, FI_NVLINK_RX_KIB, raw, interval)
        link_rates = tuple(LinkRate(link, tx, rx) for link, tx, rx in zip(state.active_links, tx_rates, rx_rates, strict=True))
        errors = self._errors(query, index, state, raw)
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
            nvlink_tx_gbps=tx_total,
            nvlink_rx_gbps=rx_total,
            links=link_rates if self.per_link else (),
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
