"""A fake pynvml module driven by a Snapshot, with fault injection and call counting.

`FakeNvml.from_snapshot(load_sample("dgx-h100"))` answers the subset of the pynvml API that
linkscope's probes call, the way NVML would on that machine: same function names, the same
error class shape (`NVMLError(value)` picks the subclass for the code, `.value` holds it) and
the same raw encodings (NVLink versions as `nvmlNvlinkVersion_t`, P2P as `nvmlGpuP2PStatus_t`,
CUDA driver version as 12020). The encodings are written out here by hand from nvml.h, not
borrowed from the probe, so a probe decoding bug shows up as a round-trip failure.

Faults: `fail(function, code, gpu=None)`, `lose_gpu(index)`, `fail_init(code)`,
`hang(function, gpu=None)` (returns the Event that releases it), `set_field_link_state(gpu, link, state)`
(an `NVML_NVLINK_STATE_*` such as SLEEP for the batched state field), `slow_init_s` and
`first_touch_s` (no persistence daemon). Setters do not exist here, so a probe that called one
would fail with AttributeError.

Driver behaviours that differ between driver generations are switches in :class:`DriverQuirks`;
the C stand-in (`support.fakes.nvml_standin`) serves the same answers, because its machine description is
written from this fake's own answers (:func:`support.fakes.nvml_standin.describe.describe`).
"""

from __future__ import annotations

import ctypes
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from linkscope.topo.machine.pcipath import classify_pci_pair
from linkscope.topo.model.host import Gpu, Host, LinkKind, NvLinkPort
from linkscope.topo.model.snapshot import Snapshot

# nvmlReturn_t codes (nvml.h)
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

NVML_NVLINK_MAX_LINKS = 36
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
"""`nvmlClockType_t` values (GRAPHICS 0, SM 1, MEM 2, VIDEO 3)."""
DEFAULT_CLOCKS_MHZ = (1980, 2619)
"""Current SM and memory clocks an idle-then-busy H100 SXM reports at its boost (MHz)."""

_ERROR_CLASS_NAMES = {
    NVML_ERROR_UNINITIALIZED: "NVMLError_Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "NVMLError_InvalidArgument",
    NVML_ERROR_NOT_SUPPORTED: "NVMLError_NotSupported",
    NVML_ERROR_NO_PERMISSION: "NVMLError_NoPermission",
    NVML_ERROR_NOT_FOUND: "NVMLError_NotFound",
    NVML_ERROR_INSUFFICIENT_SIZE: "NVMLError_InsufficientSize",
    NVML_ERROR_DRIVER_NOT_LOADED: "NVMLError_DriverNotLoaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVMLError_LibraryNotFound",
    NVML_ERROR_FUNCTION_NOT_FOUND: "NVMLError_FunctionNotFound",
    NVML_ERROR_GPU_IS_LOST: "NVMLError_GpuIsLost",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "NVMLError_LibRmVersionMismatch",
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "NVMLError_ArgumentVersionMismatch",
    NVML_ERROR_UNKNOWN: "NVMLError_Unknown",
}


class NVMLError(Exception):
    """pynvml's base error: `NVMLError(code)` returns an instance of the subclass for that code."""

    _by_code: ClassVar[dict[int, type[NVMLError]]] = {}
    value: int

    def __new__(cls, value: int) -> NVMLError:
        chosen = NVMLError._by_code.get(value, cls) if cls is NVMLError else cls
        instance = Exception.__new__(chosen)
        instance.value = value
        return instance

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_CLASS_NAMES.get(self.value, f"NVML error {self.value}")


for _code, _name in _ERROR_CLASS_NAMES.items():
    NVMLError._by_code[_code] = type(_name, (NVMLError,), {})

