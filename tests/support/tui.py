"""Shared helpers for the app tests: a small machine built from the model, and fake services."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from textual.geometry import Size
from textual.screen import Screen

from linkscope.probes.live import GpuLive, LinkRate, LiveReading
from linkscope.topo.checks.report import CheckReport
from linkscope.topo.common.errors import InputError
from linkscope.topo.model.host import Gpu, Host, Link, LinkKind, Nic, NumaNode, P2PStatus
from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.local_services import LocalServices
from linkscope.tui.services import (
    BENCH_KINDS,
    BenchPlan,
    BenchProgress,
    BenchRequest,
    LayoutForm,
    LiveFeed,
    Unavailable,
)


def async_test(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test function with asyncio (keeps its name and parameters for pytest)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))  # type: ignore[arg-type]

    return run


async def settle(app: Any) -> None:
    """Wait until no worker of `app` runs and the messages they posted are handled (the screenshot
    script's own wait: a handled result may start the next worker, so it repeats until quiet)."""
    from linkscope.tui.screenshots import wait_idle

    await wait_idle(app)


def nvswitch_host(hostname: str = "node-a", gpus: int = 8, nics: int = 4) -> Host:
    """An H100-like box: every GPU pair NV18, two NUMA nodes, one switch per GPU pair with a NIC."""
    gpu_list = []
    for index in range(gpus):
        numa = 0 if index < gpus // 2 else 1
        root = f"pci0000:{0x10 + 0x40 * numa:02x}"
        switch = f"0000:{0x11 + index // 2:02x}:00.0"
        gpu_list.append(
            Gpu(
                index=index,
                name="NVIDIA H100 80GB HBM3",
                uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
                pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
                numa_node=numa,
                numa_affinity=str(numa),
                cpu_affinity="0-55" if numa == 0 else "56-111",
                pcie_gen_max=5,
                pcie_width_max=16,
                pci_path=(root, switch),
            )
        )
    links = tuple(
        Link(a, b, LinkKind.NVLINK, nvlink_count=18, nvlink_gen=4, p2p=P2PStatus("OK", "OK", "OK", "OK"))
        for a in range(gpus)
        for b in range(a + 1, gpus)
    )
    nic_list = []
    for index in range(nics):
        numa = 0 if index < nics // 2 else 1
        root = f"pci0000:{0x10 + 0x40 * numa:02x}"
        nic_list.append(
            Nic(
                name=f"mlx5_{index}",
                pci_bus_id=f"0000:{0x30 + index:02x}:00.0",
                numa_node=numa,
                link_layer="InfiniBand",
                rate_gbit_per_s=400.0,
                state="ACTIVE",
                pci_path=(root, f"0000:{0x11 + index * gpus // nics // 2:02x}:00.0"),
            )
        )
    gpu_nic = []
    for gpu in gpu_list:
        row = []
        for nic in nic_list:
            if gpu.pci_path[1] == nic.pci_path[1]:
                row.append("PIX")
            elif gpu.numa_node == nic.numa_node:
                row.append("NODE")
            else:
                row.append("SYS")
        gpu_nic.append(tuple(row))
    numa_nodes = (NumaNode(0, "0-55", 1 << 40), NumaNode(1, "56-111", 1 << 40))
    return Host(hostname, tuple(gpu_list), links, tuple(nic_list), tuple(gpu_nic), numa_nodes)


def small_snapshot(source: str = "sample:test-h100", gpus: int = 8) -> Snapshot:
    """One host of `gpus` NVSwitch GPUs."""
    return Snapshot(hosts=(nvswitch_host(gpus=gpus),), source=source)


def measured_copies(gpus: int = 8, degraded: tuple[int, int] = (0, 3), size_bytes: int = 1 << 28) -> Measurements:
    """Peer copies near 390 GB/s for every pair, except `degraded` at 120 GB/s."""
    copies = []
    for src in range(gpus):
        for dst in range(gpus):
            if src != dst:
                slow = {src, dst} == set(degraded)
                copies.append(PeerCopy(src, dst, size_bytes=size_bytes, unidir_gbps=120.0 if slow else 389.0))
    return Measurements(source="test copies", peer_copies=tuple(copies))


class FakeFeed:
    """A live feed that returns scripted readings, one per `read()`, repeating the last."""

    def __init__(self, readings: list[LiveReading]) -> None:
        self.readings = readings
        self.reads = 0
        self.closed = False

    def read(self) -> LiveReading:
        reading = self.readings[min(self.reads, len(self.readings) - 1)]
        self.reads += 1
        return reading

    def close(self) -> None:
        self.closed = True


def traffic_reading(gpus: int = 8, tx_gbps: float = 100.0, replay_delta: int = 0) -> LiveReading:
    """A reading where every GPU sends `tx_gbps` over NVLink (split over 18 links); GPU1 runs at x8."""
    return LiveReading(
        timestamp_s=1.0,
        interval_s=1.0,
        gpus=tuple(
            GpuLive(
                index=index,
                nvlink_tx_gbps=tx_gbps,
                nvlink_rx_gbps=tx_gbps / 2,
                pcie_tx_gbps=1.5,
                pcie_rx_gbps=0.5,
                links=tuple(LinkRate(link, tx_gbps / 18, tx_gbps / 36) for link in range(18)),
                nvlink_errors=(("replay", replay_delta if index == 2 else 0), ("crc_flit", 0)),
                nvlink_error_deltas=(("replay", replay_delta if index == 2 else 0), ("crc_flit", 0)),
                pcie_gen_current=5,
                pcie_gen_max=5,
                pcie_width_current=8 if index == 1 else 16,
                pcie_width_max=16,
            )
            for index in range(gpus)
        ),
    )


@dataclass
class FakeServices:
    """Services for tests: fixed snapshots, a scripted live feed, a scripted benchmark."""

    snapshots: dict[str | None, Snapshot] = field(default_factory=dict)
    feed: FakeFeed | None = None
    bench_reason: str | None = None
    """Why nothing can run (the plan then has no kinds)."""
    bench_backend: str = "nccl"
    """`nccl` (GPU benchmarks) or `gloo` (collectives on CPUs)."""
    bench_steps: int = 4
    bench_gate: threading.Event | None = None
    """When set, the fake benchmark waits for it before each step (to test cancelling)."""
    bench_calls: list[BenchRequest] = field(default_factory=list)

    def load_snapshot(self, source: str | None) -> Snapshot:
        if source not in self.snapshots:
            raise InputError(f"{source}: no such test source")
        return self.snapshots[source]

    def sample_names(self) -> list[str]:
        return sorted(name[len("sample:") :] for name in self.snapshots if name and name.startswith("sample:"))

    def open_live(self, snapshot: Snapshot) -> LiveFeed:
        if self.feed is None:
            raise Unavailable("no live data: test snapshot")
        return self.feed

    def bench_plan(self) -> BenchPlan:
        if self.bench_reason is not None:
            return BenchPlan(kinds=(), cannot=(self.bench_reason,))
        if self.bench_backend == "gloo":
            return BenchPlan(kinds=BENCH_KINDS[1:], backend="gloo", processes=2,
                             where="collectives over gloo on this machine's CPUs (2 processes)",
                             cannot=("p2p peer copies and NCCL collectives need two GPUs: NVML found no GPU",))
        return BenchPlan(kinds=BENCH_KINDS, backend="nccl", processes=8, where="NCCL on this machine's 8 GPUs")

    def run_bench(
        self,
        plan: BenchPlan,
        request: BenchRequest,
        progress: Callable[[BenchProgress], None],
        cancel: threading.Event,
    ) -> Measurements:
        self.bench_calls.append(request)
        gpus = plan.processes
        copies: list[PeerCopy] = []
        rows: list[CollectiveResult] = []
        for step in range(self.bench_steps):
            if self.bench_gate is not None:
                self.bench_gate.wait(5)
            if cancel.is_set():
                break
            size = request.sizes_bytes[step % len(request.sizes_bytes)]
            if request.kind != "p2p":
                rows.append(CollectiveResult(request.kind, size, "float32", 100.0, 1.0 * (step + 1), 1.5 * (step + 1), gpus))
                progress(BenchProgress((step + 1) / self.bench_steps, f"step {step + 1}",
                                       Measurements("fake bench", collectives=tuple(rows))))
                continue
            copies.extend(PeerCopy(0, dst, size_bytes=size, unidir_gbps=50.0 * (step + 1)) for dst in range(1, gpus))
            progress(BenchProgress((step + 1) / self.bench_steps, f"step {step + 1}", Measurements("fake bench", tuple(copies))))
        return Measurements("fake bench", tuple(copies), collectives=tuple(rows))

    def check(self, snapshot: Snapshot, form: LayoutForm, measurements: Measurements | None, suggest: bool) -> CheckReport:
        return LocalServices().check(snapshot, form, measurements, suggest)


@contextmanager
def counted_layouts() -> Iterator[list[None]]:
    """While inside: one entry per layout of a screen."""
    layouts: list[None] = []
    original = Screen._refresh_layout

    def counted(screen: Screen[Any], size: Size | None = None, scroll: bool = False) -> None:
        layouts.append(None)
        original(screen, size, scroll)

    Screen._refresh_layout = counted  # type: ignore[method-assign,assignment]
    try:
        yield layouts
    finally:
        Screen._refresh_layout = original  # type: ignore[method-assign]
