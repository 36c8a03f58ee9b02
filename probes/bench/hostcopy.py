"""Host<->GPU copies from pinned memory placed on a chosen NUMA node: the NUMA penalty, measured.

The worker binds itself to the node's CPUs (os.sched_setaffinity, no root needed) before it
allocates and pins the host buffer, so the kernel places the pages on that node (first touch).
Buffers of every node stay allocated for the whole run, so torch's pinned-memory cache cannot
hand one node's pages to another node's measurement.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from probes.bench.p2p import current, fill_pattern, settle, timed_batches, verify
from probes.bench.p2p_report import bus_id_key, nodes_to_test
from probes.bench.timing import median
from probes.sysfs import SysfsReader, parse_cpulist


def _pinned_on(node_cpus: set[int], count: int) -> torch.Tensor:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, node_cpus)
    try:
        buffer = torch.empty(count, dtype=torch.int32, pin_memory=True)
        buffer.copy_(fill_pattern(count, 3, "cpu"))
        return buffer
    finally:
        os.sched_setaffinity(0, before)


def measure_host_copies(devices: list[dict[str, Any]], size_bytes: int, copies: int, samples: int,
                        progress: Callable[..., None]) -> tuple[list[dict[str, Any]], list[str]]:
    """h2d and d2h GB/s per GPU from pinned buffers on its own and a remote NUMA node."""
    reader = SysfsReader()
    numa = reader.numa_nodes()
    allowed = os.sched_getaffinity(0)
    nodes = {node.id: (parse_cpulist(node.cpus) if node.cpus else set()) & allowed for node in numa}
    distances = {node.id: node.distances for node in numa}
    notes: list[str] = []
    if not nodes:
        nodes = {-1: set(os.sched_getaffinity(0))}
        notes.append("NUMA layout not readable: host copies use this process's CPUs")
    gpu_nodes = {bus_id_key(gpu.bus_id): gpu.numa_node for gpu in reader.gpus()}
    count = size_bytes // 4
    buffers: dict[int, torch.Tensor] = {}
    rows = []
    for device in devices:
        index = device["index"]
        node_of_gpu = gpu_nodes.get(bus_id_key(device["pci_bus_id"])) if device["pci_bus_id"] else None
        gpu_node = node_of_gpu if node_of_gpu is not None and node_of_gpu >= 0 else None
        targets = nodes_to_test(gpu_node, nodes, distances) if -1 not in nodes else [-1]
        if len(targets) == 1 and len(nodes) > 1 and gpu_node is not None:
            notes.append(f"GPU {index}: no other NUMA node with CPUs to compare with")
        gpu = torch.device("cuda", index)
        on_gpu = torch.zeros(count, dtype=torch.int32, device=gpu)
        stream = torch.cuda.Stream(device=gpu)
        for node in targets:
            if node not in buffers:
                try:
                    buffers[node] = _pinned_on(nodes[node], count)
                except OSError as exc:  # the node's CPUs are outside this process's cpuset (containers)
                    notes.append(f"NUMA node {node}: cannot run on its CPUs ({exc.strerror}); not measured")
                    nodes[node] = set()
                    continue
            host = buffers[node]
            for direction in ("h2d", "d2h"):
                dst, src = (on_gpu, host) if direction == "h2d" else (host, on_gpu)
                if direction == "d2h":
                    on_gpu.copy_(fill_pattern(count, 4, gpu))
                settle(on_gpu)

                def enqueue(dst: torch.Tensor = dst, src: torch.Tensor = src, stream: torch.cuda.Stream = stream) -> None:
                    with current(stream):
                        for _ in range(copies):
                            dst.copy_(src, non_blocking=True)

                enqueue()
                torch.cuda.synchronize(gpu)
                sample_us = median(timed_batches(enqueue, stream, samples))
                torch.cuda.synchronize(gpu)
                ok = verify(dst, 3 if direction == "h2d" else 4)
                if direction == "d2h":
                    host.copy_(fill_pattern(count, 3, "cpu"))
                rows.append({"gpu": index, "direction": direction, "numa_node": None if node < 0 else node,
                             "local": gpu_node is not None and node == gpu_node, "size_bytes": count * 4,
                             "gbps": count * 4 * copies / (sample_us * 1e3), "verified": ok})
        progress("host", index)
        del on_gpu
        torch.cuda.empty_cache()
    return rows, notes
