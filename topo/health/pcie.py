"""PCIe link health: a narrower link than the slot allows (always), a slower generation only under load.

An idle GPU trains its link down to save power (Gen1 at rest is normal), so a generation below the
maximum counts only in a recording, at a reading where the GPU moved data over PCIe.
"""

from __future__ import annotations

from collections.abc import Iterator

from linkscope.topo.common.units import format_gbps
from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines, gpu_label, index_list

LOADED_PCIE_GBPS = 0.5
"""PCIe TX+RX (GB/s) above which a reading counts as "under load" for the generation rule."""


def pcie_width_reduced(context: HealthContext) -> Iterator[HealthFinding]:
    """A GPU whose PCIe link trained narrower than its maximum (x8 of x16): half the host bandwidth."""
    for host in context.snapshot.hosts:
        narrow = [gpu for gpu in host.gpus if gpu.pcie_width_current is not None and gpu.pcie_width_max is not None
                  and gpu.pcie_width_current < gpu.pcie_width_max]
        if not narrow:
            continue
        indices = tuple(gpu.index for gpu in narrow)
        yield HealthFinding(
            "pcie-width-reduced", "warning", host.hostname, indices,
            f"the PCIe link of {index_list(indices)} runs narrower than it can: host copies, and peer traffic "
            "without NVLink, get a fraction of the bandwidth",
            evidence_lines(f"{gpu_label(gpu)}: x{gpu.pcie_width_current} of x{gpu.pcie_width_max}"
                           f" (bus {gpu.pci_bus_id or '?'})" for gpu in narrow),
            "reseat the GPU or its riser; check `nvidia-smi -q -d PCIE` and `lspci -vv` (LnkSta) after a reboot",
        )


def pcie_gen_low_under_load(context: HealthContext) -> Iterator[HealthFinding]:
    """A GPU whose PCIe generation stayed below the maximum while it moved data (from a recording)."""
    recording = context.snapshot.recording
    if recording is None or not context.snapshot.hosts:
        return
    host = next((h for h in context.snapshot.hosts if h.hostname == recording.hostname), context.snapshot.hosts[0])
    maximum = {gpu.index: gpu.pcie_gen_max for gpu in host.gpus}
    worst: dict[int, tuple[int, float, float]] = {}
    for sample in recording.samples:
        for gpu in sample.gpus:
            gen_max = maximum.get(gpu.index)
            load = (gpu.pcie_tx_gbps or 0.0) + (gpu.pcie_rx_gbps or 0.0)
            if gen_max is None or gpu.pcie_gen_current is None or load < LOADED_PCIE_GBPS:
                continue
            if gpu.pcie_gen_current < gen_max and (gpu.index not in worst or load > worst[gpu.index][1]):
                worst[gpu.index] = (gpu.pcie_gen_current, load, sample.t_s)
    if not worst:
        return
    indices = tuple(sorted(worst))
    yield HealthFinding(
        "pcie-gen-low-under-load", "warning", host.hostname, indices,
        f"the PCIe link of {index_list(indices)} stayed below its maximum generation while moving data",
        evidence_lines(f"GPU{index}: Gen{gen} of Gen{maximum[index]} at t = {t_s:g} s with {format_gbps(load, '.1f')} on PCIe"
                       for index, (gen, load, t_s) in sorted(worst.items())),
        "check the slot and BIOS PCIe speed settings and `nvidia-smi -q -d PCIE` under load; a link that will not "
        "train up is a riser, slot or board fault",
    )
