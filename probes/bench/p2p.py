"""Worker side of `bench p2p`: every requested GPU pair, then the host copies of every GPU (and on
request pageable host copies and copies within each GPU), within the free GPU memory; a pair CUDA
refuses is listed and the others go on. The copies themselves are
:mod:`probes.bench.copies`; the host side is :mod:`probes.bench.hostcopy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linkscope.probes.bench.copies import CopyRuntime, measure_local_copy, measure_pair
from linkscope.probes.bench.hostcopy import measure_host_copies, measure_pageable_copies


def run_p2p(spec: dict[str, Any], progress: Callable[..., None], runtime: CopyRuntime | None = None,
            sysfs_root: str = "/", keep: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Every requested pair, then host copies per GPU; the result dict the command renders.

    The copy size is lowered to an eighth of the smallest free GPU memory when it would not fit
    (a pair holds four buffers of that size). A pair CUDA refuses (peer mappings exhausted, out of
    memory...) is listed under `refused` with its reason, and the other pairs go on. `keep(kind,
    value)` receives the devices, then each `peer`, `refused` and `host` row as soon as it is known
    (what survives a run cut short).
    """
    def kept(kind: str, value: Any) -> None:
        if keep is not None:
            keep(kind, value)

    if runtime is None:
        from linkscope.probes.bench.cuda_copies import TorchCuda

        runtime = TorchCuda()
    devices = [runtime.device_info(index) for index in range(runtime.device_count())]
    kept("devices", devices)
    notes: list[str] = []
    size_bytes = int(spec["size_bytes"])
    budget = min(device["free_bytes"] for device in devices) // 8 if devices else 0
    if size_bytes > budget:
        notes.append(f"copy size lowered from {size_bytes} to {budget} B to fit free GPU memory")
        size_bytes = budget
    size_bytes -= size_bytes % 4
    peer: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for src, dst in spec["pairs"]:
        try:
            peer.append(measure_pair(runtime, src, dst, size_bytes, spec["copies"], spec["samples"]))
            kept("peer", peer[-1])
        except RuntimeError as exc:  # CUDA refused this pair (peer mappings exhausted, out of memory...)
            refused.append({"src": src, "dst": dst, "reason": str(exc).splitlines()[0] if str(exc) else type(exc).__name__})
            kept("refused", refused[-1])
        progress("pair", src, dst)
    host: list[dict[str, Any]] = []
    if spec["host"]:
        host, host_notes = measure_host_copies(runtime, devices, size_bytes, spec["copies"], spec["samples"], progress,
                                               sysfs_root, kept)
        notes.extend(host_notes)
    pageable: list[dict[str, Any]] = []
    if spec.get("pageable"):
        pageable, pageable_notes = measure_pageable_copies(runtime, devices, size_bytes, spec["copies"], spec["samples"],
                                                           progress, sysfs_root, kept)
        notes.extend(note for note in pageable_notes if note not in notes)
    local: list[dict[str, Any]] = []
    for device in devices if spec.get("local") else ():
        local.append(measure_local_copy(runtime, device["index"], size_bytes, spec["copies"], spec["samples"]))
        kept("local", local[-1])
        progress("local", device["index"])
    return {"devices": devices, "peer": peer, "refused": refused, "host": host, "pageable": pageable,
            "local_copies": local, "notes": notes}
