"""The GPU identity table: NVML index, CUDA index, PCI bus id, UUID, NUMA node, CPUs, nearest NIC.

NVML numbers GPUs in PCI bus id order; CUDA numbers them fastest first unless
`CUDA_DEVICE_ORDER=PCI_BUS_ID`, then renumbers what `CUDA_VISIBLE_DEVICES` leaves visible.
`CUDA_VISIBLE_DEVICES` is parsed here exactly the way torch parses it
(`torch.cuda._parse_visible_devices` and `_transform_uuid_to_ordinals`), without importing torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from linkscope.topo.common.frozen import frozen
from linkscope.topo.machine.links import nearest_nics
from linkscope.topo.model.host import Host, MigDevice

VisibleDevices = list[int] | list[str]


def _leading_integer(text: str) -> int:
    """torch's strtoul-like reading: the integer an entry starts with, -1 when it starts with none.

    Like torch, a lone sign (`+`, `-`) raises ValueError.
    """
    if not text:
        return -1
    end = 0
    for position, char in enumerate(text):
        if not (char.isdigit() or (position == 0 and char in "+-")):
            break
        end = position + 1
    return int(text[:end]) if end > 0 else -1


def _prefixed_list(value: str, prefix: str) -> list[str]:
    entries: list[str] = []
    for entry in value.split(","):
        if entry in entries:
            return []
        if not entry.startswith(prefix):
            break
        entries.append(entry)
    return entries


def parse_visible_devices(value: str | None) -> VisibleDevices | None:
    """`CUDA_VISIBLE_DEVICES` as torch reads it; None when unset (every GPU visible).

    Integer entries: leading digits count (`1gpu2` is 1), a negative or non-numeric entry ends
    the list, a repeated index makes it empty. `GPU-`/`MIG-` UUID lists: entries without the
    prefix end the list, a repeated entry makes it empty.
    """
    if value is None:
        return None
    if value.startswith("GPU-"):
        return _prefixed_list(value, "GPU-")
    if value.startswith("MIG-"):
        return _prefixed_list(value, "MIG-")
    ordinals: list[int] = []
    for entry in value.split(","):
        number = _leading_integer(entry.strip())
        if number in ordinals:
            return []
        if number < 0:
            break
        ordinals.append(number)
    return ordinals


def uuids_to_ordinals(candidates: list[str], uuids: list[str]) -> list[int]:
    """UUID prefixes to positions in `uuids` (torch's rule: unknown or ambiguous ends, repeats empty)."""
    ordinals: list[int] = []
    for candidate in candidates:
        matches = [position for position, uuid in enumerate(uuids) if uuid.startswith(candidate)]
        if len(matches) != 1:
            break
        if matches[0] in ordinals:
            return []
        ordinals.append(matches[0])
    return ordinals


@frozen
class IdentityRow:
    """One GPU under all the names it goes by."""

    nvml_index: int
    cuda_index: int | None
    """What `cuda:N` / `torch.cuda.device(N)` means in this environment; None when not visible."""
    pci_bus_id: str | None
    uuid: str | None
    name: str
    numa_node: int | None
    cpu_affinity: str | None
    nearest_nics: tuple[str, ...]
    nearest_nic_token: str | None
    """Legend class of the path to the nearest NIC(s) (`PIX`, `NODE`...)."""
    mig_devices: tuple[MigDevice, ...] = ()
    """A MIG-enabled GPU's MIG devices: what `CUDA_VISIBLE_DEVICES=MIG-...` selects, one at a time."""


@frozen
class IdentityTable:
    """The identity rows in NVML order, plus the environment that decided the CUDA numbering."""

    rows: tuple[IdentityRow, ...]
    device_order: str
    """`PCI_BUS_ID` or `FASTEST_FIRST` (CUDA's default)."""
    visible_devices: str | None
    notes: tuple[str, ...] = ()


def cuda_physical_order(host: Host, device_order: str) -> tuple[list[int], list[str]]:
    """GPU positions in the order CUDA enumerates them, and notes on how sure that is."""
    positions = list(range(len(host.gpus)))
    if device_order == "PCI_BUS_ID":
        return sorted(positions, key=lambda p: host.gpus[p].pci_bus_id or ""), []
    names = {gpu.name for gpu in host.gpus}
    if len(names) <= 1:
        return positions, []
    ranked = sorted(positions, key=lambda p: (-_capability_rank(host.gpus[p].compute_capability), host.gpus[p].pci_bus_id or ""))
    return ranked, [
        "mixed GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA puts the fastest first; the CUDA indices "
        "shown assume newest compute capability first. Set CUDA_DEVICE_ORDER=PCI_BUS_ID to make them certain."
    ]


def _capability_rank(capability: str | None) -> float:
    try:
        major, _, minor = (capability or "0.0").partition(".")
        return int(major) + int(minor or 0) / 100
    except ValueError:
        return 0.0


def identity_table(host: Host, env: Mapping[str, str] | None = None) -> IdentityTable:
    """The identity table of `host` under environment `env` (default: this process's environment)."""
    environment = os.environ if env is None else env
    device_order = "PCI_BUS_ID" if environment.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" else "FASTEST_FIRST"
    raw_visible = environment.get("CUDA_VISIBLE_DEVICES")
    order, notes = cuda_physical_order(host, device_order)
    cuda_of: dict[int, int] = {}
    try:
        visible = parse_visible_devices(raw_visible)
    except ValueError:
        visible = []
        notes.append(f"CUDA_VISIBLE_DEVICES={raw_visible!r} cannot be parsed (torch raises on it): no GPU is visible")
    if visible is None:
        cuda_of = {position: cuda for cuda, position in enumerate(order)}
    elif visible and isinstance(visible[0], str) and visible[0].startswith("MIG-"):
        notes.append("CUDA_VISIBLE_DEVICES names MIG instances: CUDA sees one MIG device, not a whole GPU")
    elif visible and isinstance(visible[0], str):
        uuids = [host.gpus[p].uuid or "" for p in order]
        for cuda, ordinal in enumerate(uuids_to_ordinals([str(v) for v in visible], uuids)):
            cuda_of[order[ordinal]] = cuda
    else:
        for cuda, ordinal in enumerate(int(v) for v in visible):
            if ordinal >= len(order):
                break
            cuda_of[order[ordinal]] = cuda
    if raw_visible is not None and not cuda_of and not notes:
        notes.append(f"CUDA_VISIBLE_DEVICES={raw_visible!r} leaves no GPU visible")
    rows = []
    for position, gpu in enumerate(host.gpus):
        nics, token = nearest_nics(host, position)
        rows.append(
            IdentityRow(
                nvml_index=gpu.index,
                cuda_index=cuda_of.get(position),
                pci_bus_id=gpu.pci_bus_id,
                uuid=gpu.uuid,
                name=gpu.name,
                numa_node=gpu.numa_node,
                cpu_affinity=gpu.cpu_affinity,
                nearest_nics=nics,
                nearest_nic_token=token,
                mig_devices=gpu.mig_devices,
            )
        )
    return IdentityTable(tuple(rows), device_order, raw_visible, tuple(notes))
