"""The nvidia-smi link class of two PCI devices, computed from where they sit in the PCI tree.

A device's PCI path is the chain above it as sysfs shows it
(`/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0`):
element 0 is the host bridge (`pci0000:17`), then every bridge down to, not including, the
device itself. The classes follow the `nvidia-smi topo -m` legend (and NCCL's path types):

- PIX: both hang off the same PCIe switch (at most one bridge, the switch, between them);
- PXB: a common bridge but several bridges (switches) between them, no host bridge;
- PHB: same host bridge (the CPU root complex), different root ports;
- NODE: different host bridges on the same NUMA node;
- SYS: different NUMA nodes (or the node is unknown for either).
"""

from __future__ import annotations

from collections.abc import Sequence

from linkscope.topo.model.host import LinkKind


def _common_prefix_length(path_a: Sequence[str], path_b: Sequence[str]) -> int:
    length = 0
    for element_a, element_b in zip(path_a, path_b, strict=False):
        if element_a != element_b:
            break
        length += 1
    return length


def classify_pci_pair(
    path_a: Sequence[str],
    numa_a: int | None,
    path_b: Sequence[str],
    numa_b: int | None,
) -> LinkKind:
    """The legend class (PIX/PXB/PHB/NODE/SYS) of the path between two devices."""
    if not path_a or not path_b or path_a[0] != path_b[0]:
        if numa_a is not None and numa_a == numa_b:
            return LinkKind.NODE
        return LinkKind.SYS
    common = _common_prefix_length(path_a, path_b)
    if common == 1:
        return LinkKind.PHB
    below_a = len(path_a) - common
    below_b = len(path_b) - common
    if below_a <= 1 and below_b <= 1:
        return LinkKind.PIX
    return LinkKind.PXB
