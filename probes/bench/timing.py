"""Clocks for a batch of operations, timed the way nccl-tests and nvbandwidth do it.

A batch is enqueued, then synchronised once: on a GPU between two CUDA events on the stream
(optionally behind a spin kernel so the host's enqueue cost stays out), on a CPU with
perf_counter around operations that are synchronous when they return.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any, Protocol


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence of samples."""
    if not values:
        raise ValueError("median of no samples")
    return float(statistics.median(values))


class BatchClock(Protocol):
    """Times one batch: `start()` before enqueueing it, `stop()` after, returns microseconds."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


class CpuClock:
    """perf_counter around a batch of synchronous (CPU, gloo) operations."""

    def __init__(self) -> None:
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        return (time.perf_counter() - self._t0) * 1e6


SPIN_CYCLES = 20_000_000
"""Length of the gate kernel (about 10-15 ms at GPU clocks): long enough for the host to enqueue a batch."""


class CudaEventClock:
    """CUDA events on the current stream; `gate=True` first enqueues a spin kernel so the batch
    starts only after the host has enqueued all of it (nvbandwidth's blocking-kernel trick)."""

    def __init__(self, torch_module: Any, gate: bool = False) -> None:
        self._torch = torch_module
        self._gate = gate
        self._start = torch_module.cuda.Event(enable_timing=True)
        self._end = torch_module.cuda.Event(enable_timing=True)

    def start(self) -> None:
        if self._gate:
            self._torch.cuda._sleep(SPIN_CYCLES)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end)) * 1e3
