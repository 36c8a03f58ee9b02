"""NCCL's view of the machine set beside NVML's: what NCCL planned on (its topology dump, topology file or debug-log
tree) against what the snapshot (NVML, sysfs, nvidia-smi) reads.

Inside VMs and containers NCCL often sees another machine than nvidia-smi: emulated PCIe ports that report 2.5 GT/s x1
(NCCL prices them at 0.2 GB/s, `PCI[0.2]`), ports without a link speed (it assumes Gen3) or width (it assumes x16,
src/graph/topo.cc `ncclTopoAddPci`), NVLinks or NVSwitches it does not see,
GPUs and NICs under the wrong CPU, NICs without GPUDirect RDMA. Each is a finding with evidence from both sides (where
the snapshot has the device) and the fix. GPUs and NICs are matched by PCI bus id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from linkscope.topo.common.units import format_gbps
from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines
from linkscope.topo.model.host import Gpu, Host, LinkKind, Nic
from linkscope.topo.model.snapshot import Snapshot

if TYPE_CHECKING:  # NCCL's topology readers load only for a run that has NCCL's view (doctor starts faster)
    from linkscope.topo.formats.nccl_topo_model import NcclGpu, NcclNet, NcclPci, NcclTopology

EXPORT_FIX = ("or hand NCCL the machine's real tree: `linkscope export nccl-topo SNAPSHOT -o nccl-topo.xml` (a snapshot "
              "of the machine, or of one of its kind on bare metal) and run with NCCL_TOPO_FILE=nccl-topo.xml")

SPEED_FIX = ("Expose the PCIe link speed and width of the virtual ports to the guest (the hypervisor's PCIe root and "
             "switch port emulation, e.g. QEMU pcie-root-port x-speed/x-width), " + EXPORT_FIX + "; where peer traffic "
             "through the emulated switches is slow, enable ATS and disable ACS redirection on the host.")

WIDTH_FIX = ("NCCL assumes x16 for a port without a width: harmless where the link is x16. Otherwise expose the link "
             "width to the guest, " + EXPORT_FIX + ".")

NVLINK_FIX = ("NCCL finds NVLinks through NVML inside the machine: check that the VM passes the GPUs' NVLinks and "
              "NVSwitches through (`nvidia-smi nvlink -s` in the guest), that nvidia-fabricmanager runs on NVSwitch "
              "systems, and that NCCL_P2P_DISABLE / NCCL_P2P_LEVEL do not hide them; " + EXPORT_FIX + ".")

AFFINITY_FIX = ("Give the guest the host's NUMA layout with each GPU and NIC on its CPU's node (e.g. QEMU pxb-pcie buses "
                "with numa_node), " + EXPORT_FIX + " placing each GPU and NIC under its CPU.")

GDR_FIX = ("Load nvidia-peermem (`modprobe nvidia_peermem`) or use DMA-BUF (Linux 5.12+, NCCL 2.13+, open GPU kernel "
           "modules); in a VM enable ATS on the GPUs and NICs and disable ACS peer redirection on the host so peer "
           "traffic reaches the NIC; NCCL_NET_GDR_LEVEL sets how far a NIC may be for GPUDirect RDMA.")


def _bus_id(busid: str | None) -> str | None:
    """`busid` as NVML writes it (:func:`~topo.formats.nccl_topo_snapshot.nvml_bus_id`)."""
    from linkscope.topo.formats.nccl_topo_snapshot import nvml_bus_id

    return nvml_bus_id(busid)


def nccl_view_differs(context: HealthContext) -> Iterator[HealthFinding]:
    """Findings of NCCL's view (`doctor --nccl-topo FILE`, or an NCCL topology file as SOURCE) beside the snapshot's."""
    topology = context.nccl_topology
    if topology is None or not context.snapshot.hosts:
        return
    host = context.snapshot.host
    gpus = {_bus_id(gpu.pci_bus_id): gpu for gpu in host.gpus if gpu.pci_bus_id}
    nics = {_bus_id(nic.pci_bus_id): nic for nic in host.nics if nic.pci_bus_id}
    yield from _slow_path(topology, host, gpus)
    yield from _speed_unknown(topology, host, gpus)
    yield from _width_unknown(topology, host, gpus)
    yield from _nvlinks_not_seen(topology, host, gpus)
    yield from _affinity_differs(topology, host, gpus, nics)
    yield from _nics_without_gdr(topology, host)


def matched_gpus(topology: NcclTopology, snapshot: Snapshot) -> int:
    """How many of NCCL's GPUs the snapshot's first host has (by PCI bus id)."""
    if not snapshot.hosts:
        return 0
    known = {_bus_id(gpu.pci_bus_id) for gpu in snapshot.host.gpus}
    return sum(1 for gpu in topology.gpus if _bus_id(gpu.busid) in known)


def _nvml(gpus: dict[str | None, Gpu], busid: str | None) -> Gpu | None:
    return gpus.get(_bus_id(busid))


def _nvml_pcie(gpu: Gpu | None) -> str:
    if gpu is None:
        return "not in the snapshot"
    gen = gpu.pcie_gen_max or gpu.pcie_gen_current
    width = gpu.pcie_width_max or gpu.pcie_width_current
    if gen is None and width is None:
        return "PCIe link not read"
    return f"PCIe Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


def _ncc_port(port: NcclPci, topology: NcclTopology) -> str:
    if port.bw_gbps is not None:
        return f"{port.busid}: PCI[{port.bw_gbps:g}]"
    return f"{port.busid}: link_speed={port.link_speed or ''!r} link_width={port.link_width}"


def _gpus_behind(topology: NcclTopology, port: NcclPci) -> list[NcclGpu]:
    return [gpu for gpu in topology.gpus if any(node.busid == port.busid for node in topology.pci_chain(gpu.busid))]


def _indices(gpus: Iterable[Gpu | None]) -> tuple[int, ...]:
    return tuple(sorted({gpu.index for gpu in gpus if gpu is not None}))


GEN_LANE_RATE = {1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}
"""PCIe lane rate by generation in NCCL's unit (100 Mb/s), to price NVML's link as NCCL prices its own."""

SLOW_SHARE = 0.25
"""A port NCCL prices below this share of the GPU's own link makes the path slow in NCCL's eyes."""


def _nvml_link_gbps(gpu: Gpu | None) -> float | None:
    """The GPU's PCIe link as NCCL would price it (`width x lane rate / 80` GB/s), from NVML's generation and width."""
    if gpu is None:
        return None
    gen, width = gpu.pcie_gen_max or gpu.pcie_gen_current, gpu.pcie_width_max or gpu.pcie_width_current
    if gen not in GEN_LANE_RATE or not width:
        return None
    return width * GEN_LANE_RATE[gen] / 80


def _slow_path(topology: NcclTopology, host: Host, gpus: dict[str | None, Gpu]) -> Iterator[HealthFinding]:
    rows: list[str] = []
    concerned: list[Gpu | None] = []
    for gpu in topology.gpus:
        chain = topology.pci_chain(gpu.busid)
        if not chain:
            continue
        nvml = _nvml(gpus, gpu.busid)
        reference = _nvml_link_gbps(nvml) or max(port.nccl_bw_gbps for port in chain)
        slow = [port for port in chain if port.nccl_bw_gbps < SLOW_SHARE * reference]
        if slow:
            concerned.append(nvml)
            ports = ", ".join(f"{port.busid} at {format_gbps(port.nccl_bw_gbps, '.1f')}" for port in slow)
            rows.append(f"GPU {gpu.busid}: NCCL's path {ports}; the GPU's link {format_gbps(reference, '.1f')} "
                        f"({'NVML: ' + _nvml_pcie(nvml) if nvml else 'NCCL'})")
    if rows:
        yield HealthFinding(
            code="nccl-pcie-path-slow", severity="warning", host=host.hostname, gpus=_indices(concerned),
            message=(f"NCCL prices the PCIe path of {len(rows)} GPU(s) far below their own link (a VM's emulated port "
                     "reporting 2.5 GT/s x1 shows as PCI[0.2]): it plans its rings and trees on a slower machine than "
                     "the real one"),
            evidence=evidence_lines([f"NCCL ({topology.name}): {row}" for row in rows]), fix=SPEED_FIX)


def _speed_unknown(topology: NcclTopology, host: Host, gpus: dict[str | None, Gpu]) -> Iterator[HealthFinding]:
    ports = [port for port in topology.pcis if port.speed_unknown and _gpus_behind(topology, port)]
    if not ports:
        return
    behind = {gpu.busid: gpu for port in ports for gpu in _gpus_behind(topology, port)}
    evidence = [f"NCCL ({topology.name}): {_ncc_port(port, topology)}: no link speed NCCL knows (it assumes 8 GT/s)"
                for port in ports]
    evidence += [f"NVML: GPU {gpu.busid}: {_nvml_pcie(_nvml(gpus, gpu.busid))}" for gpu in behind.values()]
    yield HealthFinding(
        code="nccl-pcie-speed-unknown", severity="warning", host=host.hostname,
        gpus=_indices(_nvml(gpus, busid) for busid in behind),
        message=(f"NCCL sees {len(ports)} PCIe port(s) above {len(behind)} GPU(s) without a link speed it can read "
                 "(a virtual port): it assumes PCIe Gen3, whatever the link really is"),
        evidence=evidence_lines(evidence), fix=SPEED_FIX)


def _width_unknown(topology: NcclTopology, host: Host, gpus: dict[str | None, Gpu]) -> Iterator[HealthFinding]:
    ports = [port for port in topology.pcis if port.width_unknown and _gpus_behind(topology, port)]
    if not ports:
        return
    behind = {gpu.busid: gpu for port in ports for gpu in _gpus_behind(topology, port)}
    widths = {(_nvml(gpus, busid) or Gpu(-1)).pcie_width_max for busid in behind}
    narrower = any(width is not None and width != 16 for width in widths)
    evidence = [f"NCCL ({topology.name}): {_ncc_port(port, topology)}: no link width (NCCL assumes x16)" for port in ports]
    evidence += [f"NVML: GPU {gpu.busid}: {_nvml_pcie(_nvml(gpus, gpu.busid))}" for gpu in behind.values()]
    yield HealthFinding(
        code="nccl-pcie-width-unknown", severity="warning" if narrower else "info", host=host.hostname,
        gpus=_indices(_nvml(gpus, busid) for busid in behind),
        message=(f"NCCL sees {len(ports)} PCIe port(s) without a link width (a virtual port): it assumes x16"
                 + (", wider than the link NVML reads" if narrower else "")),
        evidence=evidence_lines(evidence), fix=WIDTH_FIX)


def _nvlinks_between(a: NcclGpu, b: NcclGpu) -> bool:
    direct = any(b.busid and link.target.lower() == b.busid.lower() for link in a.nvlinks)
    switched = any(link.to_nvswitch for link in a.nvlinks) and any(link.to_nvswitch for link in b.nvlinks)
    return direct or switched


def _nvlinks_not_seen(topology: NcclTopology, host: Host, gpus: dict[str | None, Gpu]) -> Iterator[HealthFinding]:
    stated = [gpu for gpu in topology.gpus if gpu.stated]
    if not stated:
        return  # a hand-written file states no <gpu>: NCCL reads the NVLinks on the machine itself
    missing: list[tuple[NcclGpu, NcclGpu, str]] = []
    for number, a in enumerate(stated):
        for b in stated[number + 1:]:
            gpu_a, gpu_b = _nvml(gpus, a.busid), _nvml(gpus, b.busid)
            if gpu_a is None or gpu_b is None:
                continue
            link = host.link(host.gpus.index(gpu_a), host.gpus.index(gpu_b))
            if link.kind is LinkKind.NVLINK and not _nvlinks_between(a, b):
                missing.append((a, b, link.token))
    switch_nvml = [gpu for gpu in host.gpus if any(port.remote_type == "switch" for port in gpu.nvlinks)]
    switch_nccl = [gpu for gpu in stated if any(link.to_nvswitch for link in gpu.nvlinks)]
    if missing:
        evidence = [f"NVML: GPU {gpu_index(gpus, a.busid)} - GPU {gpu_index(gpus, b.busid)}: {token}; NCCL: no NVLink between "
                    f"{a.busid} and {b.busid}" for a, b, token in missing]
        yield HealthFinding(
            code="nccl-nvlink-not-seen", severity="error", host=host.hostname,
            gpus=_indices(g for a, b, _ in missing for g in (_nvml(gpus, a.busid), _nvml(gpus, b.busid))),
            message=(f"NCCL sees no NVLink between {len(missing)} GPU pair(s) that NVML reports NVLinked: their "
                     "traffic goes over PCIe or host memory"),
            evidence=evidence_lines(evidence), fix=NVLINK_FIX)
    elif switch_nvml and not switch_nccl:
        yield HealthFinding(
            code="nccl-nvswitch-not-seen", severity="warning", host=host.hostname,
            gpus=_indices(switch_nvml),
            message="NVML reports NVLinks to NVSwitches but NCCL's view has no NVSwitch: no NVLS, and rings only",
            evidence=(f"NVML: {len(switch_nvml)} GPU(s) with NVLinks to a switch",
                      f"NCCL ({topology.name}): no <nvlink> to class 0x068000 / NVS node"),
            fix=NVLINK_FIX)


def gpu_index(gpus: dict[str | None, Gpu], busid: str | None) -> str:
    gpu = _nvml(gpus, busid)
    return str(gpu.index) if gpu is not None else str(busid)


def _affinity_differs(topology: NcclTopology, host: Host, gpus: dict[str | None, Gpu],
                      nics: dict[str | None, Nic]) -> Iterator[HealthFinding]:
    several = len({gpu.numa_node for gpu in host.gpus if gpu.numa_node is not None}) > 1 or len(host.numa_nodes) > 1
    rows: list[str] = []
    concerned: list[Gpu | None] = []
    devices: list[tuple[str, NcclGpu | NcclNet, int | None]] = [("GPU", gpu, _nvml_numa(gpus, gpu.busid))
                                                               for gpu in topology.gpus]
    devices += [("NIC", net, _nic_numa(nics, net.busid)) for net in topology.nets if net.busid]
    for kind, device, nvml_numa in devices:
        nccl_numa = topology.cpus[device.cpu].numa_id
        if nvml_numa is None or nccl_numa == nvml_numa or (nccl_numa is None and not several):
            continue
        label = device.busid if kind == "GPU" else f"{getattr(device, 'name', '')} ({device.busid})"
        rows.append(f"{kind} {label}: NVML NUMA node {nvml_numa}; NCCL puts it under CPU numaid "
                    f"{nccl_numa if nccl_numa is not None else -1}")
        if kind == "GPU":
            concerned.append(_nvml(gpus, device.busid))
    if rows:
        yield HealthFinding(
            code="nccl-affinity-differs", severity="warning", host=host.hostname, gpus=_indices(concerned),
            message=(f"NCCL places {len(rows)} GPU(s)/NIC(s) under another CPU than NVML and sysfs do: it picks NICs "
                     "and binds threads for the wrong NUMA node"),
            evidence=evidence_lines(rows), fix=AFFINITY_FIX)


def _nvml_numa(gpus: dict[str | None, Gpu], busid: str | None) -> int | None:
    gpu = _nvml(gpus, busid)
    return gpu.numa_node if gpu is not None else None


def _nic_numa(nics: dict[str | None, Nic], busid: str | None) -> int | None:
    nic = nics.get(_bus_id(busid))
    return nic.numa_node if nic is not None else None


def _is_rdma(topology: NcclTopology, net: NcclNet) -> bool:
    port = topology.pci(net.busid)
    return net.name.startswith(("mlx5", "ibp", "bnxt_re", "irdma")) or (port is not None and port.class_code == "0x020700")


def _nics_without_gdr(topology: NcclTopology, host: Host) -> Iterator[HealthFinding]:
    nets = [net for net in topology.nets if net.stated and net.gdr is False and _is_rdma(topology, net)]
    if not nets or not topology.gpus:
        return
    evidence = [f"NCCL ({topology.name}): net {net.name} gdr=0" for net in nets]
    peermem = host.capabilities.gpudirect_rdma
    if peermem is not None:
        evidence.append(f"snapshot: nvidia_peermem {'loaded' if peermem else 'not loaded'}")
    yield HealthFinding(
        code="nccl-nic-no-gdr", severity="warning", host=host.hostname, gpus=(),
        message=(f"NCCL marks {len(nets)} RDMA NIC(s) without GPUDirect RDMA: traffic between nodes is staged through "
                 "host memory"),
        evidence=evidence_lines(evidence), fix=GDR_FIX)
