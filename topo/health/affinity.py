"""Affinity: a GPU whose nearest NIC sits on another NUMA node, and this process bound away from its GPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from linkscope.topo.common.cpulist import format_cpulist, parse_cpulist
from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines, gpu_label, index_list
from linkscope.topo.machine.links import nearest_nics
from linkscope.topo.model.host import Gpu, Host


def _gpu_cpus(host: Host, gpu: Gpu) -> set[int] | None:
    """The CPUs local to `gpu`: its affinity list, else its NUMA node's CPUs."""
    text = gpu.cpu_affinity
    if not text and gpu.numa_node is not None:
        text = next((node.cpus for node in host.numa_nodes if node.id == gpu.numa_node), None)
    if not text:
        return None
    with contextlib.suppress(ValueError):
        return parse_cpulist(text)
    return None


def nic_numa_mismatch(context: HealthContext) -> Iterator[HealthFinding]:
    """A GPU whose nearest NIC(s) all sit on another NUMA node: network traffic crosses the CPU interconnect."""
    for host in context.snapshot.hosts:
        nic_node = {nic.name: nic.numa_node for nic in host.nics}
        far: list[tuple[Gpu, str, int]] = []
        for position, gpu in enumerate(host.gpus):
            names, _ = nearest_nics(host, position)
            nodes = {nic_node[name] for name in names if nic_node.get(name) is not None}
            if gpu.numa_node is None or not nodes or gpu.numa_node in nodes:
                continue
            far.append((gpu, ", ".join(names), min(node for node in nodes if node is not None)))
        if not far:
            continue
        indices = tuple(gpu.index for gpu, _, _ in far)
        yield HealthFinding(
            "nic-numa-mismatch", "warning", host.hostname, indices,
            f"the nearest NIC of {index_list(indices)} is on another NUMA node: GPUDirect RDMA and staging "
            "buffers cross the CPU interconnect",
            evidence_lines(f"{gpu_label(gpu)} on NUMA node {gpu.numa_node}, nearest NIC {names} on node {node}"
                           for gpu, names, node in far),
            "check the NIC and GPU slots (a NIC in the other socket's slot); pin NCCL_IB_HCA per local rank to a "
            "NIC of the GPU's own node",
        )


def cpu_binding_far(context: HealthContext) -> Iterator[HealthFinding]:
    """This process (doctored on this machine) is bound to CPUs none of which are local to its GPU."""
    binding = context.cpu_binding
    if binding is None or not context.snapshot.hosts:
        return
    host = context.snapshot.host
    by_index = {gpu.index: gpu for gpu in host.gpus}
    visible = list(context.cuda_order) if context.cuda_order is not None else sorted(by_index)
    if context.local_rank is not None and 0 <= context.local_rank < len(visible):
        candidates = [visible[context.local_rank]]
        whose = f"LOCAL_RANK {context.local_rank}'s GPU"
    else:
        candidates = visible
        whose = "any visible GPU"
    local = {index: _gpu_cpus(host, by_index[index]) for index in candidates if index in by_index}
    known = {index: cpus for index, cpus in local.items() if cpus}
    if not known or any(binding & cpus for cpus in known.values()):
        return
    indices = tuple(sorted(known))
    yield HealthFinding(
        "cpu-binding-far", "warning", host.hostname, indices,
        f"this process may only run on CPUs {format_cpulist(binding)}, none of them local to {whose} "
        f"({index_list(indices)}): every kernel launch and host copy crosses the CPU interconnect",
        evidence_lines([f"process CPU binding: {format_cpulist(binding)}",
                        *(f"{gpu_label(by_index[index])} CPUs: {by_index[index].cpu_affinity or format_cpulist(cpus)}"
                          for index, cpus in known.items())]),
        "bind each rank to its GPU's node (`numactl --cpunodebind=N --membind=N`, or the launcher's "
        "--cpu-bind / torchrun --numa-binding)",
    )
