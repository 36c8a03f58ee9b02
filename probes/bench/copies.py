"""The copy primitives of `bench p2p`, timed like nvbandwidth: one pair's bandwidths, latency and data check.

Each measurement: one warm-up batch, then `samples` samples of `copies` back-to-back copies,
each sample enqueued behind a spin kernel and timed with events on the copying stream, so the
host's enqueue cost stays out; the median sample is reported. Copies run on a dedicated stream
of the source device, so they are copy-engine writes (nvbandwidth's `*_memcpy_write_ce`; its
`read_ce` tests pull from the destination instead), peer to peer when the driver allows it and
staged through the host when not. Copied data is compared with the pattern the source was
filled with. The latency is that of a 4-byte `copy_` between two GPUs as torch issues it,
which includes torch's ordering of the two devices' streams around every cross-device copy;
it reads above p2pBandwidthLatencyTest's latency, which times a kernel writing to the peer.

The GPU itself is reached only through a :class:`CopyRuntime`: :mod:`probes.bench.cuda_copies`
is the real one (torch.cuda); the tests drive these with a simulated box instead. What to
measure and in which order is :mod:`probes.bench.p2p`'s (GPU pairs) and :mod:`probes.bench.hostcopy`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from linkscope.probes.bench.timing import median

LATENCY_COPIES = 100
"""Tiny copies per latency sample."""
LATENCY_BYTES = 4
HOST = None
"""The `device` of a host buffer."""


class CopyRuntime(Protocol):
    """What the copy benchmarks need from CUDA. Buffers hold int32 words; GPUs are CUDA indexes.

    Buffer-making calls return once the buffer is filled (no fill can overlap a timed copy);
    copies, gates and event records are asynchronous, as on a GPU.
    """

    def device_count(self) -> int:
        """CUDA devices this process sees."""
        ...

    def device_info(self, index: int) -> dict[str, Any]:
        """`index`, `name`, `pci_bus_id` (or None) and `free_bytes` of CUDA device `index`."""
        ...

    def pattern(self, device: int, count: int, seed: int) -> Any:
        """A device buffer of `count` words holding the pattern for `seed`."""
        ...

    def zeros(self, device: int, count: int) -> Any:
        """A zeroed device buffer of `count` words."""
        ...

    def host_pattern(self, count: int, seed: int, cpus: set[int], pinned: bool = True) -> Any:
        """A host buffer holding the pattern (pinned, or pageable when `pinned` is False), first touched
        by a thread bound to `cpus` (so its pages sit on the NUMA node of those CPUs)."""
        ...

    def host_nodes(self, buffer: Any) -> set[int] | None:
        """NUMA nodes a host buffer's pages sit on, or None when the kernel cannot say."""
        ...

    def refill(self, buffer: Any, seed: int | None) -> None:
        """Write the pattern for `seed` (zeros for None) into `buffer` and wait for it."""
        ...

    def matches(self, buffer: Any, seed: int) -> bool:
        """Wait for the buffer's device, then whether it holds exactly the pattern for `seed`."""
        ...

    def stream(self, device: int) -> Any:
        """The copy stream of `device`: one per device, made once and then reused."""
        ...

    def wait(self, stream: Any, event: Any) -> None:
        """Make `stream` wait for `event` (recorded on another stream, possibly of another device)."""
        ...

    def copy(self, dst: Any, src: Any, stream: Any, times: int) -> None:
        """Enqueue `times` asynchronous copies of `src` into `dst` on `stream`."""
        ...

    def gate(self, stream: Any) -> None:
        """Enqueue a spin kernel of a few milliseconds on `stream` (the host enqueues behind it)."""
        ...

    def record(self, stream: Any) -> Any:
        """Record a timing event on `stream`."""
        ...

    def elapsed_us(self, start: Any, end: Any) -> float:
        """Wait for `end`, then the microseconds between the two events."""
        ...

    def synchronize(self, device: int) -> None:
        """Wait for all work on `device`."""
        ...

    def can_access_peer(self, device: int, peer: int) -> bool:
        """Whether `device` can map `peer`'s memory (P2P)."""
        ...

    def empty_cache(self) -> None:
        """Give freed device memory back to the driver."""
        ...

    def allowed_cpus(self) -> set[int]:
        """CPUs this process may run on (host buffers can be placed on their NUMA nodes)."""
        ...


def timed_us(runtime: CopyRuntime, stream: Any, enqueue: Callable[[], None], samples: int) -> list[float]:
    """Microseconds per sample for `samples` runs of `enqueue` on `stream`, each behind a spin kernel."""
    times = []
    for _ in range(samples):
        runtime.gate(stream)
        start = runtime.record(stream)
        enqueue()
        end = runtime.record(stream)
        times.append(runtime.elapsed_us(start, end))
    return times


