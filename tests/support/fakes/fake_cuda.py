"""A simulated CUDA box behind :class:`probes.bench.copies.CopyRuntime`, driven by a recorded machine.

The box's GPUs (names, PCI bus ids, NUMA nodes, memory) come from a Snapshot, and the speed of
every GPU pair from another tool's recording of a real machine (p2pBandwidthLatencyTest or
nvbandwidth output read by :mod:`topo.formats.p2p_matrices`), so the benchmark code is checked
against what a real box did.

Timing is a small discrete-event simulation of what CUDA does with the calls:
- every enqueueing call (copy, gate, event record) costs the host `enqueue_us`; an operation
  cannot start on its stream before the host has enqueued it;
- operations on one stream run in order; streams run concurrently;
- a copy waits its pair's latency, then moves its bytes at the pair's rate; copies in both
  directions of a pair at once share the pair's bidirectional rate; several copies on one
  channel share it equally; the first copy on a channel pays `first_copy_extra_us` more
  (mapping set-up), which a correct warm-up keeps out of the numbers;
- a gate keeps its stream busy for `gate_us` (times `gate_scale` of its GPU); events complete when
  their stream reaches them, and a stream told to wait for an event stalls until it has completed;
- waiting (event synchronize, device synchronize, buffer fills) moves the host clock forward.
Data is symbolic: a buffer holds ("pattern", seed) or ("zeros",); a copy delivers its source's
content when it completes, or ("garbage",) on a pair listed in `corrupt`. Device memory is
accounted: an allocation beyond the free memory raises like torch's out-of-memory error, and a
buffer gives its memory back when the last reference to it goes.
"""

from __future__ import annotations

import errno
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linkscope.probes.sysfs import parse_cpulist
from linkscope.topo.model.host import Host
from linkscope.topo.model.measurements import Measurements

Channel = tuple[tuple[str, int], tuple[str, int]]
"""(("gpu", i) | ("host" or "pageable", numa_node), same): where a copy reads and where it writes."""


@dataclass
class FakeBox:
    """The simulated machine: devices, rates per pair and per host path, and injected faults."""

    names: list[str]
    bus_ids: list[str | None]
    free_bytes: list[int]
    unidir_gbps: dict[tuple[int, int], float]
    bidir_gbps: dict[tuple[int, int], float]
    latency_us: dict[tuple[int, int], float]
    peer_access: set[tuple[int, int]]
    host_gbps: dict[tuple[int, int, str], float] = field(default_factory=dict)
    """(gpu, numa node, "h2d" | "d2h") -> GB/s."""
    node_cpus: dict[int, set[int]] = field(default_factory=dict)
    allowed_cpus: set[int] | None = None
    """CPUs the process may use (None: every CPU of `node_cpus`)."""
    host_latency_us: float = 2.0
    local_gbps: float = 1600.0
    """Copies within one GPU."""
    pageable_share: float = 0.45
    """Copies from or to pageable host memory run at this share of the pinned rate (CUDA stages them
    through a pinned bounce buffer)."""
    enqueue_us: float = 4.0
    gate_us: float = 10_000.0
    gate_scale: dict[int, float] = field(default_factory=dict)
    """Per GPU, how much longer its spin kernel runs (a GPU at a lower clock spins longer)."""
    first_copy_extra_us: float = 0.0
    corrupt: set[tuple[int, int]] = field(default_factory=set)
    membind: int | None = None
    """Put every host buffer on this NUMA node, whichever CPUs touched it (numactl --membind)."""
    refuse: set[tuple[int, int]] = field(default_factory=set)
    """GPU pairs whose copies CUDA refuses with an error (as when peer mappings run out)."""


