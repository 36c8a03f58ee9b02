"""NVML, read-only: the only module that imports `pynvml` (package nvidia-ml-py).

Every NVML call goes through :class:`~probes.nvml_query.NvmlQuery`, which turns an NVML error
into a recorded gap and a missing value; NVLink ports are read by :mod:`probes.nvlink`. :func:`collect` reads what
`nvidia-smi -q`, `nvidia-smi topo -m`, `nvidia-smi topo -p2p` and `nvidia-smi nvlink -s` show
into an :class:`NvmlFacts`. Only getters are called: never a setter, a reset or a MIG change.

The module object is a parameter everywhere, so tests hand in a fake with the same functions.
"""

from __future__ import annotations

import ctypes
import dataclasses
import time
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from linkscope.probes.nvlink import read_nvlinks
from linkscope.probes.nvml_query import ERROR_REASONS, NvmlQuery, decode, int_or_none, mask_to_numbers
from linkscope.probes.sysfs import format_cpulist
from linkscope.topo.common.frozen import frozen
from linkscope.topo.model.host import LinkKind, MigDevice, NvLinkPort, P2PStatus

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
:class:`~topo.model.host.P2PStatus` yet, so it is not read."""

FABRIC_STATES: dict[int, str] = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
"""`nvmlGpuFabricState_t`: whether the NVSwitch fabric manager has registered the GPU."""

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


@frozen
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
    nvswitch_link_count: int | None = None
    """NVLinks into NVSwitches (field `NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT`); None when not answered."""
    mig_devices: tuple[MigDevice, ...] = ()
    read_s: float = 0.0
    """Seconds reading this GPU took, its first touch included (slow without the persistence daemon)."""
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
    init_s: float | None = None
    """Seconds `nvmlInit` took (seconds without the persistence daemon, milliseconds with it)."""
    done: bool = False


def collect(query: NvmlQuery, facts: NvmlFacts) -> None:
    """Read everything the probe needs from NVML into `facts` (init, versions, GPUs, pairs, shutdown)."""
    started_s = time.monotonic()
    initialised = query("nvmlInit") is not None or query.last_reason is None
    facts.init_s = time.monotonic() - started_s
    if not initialised:
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
            started_s = time.monotonic()
            handle = query("nvmlDeviceGetHandleByIndex", index, subject=f"gpu {index}", gpu=index)
            if handle is None:
                continue
            gpu = dataclasses.replace(_read_gpu(query, index, handle), read_s=time.monotonic() - started_s)
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
    nvlinks, switch_links = read_nvlinks(query, index, handle, compute_capability)
    mig_enabled = bool(mig[0]) if mig is not None else None
    return NvmlGpu(
        index=index,
        name=decode(name) if name is not None else "",
        uuid=decode(uuid) if uuid is not None else None,
        pci_bus_id=decode(pci.busId) if pci is not None else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        compute_capability=compute_capability,
        mig_enabled=mig_enabled,
        mig_devices=_read_mig_devices(query, index, handle) if mig_enabled else (),
        cpu_affinity=format_cpulist(cpus) or None,
        numa_affinity=format_cpulist(nodes) or None,
        gpu_numa_id=int(gpu_numa) if gpu_numa is not None and int(gpu_numa) >= 0 else None,
        nvlinks=nvlinks,
        nvswitch_link_count=switch_links,
        pcie_gen_current=int_or_none(ask("nvmlDeviceGetCurrPcieLinkGeneration")),
        pcie_gen_max=int_or_none(ask("nvmlDeviceGetMaxPcieLinkGeneration")),
        pcie_width_current=int_or_none(ask("nvmlDeviceGetCurrPcieLinkWidth")),
        pcie_width_max=int_or_none(ask("nvmlDeviceGetMaxPcieLinkWidth")),
        **_read_fabric(query, index, handle),
    )


def _read_mig_devices(query: NvmlQuery, index: int, handle: Any) -> tuple[MigDevice, ...]:
    """The MIG devices of a MIG-enabled GPU (`nvidia-smi -L`), in MIG index order."""
    subject = f"gpu {index}"
    slots = query("nvmlDeviceGetMaxMigDeviceCount", handle, subject=subject, gpu=index)
    devices = []
    for slot in range(int(slots or 0)):
        mig_subject = f"gpu {index}, MIG {slot}"
        mig = query("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot, subject=mig_subject, gpu=index,
                    expected=("NotFound",))
        if mig is None:
            continue

        def ask(function: str, mig: Any = mig, mig_subject: str = mig_subject) -> Any | None:
            return query(function, mig, subject=mig_subject, gpu=index)

        mig_uuid, memory = ask("nvmlDeviceGetUUID"), ask("nvmlDeviceGetMemoryInfo")
        devices.append(MigDevice(
            uuid=decode(mig_uuid) if mig_uuid is not None else None,
            gpu_instance_id=int_or_none(ask("nvmlDeviceGetGpuInstanceId")),
            compute_instance_id=int_or_none(ask("nvmlDeviceGetComputeInstanceId")),
            memory_total_bytes=int(memory.total) if memory is not None else None,
        ))
    return tuple(devices)


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
    # nvml.h declares the state one byte wide; pynvml reads four, so the padding after it must go
    state = FABRIC_STATES.get(int(info.state) & 0xFF)
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
