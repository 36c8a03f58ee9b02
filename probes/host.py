"""`probe_host()`: this machine as a :class:`~topo.model.snapshot.Snapshot`, from NVML and sysfs, read-only.

NVML runs in a worker thread (while sysfs is read) with a time budget: a call that hangs is abandoned when the
budget runs out and recorded as a gap, with everything read before it kept. Without NVML (no
driver, no GPU, a version mismatch) the snapshot still has the NUMA nodes, NICs and the GPUs
sysfs sees, plus a note that says why the rest is missing.

Which source wins: GPU identity, NVLink ports and P2P status come from NVML; PCI paths, NUMA
nodes and NICs from sysfs. A non-NVLink pair's class comes from the sysfs PCI paths
(:func:`topo.machine.pcipath.classify_pci_pair`, the same rule as nvidia-smi's legend) when both GPUs
have one, otherwise from `nvmlDeviceGetTopologyCommonAncestor`; when both exist and disagree,
the disagreement is recorded as a gap.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from linkscope.probes.capabilities import SoftwareFacts, read_software
from linkscope.probes.nvml import NvmlFacts, NvmlGpu, collect, load_pynvml
from linkscope.probes.nvml_query import NvmlQuery, ProbeAbandoned
from linkscope.probes.sysfs import PciDevice, SysfsFacts, nvml_bus_id, read_sysfs, sysfs_bus_id
from linkscope.topo.common.frozen import frozen
from linkscope.topo.machine.links import nvlink_pair_count
from linkscope.topo.machine.pcipath import classify_pci_pair
from linkscope.topo.model.host import Capabilities, Gap, Gpu, Host, Link, LinkKind, Versions
from linkscope.topo.model.snapshot import Snapshot

SLOW_START_S = 1.0
"""`nvmlInit` or a GPU's first touch slower than this means no persistence daemon, and is reported."""

DEFAULT_BUDGET_S = 10.0
"""How long the NVML part of a probe may take before it is abandoned: generous, because `nvmlInit`
alone can take seconds on a box without the persistence daemon; a hung call still ends the wait."""

AUTO = "auto"
"""`nvml=AUTO` (the default) imports pynvml; `nvml=None` probes as if NVML were absent."""


@frozen
class NvmlResult:
    """What the NVML worker delivered within the budget."""

    facts: NvmlFacts
    gaps: tuple[Gap, ...]
    calls: int
    timed_out: bool


@dataclass
class _Notes:
    lines: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)


def _collect_safely(query: NvmlQuery, facts: NvmlFacts) -> None:
    try:
        collect(query, facts)
    except ProbeAbandoned:
        pass
    except Exception as exc:  # a bug or an odd binding must not kill the probe
        query.gaps.append(Gap("NVML probe", f"{type(exc).__name__}: {exc}"))
    finally:
        facts.done = True


class NvmlRun:
    """:func:`probes.nvml.collect` running in a daemon worker thread, so the caller can read sysfs meanwhile."""

    def __init__(self, module: Any) -> None:
        self.query = NvmlQuery(module)
        self.facts = NvmlFacts()
        self.started_s = time.monotonic()
        self._worker = threading.Thread(target=_collect_safely, args=(self.query, self.facts), name="linkscope-nvml",
                                        daemon=True)
        self._worker.start()

    def result(self, budget_s: float) -> NvmlResult:
        """Wait until `budget_s` after the start at most; then abandon the worker and keep what it read."""
        self._worker.join(max(0.0, self.started_s + budget_s - time.monotonic()))
        timed_out = self._worker.is_alive()
        gaps = list(self.query.gaps)
        if timed_out:
            self.query.abandoned.set()
            gaps.append(Gap(self.query.in_flight or "NVML", f"timed out after {budget_s:g} s; the rest of NVML was not read"))
        facts = self.facts
        # the worker may still be filling these containers: copy them, not just the record
        copied = dataclasses.replace(facts, gpus=list(facts.gpus), ancestors=dict(facts.ancestors), p2p=dict(facts.p2p))
        return NvmlResult(copied, tuple(gaps), self.query.calls, timed_out)


