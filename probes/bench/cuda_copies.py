"""The real :class:`probes.bench.copies.CopyRuntime`: torch.cuda on this machine's GPUs.

A contiguous `dst.copy_(src, non_blocking=True)` between devices is a cudaMemcpyAsync on the
current stream (a copy engine; peer to peer when the driver allows it). The copying stream is
made current on its device, and a dedicated idle stream on the other device, so the two
directions of a bidirectional run never wait on a default stream. Only worker processes import
this module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch

from linkscope.probes.bench.timing import SPIN_CYCLES
from linkscope.probes.pages import page_nodes

PATTERN_CHUNK_WORDS = 1 << 22
"""Words of the pattern made at once: the int64 temporaries stay at a few times 16 MiB, whatever the buffer."""


def _pattern_words(start: int, count: int, seed: int, device: torch.device | str) -> torch.Tensor:
    index = torch.arange(start, start + count, dtype=torch.int64, device=device)
    return ((index * 2654435761 + seed * 40503) & 0x7FFFFFFF).to(torch.int32)


def fill_pattern(count: int, seed: int, device: torch.device | str) -> torch.Tensor:
    """`count` int32 words of a seeded pseudo-random pattern, the same on every device."""
    buffer = torch.empty(count, dtype=torch.int32, device=device)
    write_pattern(buffer, seed)
    return buffer


def write_pattern(buffer: torch.Tensor, seed: int) -> None:
    """Fill `buffer` with the pattern for `seed`, a chunk at a time."""
    for start in range(0, buffer.numel(), PATTERN_CHUNK_WORDS):
        part = buffer[start:start + PATTERN_CHUNK_WORDS]
        part.copy_(_pattern_words(start, part.numel(), seed, buffer.device))


def verify(received: torch.Tensor, seed: int) -> bool:
    """True when `received` holds exactly the pattern for `seed` (compared a chunk at a time)."""
    for start in range(0, received.numel(), PATTERN_CHUNK_WORDS):
        part = received[start:start + PATTERN_CHUNK_WORDS]
        if not torch.equal(part, _pattern_words(start, part.numel(), seed, received.device)):
            return False
    return True


@contextlib.contextmanager
def _current(stream: torch.cuda.Stream) -> Iterator[None]:
    with torch.cuda.device(stream.device), torch.cuda.stream(stream):
        yield


@contextlib.contextmanager
def _bound_to(cpus: set[int]) -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class TorchCuda:
    """Buffers are int32 tensors (device ones on `cuda:N`, host ones pinned); streams and events are torch's."""

    def __init__(self) -> None:
        torch.set_num_threads(1)
        self._copy: dict[int, torch.cuda.Stream] = {}
        self._idle: dict[int, torch.cuda.Stream] = {}

    def device_count(self) -> int:
        return int(torch.cuda.device_count())

    def device_info(self, index: int) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(index)
        domain = getattr(props, "pci_domain_id", 0)
        bus, device = getattr(props, "pci_bus_id", None), getattr(props, "pci_device_id", None)
        bus_id = f"{domain:08x}:{bus:02x}:{device:02x}.0" if bus is not None and device is not None else None
        return {"index": index, "name": props.name, "pci_bus_id": bus_id,
                "free_bytes": int(torch.cuda.mem_get_info(index)[0])}

    def pattern(self, device: int, count: int, seed: int) -> torch.Tensor:
        buffer = fill_pattern(count, seed, torch.device("cuda", device))
        torch.cuda.synchronize(device)
        return buffer

    def zeros(self, device: int, count: int) -> torch.Tensor:
        buffer = torch.zeros(count, dtype=torch.int32, device=torch.device("cuda", device))
        torch.cuda.synchronize(device)
        return buffer

    def host_pattern(self, count: int, seed: int, cpus: set[int], pinned: bool = True) -> torch.Tensor:
        with _bound_to(cpus):
            buffer = torch.empty(count, dtype=torch.int32, pin_memory=pinned)
            write_pattern(buffer, seed)
        return buffer

    def host_nodes(self, buffer: torch.Tensor) -> set[int] | None:
        return page_nodes(buffer.data_ptr(), buffer.numel() * buffer.element_size())

    def refill(self, buffer: torch.Tensor, seed: int | None) -> None:
        if seed is None:
            buffer.zero_()
        else:
            write_pattern(buffer, seed)
        if buffer.is_cuda:
            torch.cuda.synchronize(buffer.device)

    def matches(self, buffer: torch.Tensor, seed: int) -> bool:
        if buffer.is_cuda:
            torch.cuda.synchronize(buffer.device)
        return verify(buffer, seed)

    def stream(self, device: int) -> torch.cuda.Stream:
        # torch hands out streams from a pool of 32 per device and priority, round robin: made per
        # call, a copy stream would in time be the same stream as the idle one (then both
        # directions of a bidirectional run wait on each other). One per device, made once.
        if device not in self._copy:
            self._copy[device] = torch.cuda.Stream(device=torch.device("cuda", device))
        return self._copy[device]

    def wait(self, stream: torch.cuda.Stream, event: torch.cuda.Event) -> None:
        stream.wait_event(event)

    def copy(self, dst: torch.Tensor, src: torch.Tensor, stream: torch.cuda.Stream, times: int) -> None:
        other = next((t.device for t in (dst, src) if t.is_cuda and t.device != stream.device), None)
        with contextlib.ExitStack() as stack:
            if other is not None:
                stack.enter_context(_current(self._idle_stream(other.index)))
            stack.enter_context(_current(stream))
            for _ in range(times):
                dst.copy_(src, non_blocking=True)

    def _idle_stream(self, device: int) -> torch.cuda.Stream:
        if device not in self._idle:  # from the high-priority pool: never the copy stream itself
            self._idle[device] = torch.cuda.Stream(device=torch.device("cuda", device), priority=-1)
        return self._idle[device]

    def gate(self, stream: torch.cuda.Stream) -> None:
        with _current(stream):
            torch.cuda._sleep(SPIN_CYCLES)

    def record(self, stream: torch.cuda.Stream) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        return event

    def elapsed_us(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e3

    def synchronize(self, device: int) -> None:
        torch.cuda.synchronize(device)

    def can_access_peer(self, device: int, peer: int) -> bool:
        return bool(torch.cuda.can_device_access_peer(device, peer))

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def allowed_cpus(self) -> set[int]:
        return set(os.sched_getaffinity(0))
