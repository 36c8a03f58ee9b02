"""Platform settings that change the path data takes: P2P off, IOMMU translation, MIG, GPUDirect RDMA module."""

from __future__ import annotations

from collections.abc import Iterator

from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines, index_list
from linkscope.topo.model.host import Host, Link, LinkKind, Nic

PASSTHROUGH = "identity"
"""IOMMU default-domain type of `iommu=pt`: devices' DMA is not translated."""


def is_rdma_nic(nic: Nic) -> bool:
    """True for an RDMA device (InfiniBand or RoCE: `mlx5_0` next to its netdev), not a plain Ethernet port."""
    return nic.link_layer == "InfiniBand" or nic.name != nic.netdev


def _pair(host: Host, link: Link) -> str:
    return f"GPU{host.gpus[link.a].index}-GPU{host.gpus[link.b].index}"


def _p2p_word(link: Link) -> str:
    p2p = link.p2p
    return f"read {p2p.read or '?'}, write {p2p.write or '?'}" if p2p else "?"


def p2p_off(context: HealthContext) -> Iterator[HealthFinding]:
    """GPU pairs without peer access that could have it: NVLink pairs, pairs disabled by a registry key, and
    PCIe pairs whose class has P2P elsewhere on the host."""
    for host in context.snapshot.hosts:
        ok_classes = {link.kind for link in host.links if link.p2p is not None and link.p2p.any_ok}
        off: list[tuple[Link, str]] = []
        for link in host.links:
            p2p = link.p2p
            if p2p is None or p2p.any_ok:
                continue
            if "DR" in (p2p.read, p2p.write):
                off.append((link, "disabled by a driver registry key (DR)"))
            elif link.kind is LinkKind.NVLINK:
                off.append((link, f"{link.token} without peer access"))
            elif link.kind in ok_classes:
                off.append((link, f"{link.token}, while other {link.token} pairs here have P2P"))
        if not off:
            continue
        indices = tuple(sorted({host.gpus[position].index for link, _ in off for position in (link.a, link.b)}))
        nvlink = any(link.kind is LinkKind.NVLINK for link, _ in off)
        yield HealthFinding(
            "p2p-off", "error" if nvlink else "warning", host.hostname, indices,
            f"{len(off)} GPU pair(s) that could copy peer to peer do not ({index_list(indices)}): their traffic is "
            "staged through host memory",
            evidence_lines(f"{_pair(host, link)}: {why} ({_p2p_word(link)})" for link, why in off),
            "check `nvidia-smi topo -p2p r`; look for a driver registry key (RMP2P...), a hypervisor that hides "
            "peer access, or an IOMMU/ACS setting",
        )


def iommu_translates_p2p(context: HealthContext) -> Iterator[HealthFinding]:
    """An IOMMU that translates DMA (not passthrough) on a host with PCIe peer traffic or RDMA NICs."""
    for host in context.snapshot.hosts:
        caps = host.capabilities
        if not caps.iommu_enabled or caps.iommu_mode == PASSTHROUGH:
            continue
        pcie_peers = [link for link in host.links if link.kind.is_pcie and link.p2p is not None and link.p2p.any_ok]
        rdma = [nic.name for nic in host.nics if is_rdma_nic(nic)]
        if not pcie_peers and not rdma:
            continue
        indices = tuple(sorted({host.gpus[p].index for link in pcie_peers for p in (link.a, link.b)}))
        evidence = [f"IOMMU enabled, default domain {caps.iommu_mode or 'unknown (not readable)'}"]
        if pcie_peers:
            evidence.append(f"{len(pcie_peers)} GPU pair(s) with P2P over PCIe, e.g. {_pair(host, pcie_peers[0])} "
                            f"({pcie_peers[0].token})")
        if rdma:
            evidence.append(f"RDMA NICs: {', '.join(rdma)}")
        yield HealthFinding(
            "iommu-translates-p2p", "warning", host.hostname, indices,
            "the IOMMU translates device DMA: peer-to-peer and GPUDirect RDMA traffic goes up to the root complex "
            "instead of across the PCIe switch, at a fraction of the bandwidth (or fails)",
            tuple(evidence),
            "boot with `iommu=pt` (intel_iommu=on iommu=pt / amd_iommu=on iommu=pt) or the IOMMU off, and disable ACS "
            "on the PCIe switches (ACS needs root to read: `sudo lspci -vvv | grep ACSCtl`)",
        )


def mig_enabled(context: HealthContext) -> Iterator[HealthFinding]:
    """GPUs in MIG mode: instances have no NVLink or peer access, so NCCL cannot use the box's fast links."""
    for host in context.snapshot.hosts:
        mig = [gpu.index for gpu in host.gpus if gpu.mig_enabled]
        if not mig:
            continue
        yield HealthFinding(
            "mig-enabled", "warning", host.hostname, tuple(mig),
            f"MIG is enabled on {index_list(mig)}: MIG instances have no NVLink or P2P, so collectives between them "
            "go through host memory",
            tuple(f"GPU{index}: MIG mode enabled" for index in mig),
            "disable MIG for multi-GPU training (`nvidia-smi -i N -mig 0` as root, then reset the GPU)",
        )


def peermem_missing(context: HealthContext) -> Iterator[HealthFinding]:
    """RDMA NICs beside GPUs while `nvidia_peermem` is not loaded: no GPUDirect RDMA through the peer-memory path."""
    for host in context.snapshot.hosts:
        rdma = [nic.name for nic in host.nics if is_rdma_nic(nic)]
        if host.capabilities.gpudirect_rdma is not False or not rdma or not host.gpus:
            continue
        yield HealthFinding(
            "peermem-missing", "warning", host.hostname, (),
            "RDMA NICs are present but the nvidia_peermem module is not loaded: unless NCCL can use DMA-BUF "
            "(open kernel modules, Linux 5.12+), network traffic is staged through host memory",
            (f"RDMA NICs: {', '.join(rdma)}", "/sys/module/nvidia_peermem: absent"),
            "`sudo modprobe nvidia_peermem` (and load it at boot), or check that NCCL_DMABUF_ENABLE works here; "
            "NCCL_DEBUG=INFO says `GPU Direct RDMA Enabled` when it does",
        )