def run_nvml(module: Any, budget_s: float = DEFAULT_BUDGET_S) -> NvmlResult:
    """Read NVML in a worker thread; give up after `budget_s` and keep what was read."""
    return NvmlRun(module).result(budget_s)


def _gpu_from_nvml(found: NvmlGpu, device: PciDevice | None) -> Gpu:
    return Gpu(
        index=found.index,
        name=found.name,
        uuid=found.uuid,
        pci_bus_id=found.pci_bus_id,
        numa_node=device.numa_node if device else None,
        cpu_affinity=found.cpu_affinity,
        numa_affinity=found.numa_affinity,
        gpu_numa_id=found.gpu_numa_id,
        memory_total_bytes=found.memory_total_bytes,
        compute_capability=found.compute_capability,
        mig_enabled=found.mig_enabled,
        mig_devices=found.mig_devices,
        nvlinks=found.nvlinks,
        pcie_gen_current=found.pcie_gen_current,
        pcie_gen_max=found.pcie_gen_max,
        pcie_width_current=found.pcie_width_current,
        pcie_width_max=found.pcie_width_max,
        pci_path=device.pci_path if device else (),
        fabric_cluster_uuid=found.fabric_cluster_uuid,
        fabric_clique_id=found.fabric_clique_id,
    )


def _gpu_from_sysfs(index: int, device: PciDevice, sysfs: SysfsFacts) -> Gpu:
    cpus = next((node.cpus for node in sysfs.numa_nodes if node.id == device.numa_node), None)
    return Gpu(
        index=index,
        pci_bus_id=nvml_bus_id(device.bus_id),
        numa_node=device.numa_node,
        cpu_affinity=cpus or None,
        numa_affinity=str(device.numa_node) if device.numa_node is not None else None,
        pci_path=device.pci_path,
    )


def _gpus(nvml: NvmlResult, sysfs: SysfsFacts, notes: _Notes) -> tuple[Gpu, ...]:
    by_bus = {device.bus_id: device for device in sysfs.gpus}
    facts = nvml.facts
    if facts.device_count is None:
        if sysfs.gpus:
            notes.lines.append(f"{len(sysfs.gpus)} NVIDIA GPU(s) found in sysfs; names, NVLinks and P2P status need NVML")
        return tuple(_gpu_from_sysfs(index, device, sysfs) for index, device in enumerate(sysfs.gpus))
    gpus = []
    for found in sorted(facts.gpus, key=lambda g: g.index):
        device = by_bus.get(sysfs_bus_id(found.pci_bus_id)) if found.pci_bus_id else None
        if device is None and found.pci_bus_id:
            notes.gaps.append(Gap(f"sysfs PCI device ({found.pci_bus_id})", "not found: no PCI path or NUMA node for this GPU"))
        gpus.append(_gpu_from_nvml(found, device))
    if len(sysfs.gpus) > facts.device_count:
        notes.lines.append(
            f"sysfs lists {len(sysfs.gpus)} NVIDIA GPUs but NVML counts {facts.device_count}: a GPU may have fallen off "
            "the bus or be bound to another driver (vfio)"
        )
    if len(gpus) < facts.device_count:
        missing = sorted(set(range(facts.device_count)) - {gpu.index for gpu in gpus})
        notes.lines.append(f"NVML counts {facts.device_count} GPUs; not reported: {', '.join(map(str, missing))}")
    return tuple(gpus)


