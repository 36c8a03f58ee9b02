"""Meaning checks on a decoded snapshot or measurements: what the type checks of the codec cannot see.

A hand-edited or damaged file can be well-typed and still describe an impossible machine: a link
to a GPU that does not exist, a GPU linked to itself, two GPUs with one index, `NV0`, a PCIe width
of 0, a bandwidth of -50 GB/s. Used as they are, such values crash the renderers (KeyError,
ZeroDivisionError, `min()` of nothing) or turn into findings that quote them. The codec runs these
checks after decoding; the first violation is one InputError line with the JSON path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import (
    MAX_GPUS_PER_HOST,
    MAX_HOSTS,
    MAX_NVLINK_GEN,
    MAX_NVLINKS_PER_PAIR,
    MAX_PCIE_GEN,
    MAX_WORLD_RANKS,
)
from linkscope.topo.common.text import comparable
from linkscope.topo.model.host import Gpu, Host, Link, LinkKind, parse_link_token
from linkscope.topo.model.measurements import CollectiveResult, HostCopy, Measurements, PeerCopy
from linkscope.topo.model.snapshot import P2P_STATUS_TOKENS, Snapshot

PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
"""Link widths the PCIe specification defines."""
HOST_COPY_DIRECTIONS = ("h2d", "d2h")


def _fail(path: str, message: str) -> None:
    raise InputError(f"{path}: {message}")


def _non_negative(value: float | None, path: str, unit: str = "") -> None:
    if value is None:
        return
    if not math.isfinite(value) or value < 0:
        _fail(path, f"{value}{unit} is not a finite number >= 0")


def _optional_range(value: int | None, path: str, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        _fail(path, f"{value} is outside {low}..{high}")


def validate_snapshot(snapshot: Snapshot, path: str = "$") -> None:
    """InputError `<json path>: <problem>` for the first impossible fact in `snapshot`."""
    if not snapshot.hosts:
        _fail(f"{path}.hosts", "no hosts")
    if len(snapshot.hosts) > MAX_HOSTS:
        _fail(f"{path}.hosts", f"{len(snapshot.hosts):,} hosts, above the cap of {MAX_HOSTS:,} (topo/common/limits.py)")
    for number, host in enumerate(snapshot.hosts):
        _validate_host(host, f"{path}.hosts[{number}]", several=len(snapshot.hosts) > 1)
    if snapshot.measurements is not None:
        validate_measurements(snapshot.measurements, f"{path}.measurements")


def _validate_host(host: Host, path: str, several: bool) -> None:
    count = len(host.gpus)
    if several and count == 0:
        _fail(f"{path}.gpus", f"host {host.hostname!r} of a multi-host snapshot has no GPUs")
    if count > MAX_GPUS_PER_HOST:
        _fail(f"{path}.gpus", f"{count:,} GPUs, above the cap of {MAX_GPUS_PER_HOST:,} per host (topo/common/limits.py)")
    indices: set[int] = set()
    for position, gpu in enumerate(host.gpus):
        if gpu.index < 0:
            _fail(f"{path}.gpus[{position}].index", f"negative GPU index {gpu.index}")
        if gpu.index in indices:
            _fail(f"{path}.gpus[{position}].index", f"GPU index {gpu.index} appears twice")
        indices.add(gpu.index)
        _validate_gpu(gpu, path, position)
    seen: dict[tuple[int, int], Link] = {}
    for number, link in enumerate(host.links):
        _validate_link(link, path, number, count)
        pair = (link.a, link.b)
        if pair in seen and seen[pair] != link:
            _fail(f"{path}.links[{number}]", f"a second, different link between GPU positions {link.a} and {link.b}")
        seen[pair] = link
    nic_names: set[str] = set()
    for number, nic in enumerate(host.nics):
        where = f"{path}.nics[{number}]"
        if comparable(nic.name) in nic_names:
            _fail(f"{where}.name", f"NIC {nic.name!r} appears twice")
        nic_names.add(comparable(nic.name))
        _non_negative(nic.rate_gbit_per_s, f"{where}.rate_gbit_per_s", " Gb/s")
        _optional_range(nic.numa_node, f"{where}.numa_node", 0, MAX_GPUS_PER_HOST)
    for row_number, row in enumerate(host.gpu_nic):
        if not _LEGEND_TOKENS.issuperset(row):
            for column, token in enumerate(row):
                _check_token(token, f"{path}.gpu_nic[{row_number}][{column}]")
    numa_ids: set[int] = set()
    for number, node in enumerate(host.numa_nodes):
        where = f"{path}.numa_nodes[{number}]"
        if node.id < 0 or node.id in numa_ids:
            _fail(f"{where}.id", f"NUMA node id {node.id} is negative or appears twice")
        numa_ids.add(node.id)
        _non_negative(node.memory_bytes, f"{where}.memory_bytes")
        for column, distance in enumerate(node.distances):
            _non_negative(distance, f"{where}.distances[{column}]")


_LEGEND_TOKENS = frozenset(["?", *(kind.value for kind in LinkKind if kind is not LinkKind.NVLINK),
                            *(f"NV{count}" for count in range(1, MAX_NVLINKS_PER_PAIR + 1))])
"""Tokens :func:`_check_token` accepts, in their usual spelling: a row of only these needs no closer look."""


def _check_token(token: str, path: str) -> None:
    if token == "?":
        return
    try:
        kind, count = parse_link_token(token)
    except ValueError:
        _fail(path, f"{token!r} is not an `nvidia-smi topo -m` legend token")
        return
    if kind is LinkKind.NVLINK and not 1 <= count <= MAX_NVLINKS_PER_PAIR:
        _fail(path, f"{token!r}: NVLink count must be 1..{MAX_NVLINKS_PER_PAIR}")


def _validate_gpu(gpu: Gpu, host_path: str, position: int) -> None:
    path = f"{host_path}.gpus[{position}]"
    _optional_range(gpu.numa_node, f"{path}.numa_node", 0, MAX_GPUS_PER_HOST)
    _optional_range(gpu.gpu_numa_id, f"{path}.gpu_numa_id", 0, MAX_GPUS_PER_HOST)
    _non_negative(gpu.memory_total_bytes, f"{path}.memory_total_bytes")
    _optional_range(gpu.pcie_gen_current, f"{path}.pcie_gen_current", 1, MAX_PCIE_GEN)
    _optional_range(gpu.pcie_gen_max, f"{path}.pcie_gen_max", 1, MAX_PCIE_GEN)
    for field in ("pcie_width_current", "pcie_width_max"):
        width = getattr(gpu, field)
        if width is not None and width not in PCIE_WIDTHS:
            _fail(f"{path}.{field}", f"PCIe width {width} is not one of {', '.join(map(str, PCIE_WIDTHS))}")
    if len(gpu.nvlinks) > MAX_NVLINKS_PER_PAIR:
        _fail(f"{path}.nvlinks", f"{len(gpu.nvlinks)} NVLinks, more than {MAX_NVLINKS_PER_PAIR}")
    ports: set[int] = set()
    for number, port in enumerate(gpu.nvlinks):  # 18 a GPU: the JSON path is only written for a fault
        if port.link < 0 or port.link in ports:
            _fail(f"{path}.nvlinks[{number}].link", f"NVLink {port.link} is negative or appears twice")
        ports.add(port.link)
        if port.version is not None and not 1 <= port.version <= MAX_NVLINK_GEN:
            _optional_range(port.version, f"{path}.nvlinks[{number}].version", 1, MAX_NVLINK_GEN)


def _validate_link(link: Link, host_path: str, number: int, gpu_count: int) -> None:
    def where(field: str = "") -> str:  # a cluster has millions of links: the JSON path is written for a fault only
        return f"{host_path}.links[{number}]{field}"

    for end, position in (("a", link.a), ("b", link.b)):
        if not 0 <= position < gpu_count:
            _fail(where(f".{end}"), f"GPU position {position} does not exist (the host has {gpu_count} GPUs)")
    if link.a == link.b or link.kind is LinkKind.SELF:
        _fail(where(), f"a link from GPU position {link.a} to itself")
    if link.a > link.b:
        _fail(where(), f"a ({link.a}) must be the lower GPU position, b ({link.b}) the higher")
    if link.kind is LinkKind.NVLINK:
        if not 1 <= link.nvlink_count <= MAX_NVLINKS_PER_PAIR:
            _fail(where(".nvlink_count"), f"NVLink count {link.nvlink_count} is outside 1..{MAX_NVLINKS_PER_PAIR}")
    elif link.nvlink_count != 0:
        _fail(where(".nvlink_count"), f"NVLink count {link.nvlink_count} on a {link.kind.value} link (must be 0)")
    if link.nvlink_gen is not None and not 1 <= link.nvlink_gen <= MAX_NVLINK_GEN:
        _optional_range(link.nvlink_gen, where(".nvlink_gen"), 1, MAX_NVLINK_GEN)
    if link.p2p is not None:
        for field, token in (("read", link.p2p.read), ("write", link.p2p.write), ("nvlink", link.p2p.nvlink),
                             ("atomics", link.p2p.atomics)):
            if token is not None and token not in P2P_STATUS_TOKENS:
                _fail(where(f".p2p.{field}"), f"{token!r} is not one of {', '.join(P2P_STATUS_TOKENS)}")


def validate_measurements(measurements: Measurements, path: str = "$") -> None:
    """InputError `<json path>: <problem>` for the first impossible number in `measurements`."""
    for number, copy in enumerate(measurements.peer_copies):
        _validate_peer_copy(copy, f"{path}.peer_copies[{number}]")
    for number, host_copy in enumerate(measurements.host_copies):
        _validate_host_copy(host_copy, f"{path}.host_copies[{number}]")
    for number, result in enumerate(measurements.collectives):
        _validate_collective(result, f"{path}.collectives[{number}]")
    for number, (_, setup_ms) in enumerate(measurements.group_setup_ms):
        _non_negative(setup_ms, f"{path}.group_setup_ms[{number}][1]", " ms")


def _validate_peer_copy(copy: PeerCopy, path: str) -> None:
    for end in ("src", "dst"):
        _optional_range(getattr(copy, end), f"{path}.{end}", 0, MAX_GPUS_PER_HOST)
    if copy.src == copy.dst:
        _fail(path, f"a copy from GPU {copy.src} to itself")
    _non_negative(copy.size_bytes, f"{path}.size_bytes")
    for field in ("unidir_gbps", "bidir_gbps", "latency_us"):
        _non_negative(getattr(copy, field), f"{path}.{field}")


def _validate_host_copy(copy: HostCopy, path: str) -> None:
    _optional_range(copy.gpu, f"{path}.gpu", 0, MAX_GPUS_PER_HOST)
    if copy.direction not in HOST_COPY_DIRECTIONS:
        _fail(f"{path}.direction", f"{copy.direction!r} is not h2d or d2h")
    _optional_range(copy.numa_node, f"{path}.numa_node", 0, MAX_GPUS_PER_HOST)
    _non_negative(copy.size_bytes, f"{path}.size_bytes")
    _non_negative(copy.gbps, f"{path}.gbps", " GB/s")


def _validate_collective(result: CollectiveResult, path: str) -> None:
    _non_negative(result.size_bytes, f"{path}.size_bytes")
    for field in ("time_us", "algbw_gbps", "busbw_gbps"):
        _non_negative(getattr(result, field), f"{path}.{field}")
    _non_negative(result.wrong, f"{path}.wrong")
    if result.nranks is not None:
        _optional_range(result.nranks, f"{path}.nranks", 1, MAX_WORLD_RANKS)
    if result.ranks:
        if result.nranks is not None and len(result.ranks) != result.nranks:
            _fail(f"{path}.ranks", f"{len(result.ranks)} ranks listed for nranks {result.nranks}")
        _unique_non_negative(result.ranks, f"{path}.ranks")


def _unique_non_negative(values: Iterable[int], path: str) -> None:
    seen: set[int] = set()
    for number, value in enumerate(values):
        if value < 0 or value in seen:
            _fail(f"{path}[{number}]", f"rank {value} is negative or appears twice")
        seen.add(value)
