"""Worker side of `bench p2p`: copy-engine copies between GPUs, timed like nvbandwidth.

Each measurement: one warm-up copy, then `samples` samples of `copies` back-to-back copies,
each sample enqueued behind a spin kernel and timed with CUDA events on the copying stream,
so the host's enqueue cost stays out; the median sample is reported. A contiguous
`dst.copy_(src)` between devices is a cudaMemcpyAsync on the source device's current stream
(the copy engine; peer to peer when the driver allows it). Dedicated streams are made current
on both devices so the two directions of a bidirectional run do not wait for each other.
Copied data is compared with a pattern generated independently on the receiving device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from probes.bench.timing import SPIN_CYCLES, median

LATENCY_COPIES = 100
"""Tiny copies per latency sample."""
LATENCY_BYTES = 4


def fill_pattern(count: int, seed: int, device: torch.device | str) -> torch.Tensor:
    """`count` int32 words of a seeded pseudo-random pattern, the same on every device."""
    index = torch.arange(count, dtype=torch.int64, device=device)
    return ((index * 2654435761 + seed * 40503) & 0x7FFFFFFF).to(torch.int32)


def verify(received: torch.Tensor, seed: int) -> bool:
    """True when `received` holds exactly the pattern for `seed`."""
    return bool(torch.equal(received, fill_pattern(received.numel(), seed, received.device)))


@contextlib.contextmanager
def current(stream: torch.cuda.Stream) -> Iterator[None]:
    """Make `stream` the current stream (and its device the current device) for the block."""
    with torch.cuda.device(stream.device), torch.cuda.stream(stream):
        yield


def settle(*tensors: torch.Tensor) -> None:
    """Wait for all work on the tensors' devices: buffers are filled on the default stream, the
    copies run on dedicated streams, so they must not start before the fills are done."""
    for device in {tensor.device for tensor in tensors}:
        torch.cuda.synchronize(device)


def timed_batches(enqueue: Callable[[], None], stream: torch.cuda.Stream, samples: int) -> list[float]:
    """Microseconds per sample for `samples` runs of `enqueue` on `stream`, each gated by a spin kernel."""
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with current(stream):
            torch.cuda._sleep(SPIN_CYCLES)
            start.record(stream)
            enqueue()
            end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times


def unidirectional(src: torch.Tensor, dst: torch.Tensor, copies: int, samples: int) -> float:
    """Median GB/s of copying `src` to `dst` (different devices or the same)."""
    copy_stream = torch.cuda.Stream(device=src.device)
    idle_stream = torch.cuda.Stream(device=dst.device)

    def enqueue() -> None:
        with current(idle_stream), current(copy_stream):
            for _ in range(copies):
                dst.copy_(src, non_blocking=True)

    enqueue()
    torch.cuda.synchronize(src.device)
    sample_us = median(timed_batches(enqueue, copy_stream, samples))
    return src.numel() * src.element_size() * copies / (sample_us * 1e3)


def bidirectional(a_src: torch.Tensor, a_dst: torch.Tensor, b_src: torch.Tensor, b_dst: torch.Tensor,
                  copies: int, samples: int) -> float:
    """Median total GB/s of copying a_src->a_dst and b_src->b_dst at the same time.

    Each direction runs on its own stream, gated by its own spin kernel, and is timed by its own
    events; the sample's value is the sum of the two directions' bandwidths.
    """
    stream_a, idle_a = torch.cuda.Stream(device=a_src.device), torch.cuda.Stream(device=a_dst.device)
    stream_b, idle_b = torch.cuda.Stream(device=b_src.device), torch.cuda.Stream(device=b_dst.device)
    size = a_src.numel() * a_src.element_size() * copies
    totals = []
    for index in range(samples + 1):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        for stream in (stream_a, stream_b):
            with current(stream):
                torch.cuda._sleep(SPIN_CYCLES)
        events[0].record(stream_a)
        events[2].record(stream_b)
        for _ in range(copies):
            with current(idle_a), current(stream_a):
                a_dst.copy_(a_src, non_blocking=True)
            with current(idle_b), current(stream_b):
                b_dst.copy_(b_src, non_blocking=True)
        events[1].record(stream_a)
        events[3].record(stream_b)
        events[1].synchronize()
        events[3].synchronize()
        if index == 0:
            continue  # warm-up
        a_us = events[0].elapsed_time(events[1]) * 1e3
        b_us = events[2].elapsed_time(events[3]) * 1e3
        totals.append(size / (a_us * 1e3) + size / (b_us * 1e3))
    return median(totals)


def latency_us(src_device: torch.device, dst_device: torch.device, samples: int) -> float:
    """Median microseconds per tiny (4-byte) copy, from batches of LATENCY_COPIES copies."""
    src = torch.ones(LATENCY_BYTES // 4, dtype=torch.int32, device=src_device)
    dst = torch.empty_like(src, device=dst_device)
    settle(src, dst)
    copy_stream = torch.cuda.Stream(device=src_device)
    idle_stream = torch.cuda.Stream(device=dst_device)

    def enqueue() -> None:
        with current(idle_stream), current(copy_stream):
            for _ in range(LATENCY_COPIES):
                dst.copy_(src, non_blocking=True)

    enqueue()
    torch.cuda.synchronize(src_device)
    return median(timed_batches(enqueue, copy_stream, samples)) / LATENCY_COPIES


def measure_pair(src: int, dst: int, size_bytes: int, copies: int, samples: int) -> dict[str, Any]:
    """Unidirectional and bidirectional bandwidth, latency and data check for one ordered pair."""
    count = size_bytes // 4
    src_dev, dst_dev = torch.device("cuda", src), torch.device("cuda", dst)
    a_src, a_dst = fill_pattern(count, 1, src_dev), torch.zeros(count, dtype=torch.int32, device=dst_dev)
    settle(a_src, a_dst)
    unidir = unidirectional(a_src, a_dst, copies, samples)
    verified = verify(a_dst, 1)
    b_src, b_dst = fill_pattern(count, 2, dst_dev), torch.zeros(count, dtype=torch.int32, device=src_dev)
    a_dst.zero_()
    settle(a_src, a_dst, b_src, b_dst)
    bidir = bidirectional(a_src, a_dst, b_src, b_dst, copies, samples)
    verified = verified and verify(a_dst, 1) and verify(b_dst, 2)
    lat = latency_us(src_dev, dst_dev, samples)
    p2p = bool(torch.cuda.can_device_access_peer(src, dst)) if src != dst else None
    settle(a_src, a_dst, b_src, b_dst)
    del a_src, a_dst, b_src, b_dst
    torch.cuda.empty_cache()
    return {"src": src, "dst": dst, "size_bytes": count * 4, "unidir_gbps": unidir, "bidir_gbps": bidir,
            "latency_us": lat, "p2p_enabled": p2p, "verified": verified}


def device_info(index: int) -> dict[str, Any]:
    """Name and PCI bus id of CUDA device `index`."""
    props = torch.cuda.get_device_properties(index)
    domain = getattr(props, "pci_domain_id", 0)
    bus, device = getattr(props, "pci_bus_id", None), getattr(props, "pci_device_id", None)
    bus_id = f"{domain:08x}:{bus:02x}:{device:02x}.0" if bus is not None and device is not None else None
    return {"index": index, "name": props.name, "pci_bus_id": bus_id, "free_bytes": int(torch.cuda.mem_get_info(index)[0])}


def run_p2p(spec: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
    """Every requested pair, then host copies per GPU; the result dict the command renders."""
    from probes.bench.hostcopy import measure_host_copies

    torch.set_num_threads(1)
    count = torch.cuda.device_count()
    devices = [device_info(index) for index in range(count)]
    notes: list[str] = []
    size_bytes = int(spec["size_bytes"])
    budget = min(device["free_bytes"] for device in devices) // 8 if devices else 0
    if size_bytes > budget:
        notes.append(f"copy size lowered from {size_bytes} to {budget} B to fit free GPU memory")
        size_bytes = budget
    size_bytes -= size_bytes % 4
    peer = []
    for src, dst in spec["pairs"]:
        peer.append(measure_pair(src, dst, size_bytes, spec["copies"], spec["samples"]))
        progress("pair", src, dst)
    host: list[dict[str, Any]] = []
    if spec["host"]:
        host, host_notes = measure_host_copies(devices, size_bytes, spec["copies"], spec["samples"], progress)
        notes.extend(host_notes)
    return {"devices": devices, "peer": peer, "host": host, "notes": notes}
