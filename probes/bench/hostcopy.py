"""Host<->GPU copies from pinned memory placed on a chosen NUMA node: the NUMA penalty, measured;
and, on request, the same copies from pageable memory on the GPU's own node.

The host buffer of a node is allocated and filled by a thread bound to that node's CPUs, so
the kernel places its pages there (first touch). Buffers of every node stay allocated for the
whole run, so a pinned-memory cache cannot hand one node's pages to another node's measurement.
Pageable memory is what a training loop's plain tensors are: CUDA stages each copy through a
pinned bounce buffer of its own, so it is slower than pinned and is measured, never judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linkscope.probes.bench.copies import CopyRuntime, copy_gbps
from linkscope.probes.bench.p2p_report import bus_id_key, nodes_to_test
from linkscope.probes.sysfs import SysfsReader, parse_cpulist

H2D_SEED, D2H_SEED = 3, 4


def measure_host_copies(runtime: CopyRuntime, devices: list[dict[str, Any]], size_bytes: int, copies: int, samples: int,
                        progress: Callable[..., None], sysfs_root: str = "/",
                        keep: Callable[[str, Any], None] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """h2d and d2h GB/s per GPU from pinned buffers on its own and on the farthest other NUMA node;
    `keep("host", row)` receives each row as soon as it is measured."""
    reader = SysfsReader(sysfs_root)
    numa = reader.numa_nodes()
    allowed = runtime.allowed_cpus()
    nodes = {node.id: (parse_cpulist(node.cpus) if node.cpus else set()) & allowed for node in numa}
    distances = {node.id: node.distances for node in numa}
    notes: list[str] = []
    if not nodes:
        nodes = {-1: allowed}
        notes.append("NUMA layout not readable: host copies use this process's CPUs")
    gpu_nodes = {bus_id_key(gpu.bus_id): gpu.numa_node for gpu in reader.gpus()}
    count = size_bytes // 4
    host_buffers: dict[int, Any] = {}
    placed_on: dict[int, int] = {}
    rows = []
    for device in devices:
        index = device["index"]
        gpu_node = _gpu_node(gpu_nodes, device, nodes, notes)
        targets = nodes_to_test(gpu_node, nodes, distances) if -1 not in nodes else [-1]
        if gpu_node is not None and gpu_node not in targets:
            notes.append(f"GPU {index}: its own NUMA node {gpu_node} has no CPUs this process may use; "
                         "host copies measured from other nodes only")
        elif len(targets) == 1 and len(nodes) > 1 and gpu_node is not None:
            notes.append(f"GPU {index}: no other NUMA node with CPUs to compare with")
        on_gpu = runtime.zeros(index, count)
        stream = runtime.stream(index)
        for node in targets:
            if node not in host_buffers:
                try:
                    host_buffers[node] = runtime.host_pattern(count, H2D_SEED, nodes[node])
                except OSError as exc:  # the node's CPUs are outside this process's cpuset (containers)
                    notes.append(f"NUMA node {node}: cannot run on its CPUs ({exc.strerror}); not measured")
                    nodes[node] = set()
                    continue
                placed_on[node] = _placement(runtime.host_nodes(host_buffers[node]), node, notes)
            where = placed_on[node]
            measured = _both_directions(runtime, index, on_gpu, host_buffers[node], stream, count * 4, copies, samples)
            for direction, gbps, ok in measured:
                rows.append({"gpu": index, "direction": direction, "numa_node": None if where < 0 else where,
                             "local": gpu_node is not None and where == gpu_node, "size_bytes": count * 4,
                             "gbps": gbps, "verified": ok})
                if keep is not None:
                    keep("host", rows[-1])
        progress("host", index)
        del on_gpu
        runtime.empty_cache()
    return rows, notes


def measure_pageable_copies(runtime: CopyRuntime, devices: list[dict[str, Any]], size_bytes: int, copies: int,
                            samples: int, progress: Callable[..., None], sysfs_root: str = "/",
                            keep: Callable[[str, Any], None] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """h2d and d2h GB/s per GPU from pageable memory first touched on the GPU's own NUMA node (this
    process's CPUs when the node is unknown or has none it may use); `keep("pageable", row)` per row."""
    reader = SysfsReader(sysfs_root)
    allowed = runtime.allowed_cpus()
    node_cpus = {node.id: (parse_cpulist(node.cpus) if node.cpus else set()) & allowed for node in reader.numa_nodes()}
    gpu_nodes = {bus_id_key(gpu.bus_id): gpu.numa_node for gpu in reader.gpus()}
    count = size_bytes // 4
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for device in devices:
        index = device["index"]
        node = _gpu_node(gpu_nodes, device, node_cpus, notes)
        cpus = node_cpus.get(node, set()) if node is not None else set()
        if not cpus:
            node, cpus = None, allowed
            notes.append(f"GPU {index}: pageable copies from this process's CPUs (the GPU's own NUMA node is unknown "
                         "or has no CPU this process may use)")
        host = runtime.host_pattern(count, H2D_SEED, cpus, pinned=False)
        on_gpu = runtime.zeros(index, count)
        for direction, gbps, ok in _both_directions(runtime, index, on_gpu, host, runtime.stream(index), count * 4, copies,
                                                   samples):
            rows.append({"gpu": index, "direction": direction, "numa_node": node, "memory": "pageable",
                         "size_bytes": count * 4, "gbps": gbps, "verified": ok})
            if keep is not None:
                keep("pageable", rows[-1])
        progress("pageable", index)
        del on_gpu, host
        runtime.empty_cache()
    return rows, notes