def box_from_recording(host: Host, recording: Measurements, *, peer_access: set[tuple[int, int]] | None = None,
                       free_bytes: int | None = None, default_latency_us: float = 2.0) -> FakeBox:
    """A box with `host`'s GPUs and the pair rates `recording` measured.

    Where the recording has rows with P2P on and off for a pair (p2pBandwidthLatencyTest), the
    row matching the pair's peer access is used. Peer access defaults to every pair that has a
    P2P-enabled row. A recording without a bidirectional figure (nvbandwidth's one-way tests)
    is taken as full duplex (twice the one-way rate); one without latency gets `default_latency_us`.
    """
    count = len(host.gpus)
    if peer_access is None:
        peer_access = {(row.src, row.dst) for row in recording.peer_copies if row.p2p_enabled is not False}
    rows = {}
    for row in recording.peer_copies:
        wanted = (row.src, row.dst) in peer_access
        if row.p2p_enabled is None or row.p2p_enabled == wanted or (row.src, row.dst) not in rows:
            rows[(row.src, row.dst)] = row
    unidir, bidir, latency = {}, {}, {}
    for pair, row in rows.items():
        assert row.unidir_gbps is not None, f"recording has no one-way rate for {pair}"
        unidir[pair] = row.unidir_gbps
        bidir[pair] = row.bidir_gbps if row.bidir_gbps is not None else 2 * row.unidir_gbps
        latency[pair] = row.latency_us if row.latency_us is not None else default_latency_us
    memory = [free_bytes if free_bytes is not None else int(gpu.memory_total_bytes or 80 * 1024**3) * 9 // 10
              for gpu in host.gpus]
    return FakeBox(names=[gpu.name for gpu in host.gpus], bus_ids=[gpu.pci_bus_id for gpu in host.gpus],
                   free_bytes=memory, unidir_gbps=unidir, bidir_gbps=bidir, latency_us=latency,
                   peer_access=set(peer_access) & {(a, b) for a in range(count) for b in range(count)},
                   node_cpus={node.id: parse_cpulist(node.cpus) for node in host.numa_nodes if node.cpus})


@dataclass(eq=False)
class FakeBuffer:
    """`count` int32 words on GPU `device` (None: host memory on NUMA node `node`, pinned or pageable)."""

    device: int | None
    count: int
    content: tuple[Any, ...]
    node: int | None = None
    pinned: bool = True


@dataclass(eq=False)
class FakeEvent:
    time_us: float | None = None


@dataclass(eq=False)
class _Op:
    kind: str
    ready_us: float
    stream: FakeStream
    event: FakeEvent | None = None
    dst: FakeBuffer | None = None
    src: FakeBuffer | None = None
    channel: Channel | None = None
    delay_end_us: float = 0.0
    """Gate: when it ends. Copy: when its latency is over and its bytes start to move."""
    bytes_left: float = 0.0


@dataclass(eq=False)
class FakeStream:
    device: int
    queue: deque[_Op] = field(default_factory=deque)
    active: _Op | None = None
    free_at_us: float = 0.0


