"""The benchmarks as library calls, for the command line and the app alike (no torch imported here).

Each call spawns workers through :mod:`probes.bench.runner` (own process groups, deadline, full
cleanup) and returns a :class:`BenchOutcome`: finished, or cut short with what was measured before
(a run that measured nothing raises its BenchError).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from linkscope.probes.bench.results import CollectiveSweep, bench_identity, measurements_from_rows, order_rows
from linkscope.probes.bench.runner import BenchError, BenchOutcome, run_workers
from linkscope.probes.bench.spec import CollectiveSpec
from linkscope.probes.bench.step_spec import StepSpec
from linkscope.topo.model.codec import to_jsonable
from linkscope.topo.model.measurements import HostCopy, Measurements, PeerCopy

PEER_FIELDS = ("src", "dst", "size_bytes", "unidir_gbps", "bidir_gbps", "latency_us", "p2p_enabled", "verified")


def run_collectives(spec: CollectiveSpec, timeout_s: float, on_progress: Callable[[int, int], None] | None = None,
                    cancel: threading.Event | None = None, notes: tuple[str, ...] = ()) -> BenchOutcome[CollectiveSweep]:
    """Run a collective sweep on `spec.world_size` local workers; `on_progress(done, total)` per row step."""
    total = spec.steps
    progress = (lambda done: on_progress(done, total)) if on_progress is not None else None
    identity = bench_identity(f"linkscope bench collectives {spec.backend}",
                              processes=spec.world_size if spec.backend == "nccl" else None)
    try:
        result = run_workers("collectives", to_jsonable(spec), spec.world_size, timeout_s, on_progress=progress,
                             cancel=cancel)
    except BenchError as exc:
        kept = order_rows([value for kind, value in exc.kept if kind == "collective"], spec)
        if not kept:
            raise
        partial = CollectiveSweep.from_json({"rows": kept, "notes": [
            *notes, f"run cut short ({exc}): {len(kept)} row(s) measured before it ended"]})
        return BenchOutcome(measurements_from_rows(partial.rows, [], partial.notes, identity=identity), partial, exc)
    sweep = CollectiveSweep.from_json({**result, "notes": [*notes, *result["notes"]]})
    return BenchOutcome(measurements_from_rows(sweep.rows, sweep.setup_ms, sweep.notes, identity=identity), sweep)


def run_peer_copies(pairs: list[tuple[int, int]], size_bytes: int, samples: int, copies: int, host: bool, timeout_s: float,
                    on_progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None,
                    gpu_count: int = 0, notes: tuple[str, ...] = (), pageable: bool = False,
                    local: bool = False) -> BenchOutcome[dict[str, Any]]:
    """Peer copies for `pairs` (and host copies per GPU when `host`; pageable host copies when `pageable`;
    copies within each GPU when `local`) in one worker driving every GPU."""
    spec = {"pairs": pairs, "size_bytes": size_bytes, "samples": samples, "copies": copies, "host": host,
            "pageable": pageable, "local": local}
    total = len(pairs) + gpu_count * (int(host) + int(pageable) + int(local))
    progress = (lambda done: on_progress(done, total)) if on_progress is not None else None
    try:
        result = run_workers("p2p", spec, 1, timeout_s, on_progress=progress, cancel=cancel)
    except BenchError as exc:
        kept: dict[str, list[Any]] = {"devices": [], "peer": [], "refused": [], "host": [], "pageable": [], "local": []}
        for kind, value in exc.kept:
            kept.setdefault(kind, []).append(value)
        if not (kept["devices"] and (kept["peer"] or kept["host"] or kept["pageable"] or kept["local"])):
            raise
        cut = f"run cut short ({exc}): {len(kept['peer'])} pair(s), {len(kept['host'])} host row(s) measured"
        partial = {"devices": kept["devices"][-1], "peer": kept["peer"], "refused": kept["refused"],
                   "host": kept["host"], "pageable": kept["pageable"], "local_copies": kept["local"], "notes": [cut]}
        return BenchOutcome(*_peer_results(partial, notes), exc)
    return BenchOutcome(*_peer_results(result, notes))


def _peer_results(result: dict[str, Any], notes: tuple[str, ...]) -> tuple[Measurements, dict[str, Any]]:
    """The p2p worker's result as Measurements (and the result, its notes completed)."""
    result["notes"] = [*notes, *result["notes"]]
    result["notes"] += [f"host copy GPU {row['gpu']} {row['direction']} NUMA {row['numa_node']}: data did not verify"
                        for row in result["host"] if not row["verified"]]
    measurements = Measurements(
        source="linkscope bench p2p",
        peer_copies=tuple(PeerCopy(**{name: row[name] for name in PEER_FIELDS}) for row in result["peer"]),
        host_copies=tuple(HostCopy(row["gpu"], row["direction"], row["numa_node"], row["size_bytes"], row["gbps"],
                                   verified=row.get("verified"), local=row.get("local"))
                          for row in result["host"]),
        notes=tuple(result["notes"]),
        identity=bench_identity("linkscope bench p2p", result["devices"]),
    )
    return measurements, result


def run_step_experiment(spec: StepSpec, timeout_s: float, on_progress: Callable[[int, int], None] | None = None,
                        cancel: threading.Event | None = None) -> BenchOutcome[dict[str, Any]]:
    """The overlap experiment on `spec.world_size` local workers; `on_progress(done, total)` per mode run.
    A run cut short keeps the modes finished before it ended (`result["runs"]`)."""
    total = len(spec.runs)
    progress = (lambda done: on_progress(done, total)) if on_progress is not None else None
    try:
        return BenchOutcome(None, run_workers("step", to_jsonable(spec), spec.world_size, timeout_s, on_progress=progress,
                                              cancel=cancel))
    except BenchError as exc:
        runs = [value for kind, value in exc.kept if kind == "step"]
        if not runs:
            raise
        return BenchOutcome(None, {"runs": runs, "notes": [f"run cut short ({exc}): modes finished before it are shown"]},
                            exc)


def run_reuse_experiment(spec: CollectiveSpec, timeout_s: float, on_progress: Callable[[int, int], None] | None = None,
                         cancel: threading.Event | None = None) -> BenchOutcome[dict[str, Any]]:
    """all_reduce on a reused process group against a group created per call, per size of `spec`."""
    total = len(spec.sizes_bytes)
    progress = (lambda done: on_progress(done, total)) if on_progress is not None else None
    return BenchOutcome(None, run_workers("reuse", to_jsonable(spec), spec.world_size, timeout_s, on_progress=progress,
                                          cancel=cancel))
