"""Before a GPU benchmark: is there a CUDA GPU, and are the GPUs to be used idle with memory free?

GPU state comes from NVML through the query wrapper of :mod:`probes.nvml_query` (compute processes, free
memory), so the check creates no CUDA context. torch is imported lazily, only to count devices.
"""

from __future__ import annotations

import os
from typing import Any

from linkscope.probes.nvml import load_pynvml
from linkscope.probes.nvml_query import NvmlQuery, decode
from linkscope.topo.common.frozen import frozen

MIN_FREE_BYTES = 2 * 1024**3
"""A GPU with less free memory than this is refused (without --force)."""


@frozen
class GpuState:
    """What NVML says about one GPU before a run (`nvidia-smi --query-gpu=memory.free` and `--query-compute-apps`)."""

    nvml_index: int
    uuid: str | None
    free_bytes: int | None
    total_bytes: int | None
    processes: int | None
    """Compute processes on the GPU (None when NVML could not tell)."""


def cuda_device_count() -> int:
    """Number of CUDA GPUs torch sees (0 without torch's CUDA build or without a driver)."""
    try:
        import torch
    except ImportError:
        return 0
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except RuntimeError:
        return 0


def read_gpu_states(nvml: Any | None = None) -> list[GpuState] | None:
    """Every GPU's state from NVML (pynvml, or a module with the same functions), or None when NVML is not available."""
    module = nvml if nvml is not None else load_pynvml()
    if module is None:
        return None
    query = NvmlQuery(module)
    if query("nvmlInit") is None and query.last_reason is not None:
        return None
    try:
        count = query("nvmlDeviceGetCount")
        states = []
        for index in range(int(count or 0)):
            handle = query("nvmlDeviceGetHandleByIndex", index, gpu=index)
            if handle is None:
                continue
            uuid = query("nvmlDeviceGetUUID", handle, gpu=index)
            memory = query("nvmlDeviceGetMemoryInfo", handle, gpu=index)
            processes = query("nvmlDeviceGetComputeRunningProcesses", handle, gpu=index)
            states.append(GpuState(
                nvml_index=index,
                uuid=decode(uuid) if uuid is not None else None,
                free_bytes=int(memory.free) if memory is not None else None,
                total_bytes=int(memory.total) if memory is not None else None,
                processes=len(processes) if processes is not None else None,
            ))
        return states
    finally:
        query("nvmlShutdown")


def states_in_use(states: list[GpuState], count: int, visible: str | None, pci_order: bool) -> list[GpuState]:
    """The GPUs a run of `count` devices will use, given CUDA_VISIBLE_DEVICES (`visible`).

    Indices map to NVML indices only in PCI bus order (the workers set CUDA_DEVICE_ORDER=PCI_BUS_ID);
    entries this cannot map (MIG devices, a user order) make every GPU count, erring on the safe side.
    """
    if visible is None:
        return [state for state in states if state.nvml_index < count] if pci_order else list(states)
    chosen: list[GpuState] = []
    for entry in [part.strip() for part in visible.split(",") if part.strip()][:count]:
        if entry.startswith("GPU-"):
            match = [state for state in states if state.uuid is not None and state.uuid.startswith(entry)]
        elif entry.isdigit() and pci_order:
            match = [state for state in states if state.nvml_index == int(entry)]
        else:
            return list(states)
        if not match:
            return list(states)
        chosen.extend(match)
    return chosen


def problems(states: list[GpuState], min_free_bytes: int = MIN_FREE_BYTES) -> list[str]:
    """Why each GPU should not be benchmarked now: other processes on it, or too little free memory."""
    found = []
    for state in states:
        if state.processes:
            found.append(f"GPU {state.nvml_index} runs {state.processes} other compute process(es)")
        if state.free_bytes is not None and state.free_bytes < min_free_bytes:
            found.append(f"GPU {state.nvml_index} has only {state.free_bytes / 1024**3:.1f} GiB free")
    return found


def gpu_preflight(count: int, force: bool) -> list[str]:
    """Check the GPUs a run will use; returns notes, raises nothing. The caller refuses on problems
    unless `force` (then they become notes)."""
    states = read_gpu_states()
    if states is None:
        return ["could not check the GPUs for other processes (NVML not available)"]
    pci_order = os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID") == "PCI_BUS_ID"
    used = states_in_use(states, count, os.environ.get("CUDA_VISIBLE_DEVICES"), pci_order)
    found = problems(used)
    if found and not force:
        raise GpuBusy("; ".join(found) + " (use --force to run anyway)")
    return [f"--force: {problem}" for problem in found]


class GpuBusy(Exception):
    """A GPU to be benchmarked is in use or short of memory."""
