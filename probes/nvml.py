"""NVML, read-only: the only module that imports `pynvml` (package nvidia-ml-py).

Every NVML call goes through :class:`NvmlQuery`, which turns an NVML error (NotSupported,
NoPermission, FunctionNotFound, GpuIsLost, ...) into a recorded :class:`~topo.model.Gap` and a
missing value, decodes bytes safely and counts calls. :func:`collect` reads what
`nvidia-smi -q`, `nvidia-smi topo -m`, `nvidia-smi topo -p2p` and `nvidia-smi nvlink -s` show
into an :class:`NvmlFacts`. Only getters are called: never a setter, a reset or a MIG change.

The module object is a parameter everywhere, so tests hand in a fake with the same functions.
"""

from __future__ import annotations

import ctypes
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from probes.sysfs import format_cpulist
from topo.model import Gap, LinkKind, NvLinkPort, P2PStatus

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

TOPOLOGY_KINDS: dict[int, LinkKind] = {
    0: LinkKind.SELF,
    10: LinkKind.PIX,
    20: LinkKind.PXB,
    30: LinkKind.PHB,
    40: LinkKind.NODE,
    50: LinkKind.SYS,
}
"""`nvmlGpuTopologyLevel_t` (INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM) as legend kinds."""

P2P_TOKENS: dict[int, str] = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
"""`nvmlGpuP2PStatus_t` as the words `nvidia-smi topo -p2p` prints."""

P2P_CAPS: tuple[tuple[str, int], ...] = (("read", 0), ("write", 1), ("nvlink", 2), ("atomics", 3))
"""P2P capability indices (`NVML_P2P_CAPS_INDEX_*`) and the P2PStatus field each fills. Written as
numbers on purpose: pynvml's `NVML_P2P_CAPS_INDEX_READ` is the tuple `(0,)` (a stray comma), which
ctypes would reject. Index 4 (`..._PCI`, formerly `_PROP`, `nvidia-smi topo -p2p p`) has no field in
:class:`~topo.model.P2PStatus` yet, so it is not read."""

REMOTE_TYPES: dict[int, str] = {0: "gpu", 1: "ibmc", 2: "switch"}
"""`nvmlIntNvLinkDeviceType_t` as NvLinkPort.remote_type words."""

FABRIC_STATES: dict[int, str] = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
"""`nvmlGpuFabricState_t`: whether the NVSwitch fabric manager has registered the GPU."""

NVLINK_STATE_UP: dict[int, bool] = {0: False, 1: True, 2: True, 3: False}
"""A link state as NVLink-up or not. `nvmlDeviceGetNvLinkState` answers `nvmlEnableState_t` (0/1);
the field `NVML_FI_DEV_NVLINK_GET_STATE` answers `NVML_NVLINK_STATE_*`: INACTIVE 0, ACTIVE 1,
SLEEP 2 (a trained link in its low-power state: still a connection) and ACTIVE_TRAFFIC_DISABLED 3
(up, but carries no traffic: not a usable NVLink). Unknown values count as down."""

NVLINK_VERSION_GENERATIONS: dict[int, int] = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
"""`nvmlNvlinkVersion_t` (1_0, 2_0, 2_2, 3_0, 3_1, 4_0, 5_0, 6_0) as NVLink generations."""

GENERATION_BY_CC_MAJOR: dict[int, int] = {6: 1, 7: 2, 8: 3, 9: 4, 10: 5}
"""NVLink generation of each GPU architecture (compute capability major): P100, V100, A100, H100, B200."""

FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_GET_STATE = 165
FI_NVLINK_GET_VERSION = 166
MAX_NVLINKS = 18
"""Links asked for in the first batched field query; larger GPUs are read link by link."""
CPU_SET_WORDS = 64
"""64-bit words in the CPU affinity mask (4096 CPUs)."""
NODE_SET_WORDS = 4
AFFINITY_SCOPE_NODE = 0

_UNAVAILABLE = ("LibraryNotFound", "DriverNotLoaded", "DriverLibraryVersionMismatch", "NoPermission", "Uninitialized")
"""Init failures after which nothing can be read from NVML."""


def load_pynvml() -> ModuleType | None:
    """The pynvml module, or None when the nvidia-ml-py package is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def decode(value: Any) -> str:
    """An NVML string result as text: bytes decoded (bad bytes replaced), NULs and spaces stripped."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    return str(value).strip("\x00 ").strip()


