"""The flat machine description the C stand-in serves, written from a :class:`~support.fakes.fake_nvml.FakeNvml`.

One description, two fakes: every line is what the Python fake itself answers to that call (asked
with its faults switched off), keyed by the C symbol pynvml resolves for it, so the C library and
the Python fake cannot drift apart. Faults, delays and quirks that live in C are written as
separate lines (see `standin.c` for the format).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from support.fakes.fake_nvml import (
    _FI_DL_ERRORS,
    _FI_LEGACY_ERROR_TOTALS,
    _FI_NVLINK5_COUNTS,
    MAX_MIG_DEVICES,
    NVML_CLOCK_MEM,
    NVML_CLOCK_SM,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_NVLINK_MAX_LINKS,
    SCOPE_ALL_LINKS,
    FakeHandle,
    FakeNvml,
    NVMLError,
    c_nvmlGpuFabricInfoV_t,
)

C_SYMBOLS: dict[str, str] = {
    "nvmlInit": "nvmlInitWithFlags",
    "nvmlDeviceGetCount": "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex": "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetPciInfo": "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetNvLinkRemotePciInfo": "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses": "nvmlDeviceGetComputeRunningProcesses_v3",
}
"""pynvml function -> the C symbol it resolves (read from pynvml's source); others keep their name."""

PER_LINK_FIELDS = (165, 166, 138, 139, *_FI_DL_ERRORS, *_FI_NVLINK5_COUNTS)
GPU_FIELDS = (91, 147, *_FI_LEGACY_ERROR_TOTALS)
CPU_SET_WORDS, NODE_SET_WORDS = 64, 4
P2P_INDICES = range(5)
HANG_S = 30.0
"""How long a hung C call blocks (the probe's budget is far shorter)."""


def c_symbol(function: str) -> str:
    """The C symbol pynvml calls for a pynvml function name."""
    return C_SYMBOLS.get(function, function)


def _device(handle: FakeHandle) -> str:
    return f"{handle.index}" if handle.mig is None else f"{handle.index}m{handle.mig}"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def answer(self, key: str, call: Callable[[], Any], encode: Callable[[Any], str] = str) -> Any:
        """Write the fake's answer to `call` under `key` (NotSupported, the C default, is left out)."""
        try:
            value = call()
        except NVMLError as error:
            if error.value != NVML_ERROR_NOT_SUPPORTED:
                self.lines.append(f"{key} !{error.value}")
            return None
        self.lines.append(f"{key} ={encode(value)}")
        return value


def _words(words: Any) -> str:
    return ":".join(str(int(word)) for word in words)


def _fabric(fake: FakeNvml, handle: FakeHandle) -> str:
    info = c_nvmlGpuFabricInfoV_t()
    fake.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
    uuid_hex = bytes(info.clusterUuid).hex() or "0" * 32
    return f"{int(info.state) & 0xFF}:{int(info.status)}:{int(info.cliqueId)}:{uuid_hex}"


def _describe_gpu(fake: FakeNvml, out: _Writer, handle: FakeHandle) -> None:
    device = _device(handle)

    def ask(function: str, *args: Any, encode: Callable[[Any], str] = str, suffix: str = "") -> Any:
        method = getattr(fake, function)
        return out.answer(f"{c_symbol(function)}.{device}{suffix}", lambda: method(handle, *args), encode)

    ask("nvmlDeviceGetName")
    ask("nvmlDeviceGetUUID")
    ask("nvmlDeviceGetPciInfo", encode=lambda pci: pci.busId.decode())
    ask("nvmlDeviceGetMemoryInfo", encode=lambda m: f"{m.total}:{m.free}:{m.used}")
    ask("nvmlDeviceGetCudaComputeCapability", encode=lambda cc: f"{cc[0]}:{cc[1]}")
    ask("nvmlDeviceGetMigMode", encode=lambda mode: f"{mode[0]}:{mode[1]}")
    ask("nvmlDeviceGetCpuAffinity", CPU_SET_WORDS, encode=_words)
    ask("nvmlDeviceGetMemoryAffinity", NODE_SET_WORDS, 0, encode=_words)
    ask("nvmlDeviceGetNumaNodeId")
    for function in ("nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration",
                     "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth"):
        ask(function)
    for counter in (0, 1):
        ask("nvmlDeviceGetPcieThroughput", counter, suffix=f".{counter}")
    for clock in (NVML_CLOCK_SM, NVML_CLOCK_MEM):
        ask("nvmlDeviceGetClockInfo", clock, suffix=f".{clock}")
    out.answer(f"nvmlDeviceGetGpuFabricInfoV.{device}", lambda: _fabric(fake, handle))
    ask("nvmlDeviceGetComputeRunningProcesses", encode=lambda processes: str(len(processes)))
    for link in range(NVML_NVLINK_MAX_LINKS):
        for function in ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetNvLinkRemoteDeviceType"):
            ask(function, link, suffix=f".{link}")
        ask("nvmlDeviceGetNvLinkRemotePciInfo", link, encode=lambda pci: pci.busId.decode(), suffix=f".{link}")
    fields = [(field_id, 0) for field_id in GPU_FIELDS]
    fields += [(field_id, scope) for field_id in PER_LINK_FIELDS for scope in (*range(NVML_NVLINK_MAX_LINKS), SCOPE_ALL_LINKS)]
    for value in fake.nvmlDeviceGetFieldValues(handle, fields):
        scope = "*" if value.fieldId in GPU_FIELDS else str(value.scopeId)
        key = f"nvmlDeviceGetFieldValues.{device}.{value.fieldId}.{scope}"
        if value.nvmlReturn == 0:
            out.lines.append(f"{key} ={value.value.ullVal}")
        elif value.nvmlReturn != NVML_ERROR_NOT_SUPPORTED:
            out.lines.append(f"{key} !{value.nvmlReturn}")
    if ask("nvmlDeviceGetMaxMigDeviceCount") is None:
        return
    for slot in range(MAX_MIG_DEVICES):
        mig = ask("nvmlDeviceGetMigDeviceHandleByIndex", slot, encode=lambda _: "1", suffix=f".{slot}")
        if mig is None:
            continue
        mig_device = _device(mig)
        for function in ("nvmlDeviceGetUUID", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId"):
            out.answer(f"{function}.{mig_device}", partial(getattr(fake, function), mig))
        out.answer(f"nvmlDeviceGetMemoryInfo.{mig_device}", partial(fake.nvmlDeviceGetMemoryInfo, mig),
                   lambda m: f"{m.total}:{m.free}:{m.used}")


def _describe_faults(fake: FakeNvml, out: _Writer) -> None:
    for (function, gpu), code in fake.faults.items():
        target = "*" if gpu is None else str(gpu)
        out.lines.append(f"fault.{c_symbol(function)}.{target} {code}")
    for function, gpu in fake.hangs:
        out.lines.append(f"hang.{c_symbol(function)}.{'*' if gpu is None else gpu} {HANG_S}")
    out.lines.extend(f"lost.{gpu} 1" for gpu in sorted(fake.lost))
    if fake.init_error is not None:
        out.lines.append(f"init.error {fake.init_error}")
    if fake.slow_init_s:
        out.lines.append(f"init.slow_s {fake.slow_init_s}")
    if fake.first_touch_s:
        out.lines.append(f"first_touch_s {fake.first_touch_s}")
    if fake.quirks.fabric_state_padding:
        out.lines.append("fabric.padding 1")


def describe(fake: FakeNvml) -> str:
    """The C stand-in's description of what `fake` answers now (counters included)."""
    out = _Writer()
    fake.describing = True
    try:
        out.answer("nvmlSystemGetDriverVersion", fake.nvmlSystemGetDriverVersion)
        out.answer("nvmlSystemGetNVMLVersion", fake.nvmlSystemGetNVMLVersion)
        out.answer("nvmlSystemGetCudaDriverVersion", fake.nvmlSystemGetCudaDriverVersion)
        out.answer("nvmlSystemGetCudaDriverVersion_v2", fake.nvmlSystemGetCudaDriverVersion_v2)
        count = out.answer("nvmlDeviceGetCount_v2", fake.nvmlDeviceGetCount)
        out.lines.append(f"count {count}")
        handles = [FakeHandle(index) for index in range(count)]
        for handle in handles:
            _describe_gpu(fake, out, handle)
        for a in handles:
            for b in handles:
                if a == b:
                    continue
                pair = f"{a.index}.{b.index}"
                out.answer(f"nvmlDeviceGetTopologyCommonAncestor.{pair}",
                           partial(fake.nvmlDeviceGetTopologyCommonAncestor, a, b))
                for index in P2P_INDICES:
                    out.answer(f"nvmlDeviceGetP2PStatus.{pair}.{index}",
                               partial(fake.nvmlDeviceGetP2PStatus, a, b, index))
        _describe_faults(fake, out)
    finally:
        fake.describing = False
    return "\n".join(out.lines) + "\n"


def write_description(fake: FakeNvml, path: Path) -> Path:
    """Write `fake`'s description to `path` atomically (the C library re-reads it when it changes)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(describe(fake))
    os.replace(temporary, path)
    return path
