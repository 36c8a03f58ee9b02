"""The one wrapper through which every NVML call goes, and the decoding of NVML's answers.

:class:`NvmlQuery` turns an NVML error (NotSupported, NoPermission, FunctionNotFound, GpuIsLost,
...) into a recorded :class:`~topo.model.host.Gap` and a missing value and counts calls; the helpers
decode strings, affinity masks and field values. The pynvml module (or a fake with the same
functions) is handed in: only :mod:`probes.nvml` imports pynvml.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from linkscope.probes.nvml_recording import NvmlRecorder, recorder_from_environment
from linkscope.topo.model.host import Gap

ERROR_REASONS: dict[int, str] = {
    1: "Uninitialized",
    2: "InvalidArgument",
    3: "NotSupported",
    4: "NoPermission",
    5: "AlreadyInitialized",
    6: "NotFound",
    7: "InsufficientSize",
    8: "InsufficientPower",
    9: "DriverNotLoaded",
    10: "Timeout",
    11: "IrqIssue",
    12: "LibraryNotFound",
    13: "FunctionNotFound",
    14: "CorruptedInforom",
    15: "GpuIsLost",
    16: "ResetRequired",
    17: "OperatingSystem",
    18: "DriverLibraryVersionMismatch",
    19: "InUse",
    20: "Memory",
    21: "NoData",
    22: "VgpuEccNotSupported",
    23: "InsufficientResources",
    24: "FreqNotSupported",
    25: "ArgumentVersionMismatch",
    26: "Deprecated",
    27: "NotReady",
    28: "GpuNotFound",
    29: "InvalidState",
    30: "ResetTypeNotSupported",
    999: "Unknown",
}
"""NVML return codes (nvml.h `nvmlReturn_t`) and the reason name a gap records: pynvml's class name
without `NVMLError_`, except 18 (`LibRmVersionMismatch`), spelled out because a note quotes it."""

def decode(value: Any) -> str:
    """An NVML string result as text: bytes decoded (bad bytes replaced), NULs and spaces stripped."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    return str(value).strip("\x00 ").strip()


def mask_to_numbers(words: Iterable[int]) -> set[int]:
    """Bit numbers set in an NVML affinity mask given as 64-bit words (word 0 = bits 0-63)."""
    numbers: set[int] = set()
    for word_index, word in enumerate(words):
        word = int(word)
        bit = 0
        while word:
            if word & 1:
                numbers.add(word_index * 64 + bit)
            word >>= 1
            bit += 1
    return numbers


def int_or_none(value: Any) -> int | None:
    """`value` as an int, None staying None."""
    return int(value) if value is not None else None


def field_value(value: Any) -> int | float | None:
    """The number in one `nvmlFieldValue_t`, or None when NVML returned an error for that field."""
    if getattr(value, "nvmlReturn", 1) != 0:
        return None
    union = value.value
    kind = getattr(value, "valueType", 1)
    attribute = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(kind, "ullVal")
    number = getattr(union, attribute)
    return float(number) if kind == 0 else int(number)


class ProbeAbandoned(Exception):
    """Raised inside the NVML worker when the caller stopped waiting: the worker stops at its next call."""


class NvmlQuery:
    """The one wrapper through which every NVML call goes: errors become gaps, calls are counted.

    `query("nvmlDeviceGetName", handle, subject="gpu 3")` returns the result or None; on None,
    `last_reason` says why (`NotSupported`, `GpuIsLost`, ...). Reasons listed in `expected` are
    normal answers (a PCIe GPU has no NVLink) and leave no gap. After GpuIsLost on a GPU, further
    calls for that GPU are skipped. With `LINKSCOPE_NVML_RECORD` set (or a `recorder` given), every
    call made and its answer or error is appended to a recording (:mod:`probes.nvml_recording`).
    """

    def __init__(self, module: Any, recorder: NvmlRecorder | None = None) -> None:
        self.nvml = module
        self.recorder = recorder if recorder is not None else recorder_from_environment(module)
        self.gaps: list[Gap] = []
        self.calls = 0
        self.in_flight: str | None = None
        """Subject of the call running now (what a timeout gap names)."""
        self.last_reason: str | None = None
        self.lost_gpus: set[int] = set()
        self.abandoned = threading.Event()
        self._missing_functions: set[str] = set()

    def reason_of(self, exc: BaseException) -> str:
        """The gap reason for an exception raised by an NVML call."""
        code = getattr(exc, "value", None)
        if isinstance(code, int):
            return ERROR_REASONS.get(code, f"NVML error {code}")
        return type(exc).__name__

    def __call__(
        self,
        function: str,
        *args: Any,
        subject: str = "",
        gpu: int | None = None,
        expected: tuple[str, ...] = (),
    ) -> Any | None:
        if self.abandoned.is_set():
            raise ProbeAbandoned(function)
        self.last_reason = None
        if gpu is not None and gpu in self.lost_gpus:
            self.last_reason = "GpuIsLost"
            return None
        label = f"{function}({subject})" if subject else function
        method: Callable[..., Any] | None = getattr(self.nvml, function, None)
        if method is None:
            self.last_reason = "FunctionNotFound"
            if self.recorder is not None:
                self.recorder.record(function, args, error=AttributeError(function), reason="FunctionNotFound")
            if function not in self._missing_functions:
                self._missing_functions.add(function)
                self.gaps.append(Gap(function, "FunctionNotFound (not in this NVML binding)"))
            return None
        self.calls += 1
        self.in_flight = label
        error_class = getattr(self.nvml, "NVMLError", None)
        started_s = time.perf_counter()
        try:
            result = method(*args)
            if self.recorder is not None:
                self.recorder.record(function, args, result, seconds=time.perf_counter() - started_s)
            return result
        except Exception as exc:
            if error_class is not None and not isinstance(exc, error_class) and not isinstance(exc, OSError):
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = self.reason_of(exc)
            if self.recorder is not None:
                self.recorder.record(function, args, error=exc, reason=reason, seconds=time.perf_counter() - started_s)
            self.last_reason = reason
            if reason == "GpuIsLost" and gpu is not None:
                self.lost_gpus.add(gpu)
            if reason == "FunctionNotFound":
                if function in self._missing_functions:
                    return None
                self._missing_functions.add(function)
                label = function
            if reason not in expected:
                self.gaps.append(Gap(label, reason))
            return None
        finally:
            self.in_flight = None
