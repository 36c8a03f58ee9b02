"""Pure side of `bench p2p`: which pairs, verification, matrices with expected speed and ratio.

No torch: the command line and the unit tests use this; :mod:`probes.bench.p2p` measures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.expect import Expected, Verdict, copy_judged, is_below, speed_ratio, verdict
from linkscope.topo.machine.links import LinkSpeed, link_speed
from linkscope.topo.model.findings import Finding
from linkscope.topo.model.host import Host, LinkKind, parse_link_token
from linkscope.topo.model.measurements import PeerCopy

_PAIR = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*\Z")
_BUS_ID = re.compile(r"\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?\s*\Z")


def all_pairs(count: int) -> list[tuple[int, int]]:
    """Every ordered pair of distinct devices, row by row."""
    return [(src, dst) for src in range(count) for dst in range(count) if src != dst]


def parse_pairs(text: str | None, count: int) -> list[tuple[int, int]]:
    """`--pairs 0-1,2-3` as ordered (src, dst) pairs; every ordered pair when None."""
    if text is None:
        return all_pairs(count)
    pairs: list[tuple[int, int]] = []
    for part in text.split(","):
        match = _PAIR.match(part)
        if not match:
            raise InputError(f"--pairs: {part.strip()!r} is not SRC-DST (example: 0-1,2-3)")
        src, dst = int(match.group(1)), int(match.group(2))
        for device in (src, dst):
            if device >= count:
                raise InputError(f"--pairs: GPU {device} does not exist ({count} CUDA GPU(s) visible)")
        if src == dst:
            raise InputError(f"--pairs: {part.strip()} copies a GPU to itself")
        if (src, dst) not in pairs:
            pairs.append((src, dst))
    return pairs


def bus_id_key(bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI bus id in any spelling (`00000000:18:00.0`, `0000:18:00`, `18:00.0`)."""
    match = _BUS_ID.match(bus_id)
    if not match:
        return None
    domain = int(match.group(1), 16) if match.group(1) else 0
    return domain, int(match.group(2), 16), int(match.group(3), 16)


def positions_by_bus_id(host: Host, cuda_bus_ids: Sequence[str | None]) -> list[int | None]:
    """For each CUDA device, the position of the same GPU in `host.gpus` (matched by PCI bus id)."""
    index = {}
    for position, gpu in enumerate(host.gpus):
        key = bus_id_key(gpu.pci_bus_id) if gpu.pci_bus_id else None
        if key is not None:
            index[key] = position
    result: list[int | None] = []
    for bus_id in cuda_bus_ids:
        key = bus_id_key(bus_id) if bus_id else None
        result.append(index.get(key) if key is not None else None)
    return result


@frozen
class PairCell:
    """One cell of the peer-copy matrix: what was measured and what the link should do."""

    src: int
    dst: int
    measured_gbps: float | None
    expected: LinkSpeed | None
    link_token: str | None

    @property
    def ratio(self) -> float | None:
        """Measured / typical expected bandwidth, when both are known."""
        return speed_ratio(self.measured_gbps, self.expected.typical_gbps if self.expected is not None else None)

    @property
    def verdict(self) -> Verdict | None:
        """The shared verdict of the ratio (:func:`topo.cost.expect.verdict`)."""
        return verdict(self.ratio)


def pair_cells(copies: Sequence[PeerCopy], host: Host | None, positions: Sequence[int | None],
               bidir: bool = False) -> list[PairCell]:
    """Cells for every measured pair: bandwidth (uni or bidirectional) with the expected link speed.

    For a bidirectional copy the expectation is twice the per-direction link speed.
    """
    cells = []
    for copy in copies:
        measured = copy.bidir_gbps if bidir else copy.unidir_gbps
        expected: LinkSpeed | None = None
        token: str | None = None
        a = positions[copy.src] if copy.src < len(positions) else None
        b = positions[copy.dst] if copy.dst < len(positions) else None
        if host is not None and a is not None and b is not None:
            try:
                link = host.link(a, b)
            except KeyError:
                link = None
            if link is not None:
                speed = link_speed(host, link)
                factor = 2.0 if bidir else 1.0
                expected = LinkSpeed(speed.spec_gbps * factor, speed.typical_gbps * factor, speed.basis)
                token = link.token
        cells.append(PairCell(copy.src, copy.dst, measured, expected, token))
    return cells


def matched_line(positions: Sequence[int | None], count: int, against: str) -> str:
    """Where the measured GPUs were placed, in one line: CUDA devices matched to the snapshot's GPUs by PCI bus id."""
    found = sum(1 for position in positions if position is not None)
    if not found:
        return f"{count} GPU(s): none matched to {against}'s GPUs by PCI bus id, so no copy is priced"
    return f"{count} GPU(s): {found} matched to {against}'s GPUs by PCI bus id"


def pair_expected(cell: PairCell, copy: PeerCopy, placed: str = "") -> Expected:
    """A pair's unidirectional copy as a row next to its link's figure, judged when large enough
    (:func:`topo.cost.expect.copy_judged`); `placed` is the line that says how its GPUs were matched."""
    return Expected("peer", f"GPU{copy.src}->GPU{copy.dst}", "unidir", cell.measured_gbps or 0.0,
                    cell.expected.typical_gbps if cell.expected is not None else None, cell.link_token or "?",
                    judged=cell.measured_gbps is not None and copy_judged(copy.size_bytes),
                    size_bytes=copy.size_bytes or 0, placement=placed)