def _links(gpus: tuple[Gpu, ...], nvml: NvmlResult, notes: _Notes) -> tuple[Link, ...]:
    links = []
    switch_links = {gpu.index: gpu.nvswitch_link_count for gpu in nvml.facts.gpus}
    for a, gpu_a in enumerate(gpus):
        for b in range(a + 1, len(gpus)):
            gpu_b = gpus[b]
            pair = (gpu_a.index, gpu_b.index)
            p2p = nvml.facts.p2p.get(pair)
            count = nvlink_pair_count(gpu_a, gpu_b, (switch_links.get(gpu_a.index), switch_links.get(gpu_b.index)),
                                      p2p.nvlink if p2p is not None else None)
            if count:
                versions = [p.version for g in (gpu_a, gpu_b) for p in g.nvlinks if p.active and p.version is not None]
                links.append(Link(a, b, LinkKind.NVLINK, count, max(versions) if versions else None, p2p))
                continue
            links.append(Link(a, b, _pcie_kind(gpu_a, gpu_b, nvml.facts.ancestors.get(pair), notes), p2p=p2p))
    return tuple(links)


def _pcie_kind(gpu_a: Gpu, gpu_b: Gpu, ancestor: LinkKind | None, notes: _Notes) -> LinkKind:
    from_paths = None
    if gpu_a.pci_path and gpu_b.pci_path:
        from_paths = classify_pci_pair(gpu_a.pci_path, gpu_a.numa_node, gpu_b.pci_path, gpu_b.numa_node)
    if from_paths is not None and ancestor is not None and ancestor is not from_paths:
        notes.gaps.append(
            Gap(
                f"pair topology (gpu {gpu_a.index}, gpu {gpu_b.index})",
                f"nvmlDeviceGetTopologyCommonAncestor says {ancestor.value}, the sysfs PCI paths say otherwise; "
                "using the PCI paths",
            )
        )
    if from_paths is not None:
        return from_paths
    if ancestor is not None and ancestor is not LinkKind.SELF:
        return ancestor
    return classify_pci_pair(gpu_a.pci_path, gpu_a.numa_node, gpu_b.pci_path, gpu_b.numa_node)


MERGED_SUBJECTS_SHOWN = 3
"""How many call subjects a merged gap names before it says `...`."""


def merge_gaps(gaps: list[Gap]) -> tuple[Gap, ...]:
    """One gap per (NVML function, reason): 112 `NoPermission` P2P calls read as one line naming a few of them."""
    groups: dict[tuple[str, str], list[Gap]] = {}
    for gap in gaps:
        function = gap.subject.split("(", 1)[0].rstrip()
        groups.setdefault((function, gap.reason), []).append(gap)
    merged = []
    for (function, reason), members in groups.items():
        if len(members) == 1:
            merged.append(members[0])
            continue
        shown = "; ".join(m.subject[len(function) :].strip(" ()") for m in members[:MERGED_SUBJECTS_SHOWN])
        more = "; ..." if len(members) > MERGED_SUBJECTS_SHOWN else ""
        merged.append(Gap(f"{function} ({len(members)}x: {shown}{more})", reason))
    return tuple(merged)


def _fabric_state(nvml: NvmlResult) -> str | None:
    states = sorted({gpu.fabric_state for gpu in nvml.facts.gpus if gpu.fabric_state})
    if not states:
        return None
    return states[0] if len(states) == 1 else "mixed: " + ", ".join(states)


def _slow_start_notes(nvml: NvmlResult, budget_s: float) -> list[str]:
    """Say when NVML was slow to start (no persistence daemon) and when the snapshot is partial."""
    facts = nvml.facts
    lines = []
    slow_touch = max((gpu.read_s for gpu in facts.gpus), default=0.0)
    if (facts.init_s or 0.0) > SLOW_START_S or slow_touch > SLOW_START_S:
        lines.append(
            f"NVML was slow to start (nvmlInit {facts.init_s or 0.0:.1f} s, reading one GPU up to {slow_touch:.1f} s): "
            "the persistence daemon (nvidia-persistenced) is probably not running, so every NVML client pays "
            "the GPUs' initialisation"
        )
    if nvml.timed_out and facts.device_count is not None:
        lines.append(
            f"partial snapshot: NVML did not finish within the {budget_s:g} s budget ({len(facts.gpus)} of "
            f"{facts.device_count} GPUs read; pairs and P2P status may be missing); rerun with a larger --budget"
        )
    return lines


