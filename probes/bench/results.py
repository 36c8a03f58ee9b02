"""Worker rows (the JSON rows `bench collectives --json` prints) -> :class:`topo.model.measurements.Measurements`.

No torch: the command line and the torchrun worker both use this to write results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from linkscope.probes.bench.spec import CollectiveSpec
from linkscope.topo.cost.expect import COLLECTIVE_JUDGE_MIN_BYTES, is_below
from linkscope.topo.model.measurements import CollectiveResult, MeasuredOn, Measurements


def collective_from_row(row: dict[str, Any]) -> CollectiveResult:
    """One worker row as a CollectiveResult (ranks empty when the whole world ran it)."""
    ranks = () if row["group"] == "world" else tuple(row["ranks"])
    return CollectiveResult(
        op=row["op"],
        size_bytes=int(row["bytes"]),
        dtype=row["dtype"],
        time_us=float(row["time_us"]),
        algbw_gbps=float(row["algbw_gbps"]),
        busbw_gbps=float(row["busbw_gbps"]),
        nranks=int(row["nranks"]),
        wrong=row["wrong"],
        ranks=ranks,
        in_place=bool(row["in_place"]),
        backend=row["backend"],
        group=None if row["group"] == "world" else row["group"],
        hosts=tuple(row.get("hosts", ())),
    )


def measurements_from_rows(rows: Sequence[dict[str, Any]], setup_ms: Sequence[tuple[str, float]],
                           notes: Sequence[str], source: str = "linkscope bench collectives",
                           identity: MeasuredOn | None = None) -> Measurements:
    """Collect a sweep's rows, group set-up times and notes into Measurements."""
    return Measurements(
        source=source,
        collectives=tuple(collective_from_row(row) for row in rows),
        group_setup_ms=tuple((label, float(ms)) for label, ms in setup_ms),
        notes=tuple(notes),
        identity=identity,
    )


def bench_identity(tool: str, devices: Sequence[dict[str, Any]] = (), processes: int | None = None) -> MeasuredOn:
    """What a run of ours measured: this host, the CUDA devices it drove (name, bus id) or its process
    count, and this linkscope's version."""
    import socket
    from importlib import metadata

    try:
        version: str | None = metadata.version("linkscope")
    except metadata.PackageNotFoundError:
        version = None
    names = sorted({str(device["name"]) for device in devices if device.get("name")})
    bus_ids = tuple(str(device["pci_bus_id"]) for device in devices if device.get("pci_bus_id"))
    return MeasuredOn(
        gpu_model=" / ".join(names) or None,
        gpu_count=len(devices) or processes,
        hosts=(socket.gethostname(),),
        pci_bus_ids=bus_ids if len(bus_ids) == len(devices) else (),
        tool=tool,
        tool_version=version,
    )



STRAGGLER_MIN_BYTES = COLLECTIVE_JUDGE_MIN_BYTES
"""Smallest size judged for stragglers: below it a collective is latency-bound and its busbw mostly noise."""


def stragglers(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (dimension, op, size of STRAGGLER_MIN_BYTES or more) run in several groups at once: the
    slowest group, when its busbw against the fastest group's earns a verdict below `ok` (topo.cost.expect) (a slower link
    or contention in that group)."""
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        if row["group"] != "world" and int(row["bytes"]) >= STRAGGLER_MIN_BYTES:
            runs.setdefault((row["dim"], row["op"], int(row["bytes"])), []).append(row)
    found = []
    for (dim, op, size_bytes), groups in runs.items():
        slowest = min(groups, key=lambda row: row["busbw_gbps"])
        fastest = max(groups, key=lambda row: row["busbw_gbps"])
        if len(groups) > 1 and fastest["busbw_gbps"] > 0 and is_below(slowest["busbw_gbps"] / fastest["busbw_gbps"]):
            found.append({"dim": dim, "op": op, "bytes": size_bytes, "group": slowest["group"],
                          "busbw_gbps": slowest["busbw_gbps"], "fastest_group": fastest["group"],
                          "fastest_busbw_gbps": fastest["busbw_gbps"], "hosts": list(slowest.get("hosts", [])),
                          "ratio": slowest["busbw_gbps"] / fastest["busbw_gbps"]})
    return found


def order_rows(rows: list[dict[str, Any]], spec: CollectiveSpec) -> list[dict[str, Any]]:
    """Rows in report order: dimension, then op (as asked), size, and group within the dimension."""
    order = {g.label: (d, i) for d, (_, groups) in enumerate(spec.dims) for i, g in enumerate(groups)}
    return sorted(rows, key=lambda r: (order[r["group"]][0], spec.ops.index(r["op"]), r["bytes"], order[r["group"]][1]))