def host_expected(row: dict[str, Any], placed: str = "") -> Expected:
    """A host<->GPU copy row (`gpu`, `direction`, `numa_node`, `local`, `gbps`, `expected_gbps`) next to its PCIe
    link's figure; judged only from the GPU's own NUMA node and when large enough."""
    return Expected("host", f"GPU{row['gpu']} {row['direction']} NUMA {row['numa_node']}", "host copy", row["gbps"],
                    row["expected_gbps"], "PCIe", judged=bool(row["local"]) and copy_judged(row.get("size_bytes")),
                    size_bytes=row.get("size_bytes") or 0, placement=placed, limited_by="pcie")


def matrix(count: int, values: dict[tuple[int, int], float | None]) -> list[list[float | None]]:
    """A count x count matrix (rows: source, columns: destination) with None where nothing was measured."""
    return [[values.get((src, dst)) for dst in range(count)] for src in range(count)]


@frozen
class CopyFinding(Finding):
    """What a copy benchmark found wrong with one path: its data, its P2P, or its speed.

    `code`: `copy-corrupted`, `p2p-unavailable`, `copy-slow`, `pair-not-measured`, `host-copy-corrupted` or
    `host-copy-slow`; `severity`: `error` (data) or `warning` (speed, P2P)."""

    path: str
    """`0->1` for a GPU pair, `GPU 0 h2d NUMA 1` for a host copy."""
    message: str


"""Smallest copy judged for speed (the rule of :mod:`topo.cost.expect`)."""


def copy_findings(cells: Sequence[PairCell], copies: Sequence[PeerCopy], host_rows: Sequence[dict[str, Any]],
                  refused: Sequence[dict[str, Any]] = ()) -> list[CopyFinding]:
    """Findings over peer copies (with their unidirectional cells) and host-copy rows.

    Data that did not arrive intact is an error. A warning for GPUs joined by NVLink that CUDA
    gives no peer access (copies then go through host memory), and, for copies large enough to judge
    (:func:`topo.cost.expect.copy_judged`), for a pair whose verdict against what its link typically delivers
    is not `ok` (below topo.cost.expect.SLOW_FRACTION) and for such a copy from the GPU's own NUMA node against
    its PCIe link (remote nodes are expected to be slower). A pair CUDA refused to copy is a warning too.
    """
    findings = [CopyFinding("pair-not-measured", "warning", f"{row['src']}->{row['dst']}",
                            f"{row['src']}->{row['dst']}: not measured: {row['reason']}") for row in refused]
    for cell, copy in zip(cells, copies, strict=True):
        path = f"{copy.src}->{copy.dst}"
        if copy.verified is False:
            findings.append(CopyFinding("copy-corrupted", "error", path,
                                        f"{path}: copied data did not arrive intact; do not trust P2P on this path"))
        if copy.p2p_enabled is False and cell.link_token and parse_link_token(cell.link_token)[0] is LinkKind.NVLINK:
            findings.append(CopyFinding("p2p-unavailable", "warning", path,
                                        f"{path}: the GPUs share NVLink ({cell.link_token}) but CUDA gives no peer access, "
                                        "so copies go through host memory"))
        ratio = cell.ratio
        if copy_judged(copy.size_bytes) and is_below(ratio) and cell.expected is not None and cell.measured_gbps is not None:
            findings.append(CopyFinding("copy-slow", "warning", path,
                                        f"{path} ({cell.link_token}): {format_gbps(cell.measured_gbps, '.1f')} is "
                                        f"{ratio:.0%} of the {format_gbps(cell.expected.typical_gbps, '.1f')} this link "
                                        "typically delivers"))
    for row in host_rows:
        node = "its own NUMA node" if row["local"] else "NUMA node"
        path = f"GPU {row['gpu']} {row['direction']} NUMA {row['numa_node']}"
        if not row["verified"]:
            findings.append(CopyFinding("host-copy-corrupted", "error", path,
                                        f"GPU {row['gpu']} {row['direction']} from {node} {row['numa_node']}: "
                                        "copied data did not arrive intact"))
        expected = row.get("expected_gbps")
        ratio = speed_ratio(row["gbps"], expected)
        if copy_judged(row.get("size_bytes")) and row["local"] and is_below(ratio) and expected is not None:
            findings.append(CopyFinding("host-copy-slow", "warning", path,
                                        f"GPU {row['gpu']} {row['direction']} from {node} {row['numa_node']}: "
                                        f"{format_gbps(row['gbps'], '.1f')} is {ratio:.0%} of the {format_gbps(expected, '.1f')} "
                                        "its PCIe link typically delivers (link trained down or a narrow slot?)"))
    return findings


def nodes_to_test(gpu_node: int | None, nodes: dict[int, set[int]], distances: dict[int, tuple[int, ...]]) -> list[int]:
    """The GPU's own node first, then the farthest other node with CPUs this process may use;
    the first two such nodes when the GPU's node is unknown."""
    with_cpus = sorted(node for node, cpus in nodes.items() if cpus)
    if gpu_node is None or gpu_node not in with_cpus:
        return with_cpus[:2]
    others = [node for node in with_cpus if node != gpu_node]
    if not others:
        return [gpu_node]
    row = distances.get(gpu_node, ())
    farthest = max(others, key=lambda node: (row[node] if node < len(row) else 0, -node))
    return [gpu_node, farthest]


def vs_local(host_rows: Sequence[dict[str, Any]]) -> list[float | None]:
    """Per host-copy row, its GB/s over the same GPU and direction's GB/s from the GPU's own NUMA
    node (the NUMA penalty: below 1 on a remote node); None for local rows and where no local row exists."""
    local = {(row["gpu"], row["direction"]): row["gbps"] for row in host_rows if row["local"]}
    ratios: list[float | None] = []
    for row in host_rows:
        own = local.get((row["gpu"], row["direction"]))
        ratios.append(None if row["local"] or not own else row["gbps"] / own)
    return ratios