# nvmlNvlinkVersion_t: generation -> NVML_NVLINK_VERSION_x_y as the enum documents it
# (A100 and RTX 3090 report 5 = 3.1, not 4 = 3.0; H100 6 = 4.0; B200 7 = 5.0)
_NVLINK_VERSION_CODE = {1: 1, 2: 2, 3: 5, 4: 6, 5: 7}
# ... and as some drivers are reported to answer: A100 5, H100 7 (the enum's 5.0), B200 8 (6.0)
_NVLINK_VERSION_REPORTED = {1: 1, 2: 2, 3: 5, 4: 7, 5: 8}
NVLINK_VERSION_NUMBERINGS = {"enum": _NVLINK_VERSION_CODE, "reported": _NVLINK_VERSION_REPORTED}
# nvmlFieldValue ids (nvml.h NVML_FI_DEV_*)
_FI_LINK_COUNT, _FI_SWITCH_LINKS, _FI_STATE, _FI_VERSION = 91, 147, 165, 166
_FI_TX_KIB, _FI_RX_KIB = 138, 139
_FI_LEGACY_ERROR_TOTALS = (38, 45, 52, 59)  # CRC flit, CRC data, replay, recovery: totals over all links
_FI_DL_ERRORS = (161, 162, 163)  # ERROR_DL_REPLAY, _RECOVERY, _CRC: one link each (scope = link)
_FI_NVLINK5_COUNTS = (206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 219, 221)  # NVLINK_COUNT_*: one link each
SCOPE_ALL_LINKS = 0xFFFFFFFF
"""scopeId UINT_MAX: the aggregate over every link of a GPU."""
SWITCH_REMOTE_SENTINEL = "FFFFFFFF:FF:FF.0"
"""Remote PCI bus id some drivers report for every NVLink that ends at an NVSwitch."""
MAX_MIG_DEVICES = 7
# NVML_FI_DEV_NVLINK_GET_STATE answers NVML_NVLINK_STATE_*: INACTIVE 0, ACTIVE 1, SLEEP 2, ACTIVE_TRAFFIC_DISABLED 3
_NVLINK_STATE_ACTIVE, _NVLINK_STATE_INACTIVE = 1, 0
# nvmlGpuFabricInfo_v2: the version word nvmlDeviceGetGpuFabricInfoV insists on
_FABRIC_INFO_V2 = 0x02000024
# nvmlGpuP2PStatus_t
_P2P_CODE = {"OK": 0, "CNS": 1, "GNS": 2, "TNS": 3, "DR": 4, "NS": 5, "U": 6}
# nvmlGpuTopologyLevel_t
_TOPOLOGY_CODE = {LinkKind.PIX: 10, LinkKind.PXB: 20, LinkKind.PHB: 30, LinkKind.NODE: 40, LinkKind.SYS: 50}
# nvmlIntNvLinkDeviceType_t
_REMOTE_TYPE_CODE = {"gpu": 0, "ibmc": 1, "switch": 2}
_FABRIC_STATE_CODE = {"Not Started": 1, "In Progress": 2, "Completed": 3}
_P2P_FIELDS = ("read", "write", "nvlink", "atomics")


_Refusal = NVMLError
"""A field's error answer (the class attribute `FakeNvml.NVMLError` shadows the name inside the class)."""


@dataclass
class DriverQuirks:
    """How this fake's driver answers where real drivers are reported to differ (both fakes honour each)."""

    nvlink_version_numbering: str = "enum"
    """`enum`: nvmlNvlinkVersion_t as documented (H100 6); `reported`: H100 7, B200 8."""
    per_link_counters_report_total: bool = False
    """Every per-link NVLink TX/RX counter holds the GPU-wide total (nvitop PR #87: 12 equal A100 links)."""
    aggregate_throughput: bool = True
    """The TX/RX counters answer scopeId UINT_MAX with the total over all links."""
    legacy_error_fields: bool = True
    """Fields 38/45/52/59 (error totals) answer; Hopper and Blackwell drivers may say NotSupported."""
    per_link_error_fields: bool = True
    """Fields 161-163 (NVLINK_ERROR_DL_*, one link each) answer."""
    nvlink5_error_fields: bool = False
    """The NVLink5 NVLINK_COUNT_* fields answer (Blackwell)."""
    switch_remote_sentinel: bool = False
    """NVLinks into an NVSwitch report the remote PCI bus id FFFFFFFF:FF:FF.0."""
    switch_link_count_field: bool = True
    """Field 147 (NVSWITCH_CONNECTED_LINK_COUNT) answers on switch-attached GPUs."""
    fabric_state_padding: bool = False
    """The fabric-info struct comes back with non-zero padding after its one-byte state."""
    idle_pcie_gen: int | None = None
    """Every GPU reports this current PCIe generation (an idle GPU trains its link down)."""