def copy_gbps(runtime: CopyRuntime, dst: Any, src: Any, stream: Any, size_bytes: int, copies: int, samples: int) -> float:
    """Median GB/s of `copies` back-to-back copies of `size_bytes` from `src` to `dst` on `stream`."""
    def enqueue() -> None:
        runtime.copy(dst, src, stream, copies)

    enqueue()  # warm-up
    sample_us = median(timed_us(runtime, stream, enqueue, samples))
    return size_bytes * copies / (sample_us * 1e3)


def bidirectional_gbps(runtime: CopyRuntime, forward: tuple[Any, Any, Any], backward: tuple[Any, Any, Any],
                       size_bytes: int, copies: int, samples: int) -> float:
    """Median total GB/s of two copies at once, each (dst, src, stream) on its own stream.

    One spin kernel gates the forward stream and the backward stream waits for the forward
    start event, so both directions start together (two spins on two GPUs would end apart as
    their clocks differ, and copies that barely overlap would add up to a false figure). Each
    direction is timed by its own events; a sample is the sum of the two directions' bandwidths.
    The first round is a warm-up.
    """
    totals = []
    for index in range(samples + 1):
        runtime.gate(forward[2])
        starts = [runtime.record(forward[2])]
        runtime.wait(backward[2], starts[0])
        starts.append(runtime.record(backward[2]))
        for _ in range(copies):
            for dst, src, stream in (forward, backward):
                runtime.copy(dst, src, stream, 1)
        ends = [runtime.record(forward[2]), runtime.record(backward[2])]
        elapsed_us = [runtime.elapsed_us(start, end) for start, end in zip(starts, ends, strict=True)]
        if index:
            totals.append(sum(size_bytes * copies / (us * 1e3) for us in elapsed_us))
    return median(totals)


def latency_us(runtime: CopyRuntime, src: int, dst: int, samples: int) -> float:
    """Median microseconds per tiny (4-byte) copy, from batches of LATENCY_COPIES copies."""
    source = runtime.pattern(src, LATENCY_BYTES // 4, 5)
    target = runtime.zeros(dst, LATENCY_BYTES // 4)
    stream = runtime.stream(src)

    def enqueue() -> None:
        runtime.copy(target, source, stream, LATENCY_COPIES)

    enqueue()
    return median(timed_us(runtime, stream, enqueue, samples)) / LATENCY_COPIES


def measure_local_copy(runtime: CopyRuntime, device: int, size_bytes: int, copies: int, samples: int) -> dict[str, Any]:
    """GB/s of a copy within one GPU's memory (bytes copied per second: each byte is read once and
    written once, so the memory moves twice this) and its data check."""
    count = size_bytes // 4
    source, target = runtime.pattern(device, count, 6), runtime.zeros(device, count)
    gbps = copy_gbps(runtime, target, source, runtime.stream(device), count * 4, copies, samples)
    verified = runtime.matches(target, 6)
    del source, target
    runtime.empty_cache()
    return {"gpu": device, "size_bytes": count * 4, "gbps": gbps, "verified": verified}


def measure_pair(runtime: CopyRuntime, src: int, dst: int, size_bytes: int, copies: int, samples: int) -> dict[str, Any]:
    """Unidirectional and bidirectional bandwidth, latency and the data check for one ordered pair
    (the check covers both directions of the pair's bidirectional run)."""
    row = _pair_bandwidths(runtime, src, dst, size_bytes, copies, samples)
    row["latency_us"] = latency_us(runtime, src, dst, samples)
    row["p2p_enabled"] = runtime.can_access_peer(src, dst) if src != dst else None
    runtime.empty_cache()
    return row


def _pair_bandwidths(runtime: CopyRuntime, src: int, dst: int, size_bytes: int, copies: int, samples: int) -> dict[str, Any]:
    """The bandwidth half of measure_pair; its buffers are freed when it returns."""
    count = size_bytes // 4
    forward_src, forward_dst = runtime.pattern(src, count, 1), runtime.zeros(dst, count)
    forward_stream = runtime.stream(src)
    unidir = copy_gbps(runtime, forward_dst, forward_src, forward_stream, count * 4, copies, samples)
    verified = runtime.matches(forward_dst, 1)
    runtime.refill(forward_dst, None)
    backward_src, backward_dst = runtime.pattern(dst, count, 2), runtime.zeros(src, count)
    bidir = bidirectional_gbps(runtime, (forward_dst, forward_src, forward_stream),
                               (backward_dst, backward_src, runtime.stream(dst)), count * 4, copies, samples)
    verified = verified and runtime.matches(forward_dst, 1) and runtime.matches(backward_dst, 2)
    return {"src": src, "dst": dst, "size_bytes": count * 4, "unidir_gbps": unidir, "bidir_gbps": bidir,
            "verified": verified}