def _unavailable_note(nvml: NvmlResult, module_missing: bool, budget_s: float) -> str | None:
    reason = nvml.facts.unavailable_reason
    if nvml.timed_out and nvml.facts.device_count is None:
        return f"NVML did not answer within {budget_s:g} s; GPUs come from sysfs only"
    if module_missing:
        return "NVML not available: the nvidia-ml-py package is not installed; GPUs come from sysfs only"
    if reason == "LibraryNotFound":
        return "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver here; GPUs come from sysfs only"
    if reason == "DriverLibraryVersionMismatch":
        return "NVML and the loaded kernel driver differ in version (reboot or reload the driver); GPUs come from sysfs only"
    if reason is not None:
        return f"NVML could not start ({reason}); GPUs come from sysfs only"
    return None


def build_host(hostname: str, nvml: NvmlResult, sysfs: SysfsFacts, software: SoftwareFacts, notes: _Notes) -> Host:
    """Merge NVML, sysfs and software facts into one Host (see the module docstring for who wins)."""
    gpus = _gpus(nvml, sysfs, notes)
    gpu_nic = tuple(
        tuple(classify_pci_pair(gpu.pci_path, gpu.numa_node, nic.pci_path, nic.numa_node).value for nic in sysfs.nics)
        for gpu in gpus
    )
    facts = nvml.facts
    return Host(
        hostname=hostname,
        gpus=gpus,
        links=_links(gpus, nvml, notes),
        nics=sysfs.nics,
        gpu_nic=gpu_nic,
        numa_nodes=sysfs.numa_nodes,
        versions=Versions(
            driver=facts.driver,
            cuda_driver=facts.cuda_driver,
            nvml=facts.nvml_version,
            nccl=software.nccl,
            torch=software.torch,
        ),
        capabilities=Capabilities(
            iommu_enabled=sysfs.iommu_enabled,
            iommu_mode=sysfs.iommu_mode,
            gpudirect_rdma=sysfs.gpudirect_rdma,
            nvlink_fabric=_fabric_state(nvml),
            torch_symmetric_memory=software.torch_symmetric_memory,
        ),
    )


def probe_host(
    *,
    nvml: Any = AUTO,
    sysfs_root: str | os.PathLike[str] = "/",
    hostname: str | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    software: SoftwareFacts | None = None,
    with_torch: bool = False,
) -> Snapshot:
    """Probe this machine (or a fake: `nvml` module object and `sysfs_root` tree) into a Snapshot.

    `software` replaces the torch/NCCL lookup (tests pass the sample's versions); `with_torch`
    imports torch to ask it for the NCCL version. Never raises for a hardware problem: what
    could not be read is in `gaps`, and a missing NVML is a `note` in `meta`.
    """
    module = load_pynvml() if nvml == AUTO else nvml
    notes = _Notes()
    running = NvmlRun(module) if module is not None else None
    sysfs = read_sysfs(sysfs_root)
    facts = software if software is not None else read_software(with_torch)
    if running is None:
        nvml_result = NvmlResult(NvmlFacts(unavailable_reason="ModuleNotFound"), (), 0, False)
    else:
        nvml_result = running.result(budget_s)
    note = _unavailable_note(nvml_result, module is None, budget_s)
    if note:
        notes.lines.append(note)
    notes.lines.extend(_slow_start_notes(nvml_result, budget_s))
    host = build_host(hostname or socket.gethostname(), nvml_result, sysfs, facts, notes)
    if not host.gpus:
        notes.lines.append("no NVIDIA GPU found on this machine: showing NUMA nodes and NICs only")
    meta = (*(("note", line) for line in notes.lines), ("nvml_calls", str(nvml_result.calls)))
    return Snapshot(
        hosts=(host,),
        source="probe",
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        meta=meta,
        gaps=merge_gaps([*nvml_result.gaps, *sysfs.gaps, *facts.gaps, *notes.gaps]),
    )