def _gpu_node(gpu_nodes: dict[Any, int | None], device: dict[str, Any], nodes: dict[int, set[int]],
              notes: list[str]) -> int | None:
    """The NUMA node of a CUDA device from sysfs; on a machine of one NUMA node, that node even where the
    kernel states none for the GPU (numa_node -1, as in many VMs), with a note saying so."""
    stated = gpu_nodes.get(bus_id_key(device["pci_bus_id"])) if device["pci_bus_id"] else None
    if stated is not None and stated >= 0:
        return stated
    if len(nodes) == 1 and -1 not in nodes:
        only = next(iter(nodes))
        note = (f"GPU {device['index']}: the kernel states no NUMA node for it; the machine has one NUMA node "
                f"({only}), so its host copies count as local")
        if note not in notes:
            notes.append(note)
        return only
    return None


def _both_directions(runtime: CopyRuntime, index: int, on_gpu: Any, host: Any, stream: Any, size_bytes: int,
                     copies: int, samples: int) -> list[tuple[str, float, bool]]:
    """(direction, GB/s, data verified) for h2d then d2h between a host buffer holding the H2D pattern
    and a GPU buffer; the host buffer holds the H2D pattern again afterwards."""
    measured = []
    for direction in ("h2d", "d2h"):
        if direction == "h2d":
            dst, src, seed = on_gpu, host, H2D_SEED
        else:
            dst, src, seed = host, on_gpu, D2H_SEED
            runtime.refill(on_gpu, D2H_SEED)
        gbps = copy_gbps(runtime, dst, src, stream, size_bytes, copies, samples)
        runtime.synchronize(index)
        ok = runtime.matches(dst, seed)
        if direction == "d2h":
            runtime.refill(host, H2D_SEED)
        measured.append((direction, gbps, ok))
    return measured


def _placement(pages_on: set[int] | None, wanted: int, notes: list[str]) -> int:
    """The node a host buffer meant for `wanted` really sits on (what its rows are labelled with);
    a note when a memory policy put it elsewhere."""
    if wanted < 0 or pages_on is None or pages_on == {wanted}:
        return wanted
    if len(pages_on) == 1:
        actual = next(iter(pages_on))
        notes.append(f"the pinned buffer meant for NUMA node {wanted} sits on node {actual} (a memory policy such as "
                     f"numactl --membind overrides first touch); its rows say node {actual}")
        return actual
    notes.append(f"the pinned buffer meant for NUMA node {wanted} is spread over nodes "
                 f"{', '.join(map(str, sorted(pages_on)))}; its rows are labelled node {wanted}")
    return wanted