class c_nvmlGpuFabricInfoV_t(ctypes.Structure):
    """The fabric-info struct the probe passes by reference, declared like pynvml's (state as a 4-byte
    int, where nvml.h has one byte and padding); it sets its version on construction like pynvml's."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
        ("healthMask", ctypes.c_uint32),
    ]

    def __init__(self) -> None:
        super().__init__(version=_FABRIC_INFO_V2)


@dataclass
class FakeValue:
    """`c_nvmlValue_t`: the union of value slots."""

    dVal: float = 0.0
    uiVal: int = 0
    ulVal: int = 0
    ullVal: int = 0
    sllVal: int = 0
    siVal: int = 0
    usVal: int = 0


@dataclass
class FakeFieldValue:
    """`c_nvmlFieldValue_t`."""

    fieldId: int
    scopeId: int
    nvmlReturn: int = NVML_SUCCESS
    valueType: int = 3
    value: FakeValue = field(default_factory=FakeValue)


@dataclass
class FakePciInfo:
    """`nvmlPciInfo_t` with only the bus id (bytes, as ctypes returns a char array)."""

    busId: bytes


@dataclass
class FakeMemory:
    """`c_nvmlMemory_t`."""

    total: int
    free: int = 0
    used: int = 0


@dataclass
class FakeProcess:
    """`c_nvmlProcessInfo_t` with the fields preflight reads."""

    pid: int
    usedGpuMemory: int = 0


@dataclass(frozen=True)
class FakeHandle:
    """`c_nvmlDevice_t`: an opaque handle; here it carries the NVML index (and the MIG slot of a MIG device)."""

    index: int
    mig: int | None = None


def _mask_words(numbers: set[int], words: int) -> list[int]:
    mask = [0] * words
    for number in numbers:
        if number // 64 < words:
            mask[number // 64] |= 1 << (number % 64)
    return mask


def _numbers(cpulist: str | None) -> set[int]:
    found: set[int] = set()
    for part in (cpulist or "").split(","):
        if part:
            low, _, high = part.partition("-")
            found.update(range(int(low), int(high or low) + 1))
    return found


@dataclass
class Counters:
    """Cumulative counters the live sampler reads (bytes and error counts), advanced by `tick()`."""

    nvlink_tx_kib: dict[tuple[int, int], int] = field(default_factory=dict)
    """(gpu, link) -> KiB sent."""
    nvlink_rx_kib: dict[tuple[int, int], int] = field(default_factory=dict)
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)
    """(gpu, link) -> errors of each kind on that link (every error field counts the same here)."""


class FakeNvml:
    """A stand-in for the `pynvml` module, built from one Host's description."""

    NVMLError = NVMLError
    NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfoV_t

    def __init__(self, host: Host, quirks: DriverQuirks | None = None) -> None:
        self.host = host
        self.quirks = quirks or DriverQuirks()
        self.gpus: list[Gpu] = sorted(host.gpus, key=lambda g: g.index)
        self.calls: Counter[str] = Counter()
        self.initialized = False
        self._init_error: int | None = None
        self._faults: dict[tuple[str, int | None], int] = {}
        self._hangs: dict[tuple[str, int | None], threading.Event] = {}
        self._lost: set[int] = set()
        self.counters = Counters()
        self.pcie_kb_per_s: dict[int, tuple[int, int]] = {}
        """(TX, RX) KB/s per GPU index that `nvmlDeviceGetPcieThroughput` reports."""
        self.field_link_states: dict[tuple[int, int], int] = {}
        """(gpu, link) -> `NVML_NVLINK_STATE_*` that the GET_STATE field reports instead of active/inactive."""
        self.processes: dict[int, int] = {}
        """Compute processes running on each GPU index (none unless set)."""
        self.memory_used_bytes: dict[int, int] = {}
        """Memory in use on each GPU index (none unless set)."""
        self.slow_init_s = 0.0
        """`nvmlInit` takes this long (no persistence daemon)."""
        self.first_touch_s = 0.0
        """The first handle lookup of each GPU takes this long (first-touch initialisation)."""
        self._touched: set[int] = set()
        self.describing = False
        """Set by the description writer: calls skip faults, hangs, delays and call counting."""
        self.clocks_mhz: dict[int, tuple[int, int]] = {}
        """(SM, memory) MHz per GPU index that `nvmlDeviceGetClockInfo` reports (default DEFAULT_CLOCKS_MHZ)."""

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, quirks: DriverQuirks | None = None) -> FakeNvml:
        """A fake NVML for the (first) host of `snapshot`."""
        return cls(snapshot.host, quirks)

    @property
    def faults(self) -> dict[tuple[str, int | None], int]:
        """(function, GPU index or None for all) -> the NVML error code it raises."""
        return dict(self._faults)

    @property
    def hangs(self) -> tuple[tuple[str, int | None], ...]:
        """The (function, GPU) calls that block until released."""
        return tuple(key for key, event in self._hangs.items() if not event.is_set())

    @property
    def lost(self) -> frozenset[int]:
        """GPU indices that answer GpuIsLost."""
        return frozenset(self._lost)

    @property
    def init_error(self) -> int | None:
        """The code `nvmlInit` fails with, if any."""
        return self._init_error

    # --- fault injection -------------------------------------------------------------
    def fail(self, function: str, code: int, gpu: int | None = None) -> None:
        """Make `function` raise NVMLError(code) (for GPU `gpu` only, or for every call)."""
        self._faults[(function, gpu)] = code

    def fail_init(self, code: int) -> None:
        """Make `nvmlInit` raise (LibraryNotFound, LibRmVersionMismatch, NoPermission...)."""
        self._init_error = code

    def set_field_link_state(self, gpu: int, link: int, state: int) -> None:
        """Make `NVML_FI_DEV_NVLINK_GET_STATE` report `state` (2 = SLEEP, 3 = ACTIVE_TRAFFIC_DISABLED) for one link."""
        self.field_link_states[(gpu, link)] = state

    def lose_gpu(self, index: int) -> None:
        """Every call that touches GPU `index` raises GpuIsLost from now on."""
        self._lost.add(index)

    def hang(self, function: str, gpu: int | None = None) -> threading.Event:
        """Make `function` block until the returned Event is set (or 60 s pass)."""
        event = threading.Event()
        self._hangs[(function, gpu)] = event
        return event

    def release_all(self) -> None:
        """Let every hung call return."""
        for event in self._hangs.values():
            event.set()

    @property
    def total_calls(self) -> int:
        """Number of NVML calls made so far."""
        return sum(self.calls.values())

    def advance(self, seconds: float, nvlink_gbps: float = 0.0, errors: int = 0) -> None:
        """Move every active link's TX/RX counters on as if `nvlink_gbps` (GB/s per link) flowed for `seconds`."""
        kib = int(nvlink_gbps * 1e9 * seconds / 1024)
        for gpu in self.gpus:
            for port in gpu.nvlinks:
                if port.active:
                    key = (gpu.index, port.link)
                    self.counters.nvlink_tx_kib[key] = self.counters.nvlink_tx_kib.get(key, 0) + kib
                    self.counters.nvlink_rx_kib[key] = self.counters.nvlink_rx_kib.get(key, 0) + kib
                    self.counters.nvlink_errors[key] = self.counters.nvlink_errors.get(key, 0) + errors

    # --- plumbing ----------------------------------------------------------------------
    def _enter(self, function: str, *handles: FakeHandle) -> None:
        if self.describing:
            return
        self.calls[function] += 1
        indices = [h.index for h in handles]
        for key in [(function, None), *((function, i) for i in indices)]:
            event = self._hangs.get(key)
            if event is not None:
                event.wait(60)
        if function != "nvmlInit" and not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        for index in indices:
            if index in self._lost:
                raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        for key in [(function, None), *((function, i) for i in indices)]:
            code = self._faults.get(key)
            if code is not None:
                raise NVMLError(code)

    def _gpu(self, handle: FakeHandle) -> Gpu:
        return self.gpus[handle.index]

    @staticmethod
    def _need(value: Any) -> Any:
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    # --- system ------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        time.sleep(self.slow_init_s)
        if self._init_error is not None:
            raise NVMLError(self._init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(self._need(self.host.versions.driver))

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(self._need(self.host.versions.nvml))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        major, _, minor = str(self._need(self.host.versions.cuda_driver)).partition(".")
        return int(major) * 1000 + int(minor or 0) * 10

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        major, _, minor = str(self._need(self.host.versions.cuda_driver)).partition(".")
        return int(major) * 1000 + int(minor or 0) * 10

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex", FakeHandle(index))
        if not 0 <= index < len(self.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if index not in self._touched and not self.describing:
            self._touched.add(index)
            time.sleep(self.first_touch_s)
        return FakeHandle(index)

    # --- one GPU -----------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return self._gpu(handle).name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetUUID", handle)
        if handle.mig is not None:
            return str(self._need(self._mig(handle).uuid))
        return str(self._need(self._gpu(handle).uuid))

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> FakePciInfo:
        self._enter("nvmlDeviceGetPciInfo", handle)
        return FakePciInfo(str(self._need(self._gpu(handle).pci_bus_id)).encode())

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle) -> FakeMemory:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        if handle.mig is not None:
            return FakeMemory(int(self._need(self._mig(handle).memory_total_bytes)))
        total = int(self._need(self._gpu(handle).memory_total_bytes))
        used = self.memory_used_bytes.get(handle.index, 0)
        return FakeMemory(total, free=total - used, used=used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[FakeProcess]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        return [FakeProcess(pid=1000 + number) for number in range(self.processes.get(handle.index, 0))]

    # --- MIG ---------------------------------------------------------------------------
    def _mig(self, handle: FakeHandle) -> Any:
        devices = self._gpu(handle).mig_devices
        if handle.mig is None or not 0 <= handle.mig < len(devices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return devices[handle.mig]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        if not self._gpu(handle).mig_enabled:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return MAX_MIG_DEVICES

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        gpu = self._gpu(handle)
        if not gpu.mig_enabled:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= index < MAX_MIG_DEVICES:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if index >= len(gpu.mig_devices):
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return FakeHandle(handle.index, index)

    def nvmlDeviceGetGpuInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId", handle)
        return int(self._need(self._mig(handle).gpu_instance_id))

    def nvmlDeviceGetComputeInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId", handle)
        return int(self._need(self._mig(handle).compute_instance_id))

    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeHandle) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability", handle)
        major, _, minor = str(self._need(self._gpu(handle).compute_capability)).partition(".")
        return int(major), int(minor)

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        enabled = self._need(self._gpu(handle).mig_enabled)
        return [int(enabled), int(enabled)]

    def nvmlDeviceGetCpuAffinity(self, handle: FakeHandle, words: int) -> list[int]:
        self._enter("nvmlDeviceGetCpuAffinity", handle)
        return _mask_words(_numbers(self._need(self._gpu(handle).cpu_affinity)), words)

    def nvmlDeviceGetMemoryAffinity(self, handle: FakeHandle, words: int, scope: int) -> list[int]:
        self._enter("nvmlDeviceGetMemoryAffinity", handle)
        return _mask_words(_numbers(self._need(self._gpu(handle).numa_affinity)), words)

    def nvmlDeviceGetNumaNodeId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetNumaNodeId", handle)
        return int(self._need(self._gpu(handle).gpu_numa_id))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        current = int(self._need(self._gpu(handle).pcie_gen_current))
        return self.quirks.idle_pcie_gen if self.quirks.idle_pcie_gen is not None else current

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return int(self._need(self._gpu(handle).pcie_gen_max))

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return int(self._need(self._gpu(handle).pcie_width_current))

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return int(self._need(self._gpu(handle).pcie_width_max))

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", handle)
        sm_mhz, memory_mhz = self.clocks_mhz.get(handle.index, DEFAULT_CLOCKS_MHZ)
        if clock_type == NVML_CLOCK_SM:
            return sm_mhz
        if clock_type == NVML_CLOCK_MEM:
            return memory_mhz
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetPcieThroughput(self, handle: FakeHandle, counter: int) -> int:
        self._enter("nvmlDeviceGetPcieThroughput", handle)
        tx, rx = self.pcie_kb_per_s.get(handle.index, (0, 0))
        return tx if counter == 0 else rx

    def nvmlDeviceGetGpuFabricInfoV(self, handle: FakeHandle, info_ref: Any) -> int:
        self._enter("nvmlDeviceGetGpuFabricInfoV", handle)
        info = getattr(info_ref, "_obj", info_ref)
        if info.version != _FABRIC_INFO_V2:
            raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        state = self.host.capabilities.nvlink_fabric
        if state not in _FABRIC_STATE_CODE:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        # nvml.h's state is one byte; with the quirk the three bytes after it are not zero
        info.state = _FABRIC_STATE_CODE[state] | (0xA5A5A500 if self.quirks.fabric_state_padding else 0)
        info.status = NVML_SUCCESS
        gpu = self._gpu(handle)
        if gpu.fabric_cluster_uuid is not None:  # a GPU of a multi-node NVLink domain (GB200 NVL72)
            info.clusterUuid[:] = list(uuid.UUID(gpu.fabric_cluster_uuid).bytes)
            info.cliqueId = gpu.fabric_clique_id or 0
        return NVML_SUCCESS

    # --- NVLink ------------------------------------------------------------------------
    def _port(self, handle: FakeHandle, link: int) -> Any:
        ports = self._gpu(handle).nvlinks
        if not ports:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(ports):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return ports[link]

    def nvmlDeviceGetNvLinkState(self, handle: FakeHandle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", handle)
        return 1 if self._port(handle, link).active else 0

    def _version_code(self, port: NvLinkPort) -> int | None:
        numbering = NVLINK_VERSION_NUMBERINGS[self.quirks.nvlink_version_numbering]
        return numbering.get(port.version) if port.version is not None else None

    def nvmlDeviceGetNvLinkVersion(self, handle: FakeHandle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkVersion", handle)
        return int(self._need(self._version_code(self._port(handle, link))))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: FakeHandle, link: int) -> FakePciInfo:
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", handle)
        port = self._port(handle, link)
        if self.quirks.switch_remote_sentinel and port.remote_type == "switch":
            return FakePciInfo(SWITCH_REMOTE_SENTINEL.encode())
        return FakePciInfo(str(self._need(port.remote_pci_bus_id)).encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: FakeHandle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle)
        return _REMOTE_TYPE_CODE.get(self._port(handle, link).remote_type, 0xFF)

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, field_ids: list[Any]) -> list[FakeFieldValue]:
        self._enter("nvmlDeviceGetFieldValues", handle)
        return [self._field(handle, *(item if isinstance(item, tuple) else (item, 0))) for item in field_ids]

    def _field(self, handle: FakeHandle, field_id: int, scope: int) -> FakeFieldValue:
        value = FakeFieldValue(field_id, scope)
        number = self._field_number(self._gpu(handle), field_id, scope)
        if isinstance(number, NVMLError):
            value.nvmlReturn = number.value
            return value
        value.valueType = 3
        value.value = FakeValue(ullVal=number, uiVal=number & 0xFFFFFFFF)
        return value

    def _field_number(self, gpu: Gpu, field_id: int, scope: int) -> int | _Refusal:
        """One field's answer for one GPU: a number, or the NVMLError its `nvmlReturn` carries."""
        quirks = self.quirks
        active = [port.link for port in gpu.nvlinks if port.active]
        if field_id == _FI_LINK_COUNT:
            return len(gpu.nvlinks)
        if field_id == _FI_SWITCH_LINKS:
            switched = sum(1 for port in gpu.nvlinks if port.active and port.remote_type == "switch")
            return switched if switched and quirks.switch_link_count_field else NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if field_id in (_FI_TX_KIB, _FI_RX_KIB):
            kib = self.counters.nvlink_tx_kib if field_id == _FI_TX_KIB else self.counters.nvlink_rx_kib
            total = sum(kib.get((gpu.index, link), 0) for link in active)
            if scope == SCOPE_ALL_LINKS and gpu.nvlinks:
                return total if quirks.aggregate_throughput else NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if field_id in _FI_LEGACY_ERROR_TOTALS:
            if not (gpu.nvlinks and quirks.legacy_error_fields):
                return NVMLError(NVML_ERROR_NOT_SUPPORTED)
            return sum(self.counters.nvlink_errors.get((gpu.index, link), 0) for link in active)
        per_link = (_FI_STATE, _FI_VERSION, _FI_TX_KIB, _FI_RX_KIB, *_FI_DL_ERRORS, *_FI_NVLINK5_COUNTS)
        if field_id not in per_link:
            return NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if scope >= len(gpu.nvlinks):
            return NVMLError(NVML_ERROR_INVALID_ARGUMENT if gpu.nvlinks else NVML_ERROR_NOT_SUPPORTED)
        port = gpu.nvlinks[scope]
        key = (gpu.index, scope)
        if field_id == _FI_STATE:
            return self.field_link_states.get(key, _NVLINK_STATE_ACTIVE if port.active else _NVLINK_STATE_INACTIVE)
        if field_id == _FI_VERSION:
            code = self._version_code(port)
            return code if code is not None else NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if field_id in (_FI_TX_KIB, _FI_RX_KIB):
            if quirks.per_link_counters_report_total and port.active:
                return total
            kib = self.counters.nvlink_tx_kib if field_id == _FI_TX_KIB else self.counters.nvlink_rx_kib
            return kib.get(key, 0)
        family_on = quirks.per_link_error_fields if field_id in _FI_DL_ERRORS else quirks.nvlink5_error_fields
        if not family_on:
            return NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return self.counters.nvlink_errors.get(key, 0)

    # --- pairs -------------------------------------------------------------------------
    def _pair_link(self, a: FakeHandle, b: FakeHandle) -> Any:
        lo, hi = sorted((a.index, b.index))
        for link in self.host.links:
            if (self.gpus[link.a].index, self.gpus[link.b].index) == (lo, hi):
                return link
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTopologyCommonAncestor(self, a: FakeHandle, b: FakeHandle) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", a, b)
        if a.index == b.index:
            return 0
        link = self._pair_link(a, b)
        kind = link.kind
        if kind is LinkKind.NVLINK:
            ga, gb = self._gpu(a), self._gpu(b)
            kind = classify_pci_pair(ga.pci_path, ga.numa_node, gb.pci_path, gb.numa_node)
        return _TOPOLOGY_CODE[kind]

    def nvmlDeviceGetP2PStatus(self, a: FakeHandle, b: FakeHandle, index: int) -> int:
        self._enter("nvmlDeviceGetP2PStatus", a, b)
        p2p = self._pair_link(a, b).p2p
        if p2p is None or not 0 <= index < len(_P2P_FIELDS):
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return _P2P_CODE[self._need(getattr(p2p, _P2P_FIELDS[index]))]