class FakeCuda:
    """CopyRuntime over a FakeBox; `now_us` is the simulated device time, `host_us` the host's."""

    def __init__(self, box: FakeBox) -> None:
        self.box = box
        self.free_bytes = list(box.free_bytes)
        self.now_us = 0.0
        self.host_us = 0.0
        self.streams: list[FakeStream] = []
        self.copy_streams: dict[int, FakeStream] = {}
        self.used_channels: set[Channel] = set()
        self.calls: dict[str, int] = {}

    # -- devices and memory -------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self.box.names)

    def device_info(self, index: int) -> dict[str, Any]:
        return {"index": index, "name": self.box.names[index], "pci_bus_id": self.box.bus_ids[index],
                "free_bytes": self.free_bytes[index]}

    def _allocate(self, device: int, count: int, content: tuple[Any, ...]) -> FakeBuffer:
        size = count * 4
        if size > self.free_bytes[device]:
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {size} bytes on GPU {device} "
                               f"({self.free_bytes[device]} bytes free)")
        self.synchronize(device)
        self.free_bytes[device] -= size
        buffer = FakeBuffer(device, count, content)
        weakref.finalize(buffer, self._give_back, device, size)
        return buffer

    def _give_back(self, device: int, size: int) -> None:
        self.free_bytes[device] += size

    def pattern(self, device: int, count: int, seed: int) -> FakeBuffer:
        return self._allocate(device, count, ("pattern", seed))

    def zeros(self, device: int, count: int) -> FakeBuffer:
        return self._allocate(device, count, ("zeros",))

    def host_pattern(self, count: int, seed: int, cpus: set[int], pinned: bool = True) -> FakeBuffer:
        if not cpus or not cpus <= self.allowed_cpus():
            raise OSError(errno.EINVAL, "Invalid argument")
        first = min(cpus)
        node = next(node for node, node_cpus in self.box.node_cpus.items() if first in node_cpus)
        return FakeBuffer(None, count, ("pattern", seed), node if self.box.membind is None else self.box.membind, pinned)

    def host_nodes(self, buffer: FakeBuffer) -> set[int] | None:
        return None if buffer.node is None else {buffer.node}

    def refill(self, buffer: FakeBuffer, seed: int | None) -> None:
        if buffer.device is not None:
            self.synchronize(buffer.device)
        buffer.content = ("zeros",) if seed is None else ("pattern", seed)

    def matches(self, buffer: FakeBuffer, seed: int) -> bool:
        if buffer.device is not None:
            self.synchronize(buffer.device)
        return buffer.content == ("pattern", seed)

    def can_access_peer(self, device: int, peer: int) -> bool:
        return (device, peer) in self.box.peer_access

    def empty_cache(self) -> None:
        self.calls["empty_cache"] = self.calls.get("empty_cache", 0) + 1

    def allowed_cpus(self) -> set[int]:
        every = set().union(*self.box.node_cpus.values()) if self.box.node_cpus else {0}
        return set(self.box.allowed_cpus if self.box.allowed_cpus is not None else every)

    # -- streams, copies, events --------------------------------------------------------------
    def stream(self, device: int) -> FakeStream:
        if device not in self.copy_streams:
            self.copy_streams[device] = FakeStream(device)
            self.streams.append(self.copy_streams[device])
        return self.copy_streams[device]

    def wait(self, stream: FakeStream, event: FakeEvent) -> None:
        self._enqueue(_Op("wait", 0.0, stream, event=event))

    def _enqueue(self, op: _Op) -> None:
        self.host_us += self.box.enqueue_us
        op.ready_us = self.host_us
        op.stream.queue.append(op)

    def copy(self, dst: FakeBuffer, src: FakeBuffer, stream: FakeStream, times: int) -> None:
        if dst.count != src.count:
            raise RuntimeError(f"copy between buffers of {src.count} and {dst.count} words")
        if stream.device not in (dst.device, src.device):
            raise RuntimeError("copy enqueued on a stream of a device it does not touch")
        channel = (self._end(src), self._end(dst))
        if (src.device, dst.device) in self.box.refuse:
            raise RuntimeError("CUDA error: peer mapping resources exhausted\nCUDA kernel errors might be reported later")
        for _ in range(times):
            self._enqueue(_Op("copy", 0.0, stream, dst=dst, src=src, channel=channel))

    @staticmethod
    def _end(buffer: FakeBuffer) -> tuple[str, int]:
        if buffer.device is not None:
            return ("gpu", buffer.device)
        return ("host" if buffer.pinned else "pageable", int(buffer.node or 0))

    def gate(self, stream: FakeStream) -> None:
        self._enqueue(_Op("gate", 0.0, stream))

    def record(self, stream: FakeStream) -> FakeEvent:
        event = FakeEvent()
        self._enqueue(_Op("record", 0.0, stream, event=event))
        return event

    def elapsed_us(self, start: FakeEvent, end: FakeEvent) -> float:
        self._run_until(lambda: start.time_us is not None and end.time_us is not None)
        assert start.time_us is not None and end.time_us is not None
        self.host_us = max(self.host_us, end.time_us)
        return end.time_us - start.time_us

    def synchronize(self, device: int) -> None:
        mine = [stream for stream in self.streams if stream.device == device]
        self._run_until(lambda: all(stream.active is None and not stream.queue for stream in mine))
        self.host_us = max(self.host_us, self.now_us if mine else self.host_us)

    # -- the simulation -----------------------------------------------------------------------
    def _rate_bytes_per_us(self, op: _Op, moving: list[_Op]) -> float:
        assert op.channel is not None
        (src_kind, src), (dst_kind, dst) = op.channel
        sharing = sum(1 for other in moving if other.channel == op.channel)
        if src_kind == "gpu" and dst_kind == "gpu":
            if src == dst:
                gbps = self.box.local_gbps
            else:
                gbps = self.box.unidir_gbps[(src, dst)]
                reverse = (op.channel[1], op.channel[0])
                if any(other.channel == reverse for other in moving):
                    gbps = min(gbps, self.box.bidir_gbps[(src, dst)] / 2)
        elif src_kind != "gpu":
            gbps = self.box.host_gbps[(dst, src, "h2d")] * (self.box.pageable_share if src_kind == "pageable" else 1.0)
        else:
            gbps = self.box.host_gbps[(src, dst, "d2h")] * (self.box.pageable_share if dst_kind == "pageable" else 1.0)
        return gbps * 1e3 / sharing

    def _latency_us(self, op: _Op) -> float:
        assert op.channel is not None
        (src_kind, src), (dst_kind, dst) = op.channel
        if src_kind == "gpu" and dst_kind == "gpu" and src != dst:
            latency = self.box.latency_us[(src, dst)]
        else:
            latency = self.box.host_latency_us
        if op.channel not in self.used_channels:
            self.used_channels.add(op.channel)
            latency += self.box.first_copy_extra_us
        return latency

    @staticmethod
    def _head_start_us(stream: FakeStream) -> float | None:
        """When the stream's next operation can start; None while it waits for an event not yet complete."""
        head = stream.queue[0]
        start_us = max(stream.free_at_us, head.ready_us)
        if head.kind == "wait":
            assert head.event is not None
            if head.event.time_us is None:
                return None
            start_us = max(start_us, head.event.time_us)
        return start_us

    def _start(self, stream: FakeStream, at_us: float) -> None:
        op = stream.queue.popleft()
        if op.kind in ("record", "wait"):
            if op.kind == "record":
                assert op.event is not None
                op.event.time_us = at_us
            stream.free_at_us = at_us
            return
        if op.kind == "gate":
            op.delay_end_us = at_us + self.box.gate_us * self.box.gate_scale.get(stream.device, 1.0)
        else:
            assert op.src is not None
            op.delay_end_us = at_us + self._latency_us(op)
            op.bytes_left = float(op.src.count * 4)
        stream.active = op

    def _finish(self, op: _Op) -> None:
        op.stream.active = None
        op.stream.free_at_us = self.now_us
        if op.kind == "copy":
            assert op.dst is not None and op.src is not None and op.channel is not None
            pair = (op.channel[0][1], op.channel[1][1])
            garbage = op.channel[0][0] == op.channel[1][0] == "gpu" and pair in self.box.corrupt
            op.dst.content = ("garbage",) if garbage else op.src.content

    def _run_until(self, done: Callable[[], bool]) -> None:
        while not done():
            started = True
            while started:  # start what can start now (records and satisfied waits complete at once)
                started = False
                for stream in self.streams:
                    while stream.active is None and stream.queue:
                        head_us = self._head_start_us(stream)
                        if head_us is None or head_us > self.now_us:
                            break
                        self._start(stream, max(head_us, self.now_us))
                        started = True
            if done():
                return
            active = [stream.active for stream in self.streams if stream.active is not None]
            moving = [op for op in active if op.kind == "copy" and op.delay_end_us <= self.now_us]
            rates = {id(op): self._rate_bytes_per_us(op, moving) for op in moving}
            ends_us = {id(op): op.delay_end_us for op in active if op not in moving}
            ends_us.update({id(op): self.now_us + op.bytes_left / rates[id(op)] for op in moving})
            heads_us = [self._head_start_us(s) for s in self.streams if s.active is None and s.queue]
            starts_us = [start_us for start_us in heads_us if start_us is not None]
            if not ends_us and not starts_us:
                raise RuntimeError("the simulation waits for something that was never enqueued")
            step_to = min([*ends_us.values(), *starts_us])
            for op in moving:
                op.bytes_left -= rates[id(op)] * (step_to - self.now_us)
            self.now_us = step_to
            for op in active:
                if ends_us[id(op)] <= step_to and (op.kind == "gate" or op in moving):
                    self._finish(op)