def nvlink_up(state: int | float | None) -> bool:
    """True when an NVLink state answer (either encoding, see :data:`NVLINK_STATE_UP`) means a usable link."""
    return state is not None and NVLINK_STATE_UP.get(int(state), False)


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


class ProbeAbandoned(Exception):
    """Raised inside the NVML worker when the caller stopped waiting: the worker stops at its next call."""


class NvmlQuery:
    """The one wrapper through which every NVML call goes: errors become gaps, calls are counted.

    `query("nvmlDeviceGetName", handle, subject="gpu 3")` returns the result or None; on None,
    `last_reason` says why (`NotSupported`, `GpuIsLost`, ...). Reasons listed in `expected` are
    normal answers (a PCIe GPU has no NVLink) and leave no gap. After GpuIsLost on a GPU, further
    calls for that GPU are skipped.
    """

    def __init__(self, module: Any) -> None:
        self.nvml = module
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
            if function not in self._missing_functions:
                self._missing_functions.add(function)
                self.gaps.append(Gap(function, "FunctionNotFound (not in this NVML binding)"))
            return None
        self.calls += 1
        self.in_flight = label
        error_class = getattr(self.nvml, "NVMLError", None)
        try:
            return method(*args)
        except Exception as exc:
            if error_class is not None and not isinstance(exc, error_class) and not isinstance(exc, OSError):
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = self.reason_of(exc)
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


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML reports it (`nvidia-smi -q -i N`)."""

    index: int
    name: str = ""
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    compute_capability: str | None = None
    mig_enabled: bool | None = None
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: int | None = None
    nvlinks: tuple[NvLinkPort, ...] = ()
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    fabric_state: str | None = None
    """NVSwitch fabric registration state (`nvidia-smi -q` "Fabric"), None when not reported."""
    fabric_cluster_uuid: str | None = None
    """Multi-node NVLink cluster UUID (`nvidia-smi -q` Fabric "ClusterUUID"); None outside such a domain."""
    fabric_clique_id: int | None = None
    """NVLink clique id within that cluster (`nvidia-smi -q` Fabric "CliqueId")."""


@dataclass
class NvmlFacts:
    """What the NVML worker has read so far; filled in place so a timed-out probe keeps the finished parts."""

    available: bool = False
    unavailable_reason: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    nvml_version: str | None = None
    device_count: int | None = None
    gpus: list[NvmlGpu] = field(default_factory=list)
    ancestors: dict[tuple[int, int], LinkKind] = field(default_factory=dict)
    """Pair topology by NVML index (a < b), from `nvmlDeviceGetTopologyCommonAncestor`."""
    p2p: dict[tuple[int, int], P2PStatus] = field(default_factory=dict)
    done: bool = False


def collect(query: NvmlQuery, facts: NvmlFacts) -> None:
    """Read everything the probe needs from NVML into `facts` (init, versions, GPUs, pairs, shutdown)."""
    if query("nvmlInit") is None and query.last_reason is not None:
        facts.unavailable_reason = query.last_reason
        facts.done = True
        return
    facts.available = True
    try:
        _read_system(query, facts)
        count = query("nvmlDeviceGetCount")
        if count is None:
            if query.last_reason in _UNAVAILABLE:
                facts.unavailable_reason = query.last_reason
            return
        facts.device_count = int(count)
        handles: dict[int, Any] = {}
        for index in range(facts.device_count):
            handle = query("nvmlDeviceGetHandleByIndex", index, subject=f"gpu {index}", gpu=index)
            if handle is None:
                continue
            gpu = _read_gpu(query, index, handle)
            if index in query.lost_gpus:
                continue
            handles[index] = handle
            facts.gpus.append(gpu)
        _read_pairs(query, handles, facts)
    finally:
        if not query.abandoned.is_set():
            query("nvmlShutdown")
        facts.done = True


def _read_system(query: NvmlQuery, facts: NvmlFacts) -> None:
    driver = query("nvmlSystemGetDriverVersion")
    facts.driver = decode(driver) if driver is not None else None
    version = query("nvmlSystemGetNVMLVersion")
    facts.nvml_version = decode(version) if version is not None else None
    # a driver library without `_v2` answers FunctionNotFound; the plain call gives the same number
    cuda = query("nvmlSystemGetCudaDriverVersion_v2", expected=("FunctionNotFound",))
    if cuda is None:
        cuda = query("nvmlSystemGetCudaDriverVersion")
    if cuda is not None:
        facts.cuda_driver = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"


def _read_gpu(query: NvmlQuery, index: int, handle: Any) -> NvmlGpu:
    def ask(function: str, *args: Any, expected: tuple[str, ...] = ()) -> Any | None:
        return query(function, handle, *args, subject=f"gpu {index}", gpu=index, expected=expected)

    name = ask("nvmlDeviceGetName")
    uuid = ask("nvmlDeviceGetUUID")
    pci = ask("nvmlDeviceGetPciInfo")
    memory = ask("nvmlDeviceGetMemoryInfo")
    capability = ask("nvmlDeviceGetCudaComputeCapability")
    mig = ask("nvmlDeviceGetMigMode", expected=("NotSupported",))
    cpu_mask = ask("nvmlDeviceGetCpuAffinity", CPU_SET_WORDS)
    node_mask = ask("nvmlDeviceGetMemoryAffinity", NODE_SET_WORDS, AFFINITY_SCOPE_NODE)
    # only GPUs that are NUMA nodes (Grace Hopper) answer; an older driver library lacks the function
    gpu_numa = ask("nvmlDeviceGetNumaNodeId", expected=("NotSupported", "FunctionNotFound"))
    compute_capability = f"{capability[0]}.{capability[1]}" if capability is not None else None
    cpus = mask_to_numbers(cpu_mask) if cpu_mask is not None else set()
    nodes = mask_to_numbers(node_mask) if node_mask is not None else set()
    return NvmlGpu(
        index=index,
        name=decode(name) if name is not None else "",
        uuid=decode(uuid) if uuid is not None else None,
        pci_bus_id=decode(pci.busId) if pci is not None else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        compute_capability=compute_capability,
        mig_enabled=bool(mig[0]) if mig is not None else None,
        cpu_affinity=format_cpulist(cpus) or None,
        numa_affinity=format_cpulist(nodes) or None,
        gpu_numa_id=int(gpu_numa) if gpu_numa is not None and int(gpu_numa) >= 0 else None,
        nvlinks=_read_nvlinks(query, index, handle, compute_capability),
        pcie_gen_current=_int_or_none(ask("nvmlDeviceGetCurrPcieLinkGeneration")),
        pcie_gen_max=_int_or_none(ask("nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_current=_int_or_none(ask("nvmlDeviceGetCurrPcieLinkWidth")),
        pcie_width_max=_int_or_none(ask("nvmlDeviceGetMaxPcieLinkWidth")),
        **_read_fabric(query, index, handle),
    )


def _int_or_none(value: Any) -> int | None:
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


def nvlink_generation(raw: int | None, compute_capability: str | None) -> int | None:
    """The NVLink generation from `nvmlDeviceGetNvLinkVersion`.

    NVML answers with the `nvmlNvlinkVersion_t` enum, not a generation: A100s and RTX 3090s were
    seen to report 5 (3.1); by the enum an H100 reports 6 (4.0) and a B200 7 (5.0). Older headers
    documented the value as a plain "version", which misled other tools. As a guard for a driver
    (or the `NVML_FI_DEV_NVLINK_GET_VERSION` field) answering a plain generation, a raw value that
    equals the generation of the GPU's architecture wins when the enum reading contradicts it.
    """
    if raw is None:
        return None
    from_enum = NVLINK_VERSION_GENERATIONS.get(raw)
    try:
        expected = GENERATION_BY_CC_MAJOR.get(int((compute_capability or "").split(".")[0]))
    except ValueError:
        expected = None
    if expected is not None and from_enum != expected and raw == expected:
        return raw
    return from_enum


def _read_nvlinks(query: NvmlQuery, index: int, handle: Any, compute_capability: str | None) -> tuple[NvLinkPort, ...]:
    """Every NVLink of a GPU: one batched field query for count/state/version, then remote ends per active link."""
    subject = f"gpu {index}"
    fields = [(FI_NVLINK_LINK_COUNT, 0)]
    for link in range(MAX_NVLINKS):
        fields += [(FI_NVLINK_GET_STATE, link), (FI_NVLINK_GET_VERSION, link)]
    values = query("nvmlDeviceGetFieldValues", handle, fields, subject=subject, gpu=index, expected=("NotSupported",))
    count: int | None = None
    batched: dict[tuple[int, int], int | float | None] = {}
    if values is not None:
        for (field_id, scope), value in zip(fields, values, strict=False):
            batched[(field_id, scope)] = field_value(value)
        raw_count = batched.get((FI_NVLINK_LINK_COUNT, 0))
        count = int(raw_count) if raw_count is not None else None
    limit = count if count is not None else getattr(query.nvml, "NVML_NVLINK_MAX_LINKS", MAX_NVLINKS)
    ports: list[NvLinkPort] = []
    for link in range(limit):
        link_subject = f"gpu {index}, link {link}"
        state = batched.get((FI_NVLINK_GET_STATE, link))
        if state is None:
            state = query("nvmlDeviceGetNvLinkState", handle, link, subject=link_subject, gpu=index,
                          expected=("NotSupported", "InvalidArgument") if count is None else ())
            if state is None:
                if count is None and query.last_reason in ("NotSupported", "InvalidArgument"):
                    break
                continue
        version = batched.get((FI_NVLINK_GET_VERSION, link))
        if version is None:
            version = query("nvmlDeviceGetNvLinkVersion", handle, link, subject=link_subject, gpu=index,
                            expected=("NotSupported",))
        active = nvlink_up(state)
        remote_bus = remote_type = None
        if active:
            remote = query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link, subject=link_subject, gpu=index)
            remote_bus = decode(remote.busId) if remote is not None else None
            kind = query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link, subject=link_subject, gpu=index)
            remote_type = REMOTE_TYPES.get(int(kind)) if kind is not None else None
        generation = nvlink_generation(_int_or_none(version), compute_capability)
        ports.append(NvLinkPort(link, active, generation, remote_bus, remote_type))
    return tuple(ports)


def _read_fabric(query: NvmlQuery, index: int, handle: Any) -> dict[str, Any]:
    """NVSwitch fabric state, and the multi-node NVLink cluster UUID and clique id (`nvidia-smi -q` "Fabric"
    section), as NvmlGpu fields; empty on GPUs without a fabric."""
    struct_type = getattr(query.nvml, "c_nvmlGpuFabricInfoV_t", None)
    if struct_type is None:
        return {}
    info = struct_type()
    done = query("nvmlDeviceGetGpuFabricInfoV", handle, ctypes.byref(info), subject=f"gpu {index}", gpu=index,
                 expected=("NotSupported", "FunctionNotFound"))
    if done is None:
        return {}
    state = FABRIC_STATES.get(int(info.state))
    if state is None or state == "Not Supported":
        return {}
    if state == "Completed" and int(getattr(info, "status", 0)) != 0:
        return {"fabric_state": f"Completed with error {ERROR_REASONS.get(int(info.status), int(info.status))}"}
    found: dict[str, Any] = {"fabric_state": state}
    raw_uuid = bytes(getattr(info, "clusterUuid", b"") or b"")
    if state == "Completed" and len(raw_uuid) == 16 and any(raw_uuid):  # all zeros: no multi-node domain
        found["fabric_cluster_uuid"] = str(uuid.UUID(bytes=raw_uuid))
        found["fabric_clique_id"] = int(info.cliqueId)
    return found


def _read_pairs(query: NvmlQuery, handles: dict[int, Any], facts: NvmlFacts) -> None:
    """Common PCI ancestor and P2P status (read, write, NVLink, atomics) for every GPU pair."""
    indices = sorted(handles)
    for position, a in enumerate(indices):
        for b in indices[position + 1 :]:
            subject = f"gpu {a}, gpu {b}"
            level = query("nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b], subject=subject)
            if level is not None and int(level) in TOPOLOGY_KINDS:
                facts.ancestors[(a, b)] = TOPOLOGY_KINDS[int(level)]
            tokens: dict[str, str | None] = {}
            for name, cap in P2P_CAPS:
                status = query("nvmlDeviceGetP2PStatus", handles[a], handles[b], cap, subject=f"{subject}, {name}")
                tokens[name] = P2P_TOKENS.get(int(status), "U") if status is not None else None
            if any(token is not None for token in tokens.values()):
                facts.p2p[(a, b)] = P2PStatus(**tokens)
