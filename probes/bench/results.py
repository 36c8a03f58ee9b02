"""A collective sweep's results as typed rows: what the workers measured, the groups that straggled, and the
:class:`topo.model.measurements.Measurements` they make.

Workers hand rows over as JSON objects (:meth:`SweepRow.from_json` reads one); `bench collectives --json` prints
them back with the same keys (:meth:`SweepRow.to_json`). No torch: the command line and the torchrun worker both
use this to write results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from linkscope.probes.bench.spec import CollectiveSpec
from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.expect import COLLECTIVE_JUDGE_MIN_BYTES, is_below
from linkscope.topo.model.measurements import CollectiveResult, MeasuredOn, Measurements


@frozen
class SweepRow:
    """One (group, op, size) of a collective sweep, as the first rank of the group reports it."""

    op: str
    size_bytes: int
    dtype: str
    time_us: float
    """Time of one call, averaged over the group's ranks."""
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    """Elements that differed from the expected result, summed over the group; None without the correctness pass."""
    group: str
    """`world`, or a layout group's label (`tp0`)."""
    dim: str
    ranks: tuple[int, ...]
    nranks: int
    in_place: bool
    backend: str
    hosts: tuple[str, ...] = ()
    """The distinct hosts of the group's ranks, in rank order."""

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> SweepRow:
        """A row as a worker writes it (JSON object: `bytes` is the size)."""
        return cls(op=row["op"], size_bytes=int(row["bytes"]), dtype=row["dtype"], time_us=float(row["time_us"]),
                   algbw_gbps=float(row["algbw_gbps"]), busbw_gbps=float(row["busbw_gbps"]), wrong=row.get("wrong"),
                   group=row["group"], dim=row.get("dim", row["group"]), ranks=tuple(row.get("ranks", ())),
                   nranks=int(row.get("nranks", len(row.get("ranks", ())))), in_place=bool(row.get("in_place", False)),
                   backend=row.get("backend", ""), hosts=tuple(row.get("hosts", ())))

    def to_json(self) -> dict[str, Any]:
        """The row as workers write it and `bench collectives --json` prints it."""
        return {"op": self.op, "bytes": self.size_bytes, "dtype": self.dtype, "time_us": self.time_us,
                "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps, "wrong": self.wrong, "group": self.group,
                "dim": self.dim, "ranks": list(self.ranks), "nranks": self.nranks, "in_place": self.in_place,
                "backend": self.backend, "hosts": list(self.hosts)}


@frozen
class CollectiveSweep:
    """What a collective sweep gave the command line: its rows, each group's set-up time and notes."""

    rows: tuple[SweepRow, ...]
    setup_ms: tuple[tuple[str, float], ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, result: dict[str, Any]) -> CollectiveSweep:
        """The sweep as the workers' result holds it (`rows`, `setup_ms`, `notes`)."""
        return cls(tuple(SweepRow.from_json(row) for row in result.get("rows", ())),
                   tuple((label, float(ms)) for label, ms in result.get("setup_ms", ())), tuple(result.get("notes", ())))


@frozen
class Straggler:
    """A group well below the fastest group of its dimension at the same op and size."""

    dim: str
    op: str
    size_bytes: int
    group: str
    busbw_gbps: float
    fastest_group: str
    fastest_busbw_gbps: float
    hosts: tuple[str, ...]
    ratio: float
    """Its busbw over the fastest group's."""

    def to_json(self) -> dict[str, Any]:
        """As `bench collectives --json` lists it under `stragglers`."""
        return {"dim": self.dim, "op": self.op, "bytes": self.size_bytes, "group": self.group,
                "busbw_gbps": self.busbw_gbps, "fastest_group": self.fastest_group,
                "fastest_busbw_gbps": self.fastest_busbw_gbps, "hosts": list(self.hosts), "ratio": self.ratio}


def collective_from_row(row: SweepRow) -> CollectiveResult:
    """One sweep row as a CollectiveResult (ranks empty when the whole world ran it)."""
    world = row.group == "world"
    return CollectiveResult(op=row.op, size_bytes=row.size_bytes, dtype=row.dtype, time_us=row.time_us,
                            algbw_gbps=row.algbw_gbps, busbw_gbps=row.busbw_gbps, nranks=row.nranks, wrong=row.wrong,
                            ranks=() if world else row.ranks, in_place=row.in_place, backend=row.backend,
                            group=None if world else row.group, hosts=row.hosts)


def measurements_from_rows(rows: Sequence[SweepRow], setup_ms: Sequence[tuple[str, float]],
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


def stragglers(rows: Sequence[SweepRow]) -> list[Straggler]:
    """Per (dimension, op, size of STRAGGLER_MIN_BYTES or more) run in several groups at once: the
    slowest group, when its busbw against the fastest group's earns a verdict below `ok` (topo.cost.expect) (a slower link
    or contention in that group)."""
    runs: dict[tuple[str, str, int], list[SweepRow]] = {}
    for row in rows:
        if row.group != "world" and row.size_bytes >= STRAGGLER_MIN_BYTES:
            runs.setdefault((row.dim, row.op, row.size_bytes), []).append(row)
    found = []
    for (dim, op, size_bytes), groups in runs.items():
        slowest = min(groups, key=lambda row: row.busbw_gbps)
        fastest = max(groups, key=lambda row: row.busbw_gbps)
        if len(groups) > 1 and fastest.busbw_gbps > 0 and is_below(slowest.busbw_gbps / fastest.busbw_gbps):
            found.append(Straggler(dim, op, size_bytes, slowest.group, slowest.busbw_gbps, fastest.group,
                                   fastest.busbw_gbps, slowest.hosts, slowest.busbw_gbps / fastest.busbw_gbps))
    return found


def order_rows(rows: list[dict[str, Any]], spec: CollectiveSpec) -> list[dict[str, Any]]:
    """Rows in report order: dimension, then op (as asked), size, and group within the dimension."""
    order = {g.label: (d, i) for d, (_, groups) in enumerate(spec.dims) for i, g in enumerate(groups)}
    return sorted(rows, key=lambda r: (order[r["group"]][0], spec.ops.index(r["op"]), r["bytes"], order[r["group"]][1]))
