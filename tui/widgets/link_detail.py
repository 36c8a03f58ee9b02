"""The detail pane under the Links grid: everything known about the chosen cell."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from linkscope.topo.common.units import format_gbps
from linkscope.topo.model.host import Gpu, Host, LinkKind
from linkscope.tui.link_cells import GridCell


def _gpu_label(gpu: Gpu) -> str:
    return f"GPU{gpu.index}"


def _pci_path(path: tuple[str, ...]) -> str:
    return " > ".join(path) if path else "not recorded"


def describe_gpu_pair(host: Host, cell: GridCell) -> Text:
    """Kind, NVLink count and generation, P2P capabilities, PCIe paths, expected vs measured."""
    gpu_a, gpu_b = host.gpus[cell.row], host.gpus[cell.col]
    text = Text()
    text.append(f"{_gpu_label(gpu_a)} <-> {_gpu_label(gpu_b)}: ", style="bold")
    if cell.kind is LinkKind.SELF:
        text.append(f"the same GPU ({gpu_a.name})")
        return text
    link = host.link(cell.row, cell.col) if cell.kind is not None else None
    text.append(cell.token)
    if link is not None and link.kind is LinkKind.NVLINK:
        generation = link.nvlink_gen or gpu_a.nvlink_gen
        links = f"{link.nvlink_count} NVLink{'s' if link.nvlink_count != 1 else ''}"
        text.append(f"  {links}" + (f", generation {generation}" if generation else ""))
    if cell.expected is not None:
        expected = cell.expected
        text.append(f"\ntypically measured {format_gbps(expected.typical_gbps, '.0f')} ({expected.basis})")
        text.append(f"\nspec line rate {format_gbps(expected.spec_gbps, '.0f')}")
        if cell.reduced and cell.best_gbps is not None:
            text.append(f"; the best pair here: {format_gbps(cell.best_gbps, '.0f')} spec", style="bold")
    if cell.measured_gbps is not None:
        ratio = cell.ratio
        size = f" at {cell.measured_size_bytes / 2**20:.0f} MiB" if cell.measured_size_bytes else ""
        text.append(f"\nmeasured {format_gbps(cell.measured_gbps, '.1f')}{size}")
        if ratio is not None:
            text.append(f" = {ratio:.0%} of typically measured", style="bold" if cell.degraded else "")
            if cell.degraded:
                text.append(f"  {(cell.verdict or '').upper()}", style="bold reverse")
            elif cell.verdict is not None:
                text.append(f"  {cell.verdict}")
            else:
                text.append("  (copies too small to judge)")
    else:
        text.append("\nnot measured (Bench tab, or open a snapshot with measurements)")
    if cell.transports:
        text.append(f"\nNCCL log: connections via {', '.join(sorted(cell.transports))}")
        if cell.transport_below_link:
            text.append("  (P2P expected on this link: P2P is disabled or failing)", style="bold reverse")
    if link is not None and link.p2p is not None:
        p2p = link.p2p
        text.append(
            f"\nP2P read {p2p.read or '-'}  write {p2p.write or '-'}  nvlink {p2p.nvlink or '-'}  atomics {p2p.atomics or '-'}"
        )
    else:
        text.append("\nP2P capabilities not recorded")
    text.append(pair_paths((_gpu_label(gpu_a), gpu_a.pci_path), (_gpu_label(gpu_b), gpu_b.pci_path)))
    return text


def pair_paths(first: tuple[str, tuple[str, ...]], second: tuple[str, tuple[str, ...]]) -> str:
    """Both GPUs' PCIe paths: the bridges they share on one line, then where each goes on, so the pair fits three
    lines at 80 columns and shows where the paths part (each path whole on its own line when nothing is shared)."""
    (label_a, path_a), (label_b, path_b) = first, second
    shared = 0
    while shared < min(len(path_a), len(path_b)) and path_a[shared] == path_b[shared]:
        shared += 1
    if shared == 0:
        return f"\nPCIe {label_a}: {_pci_path(path_a)}\nPCIe {label_b}: {_pci_path(path_b)}"
    return (f"\nPCIe path of both: {' > '.join(path_a[:shared])}"
            f"\n  then {label_a}: {' > '.join(path_a[shared:]) or '(none)'}"
            f"\n  then {label_b}: {' > '.join(path_b[shared:]) or '(none)'}")


def describe_gpu_nic(host: Host, cell: GridCell) -> Text:
    """The path class between a GPU and a NIC, the NIC's port and both PCIe paths."""
    gpu, nic = host.gpus[cell.row], host.nics[cell.col]
    text = Text()
    text.append(f"{_gpu_label(gpu)} <-> {nic.name}: ", style="bold")
    text.append(cell.token)
    port = ", ".join(
        part for part in (nic.link_layer, f"{nic.rate_gbit_per_s:g} Gb/s" if nic.rate_gbit_per_s else None, nic.state) if part
    )
    if port:
        text.append(f"  ({port})")
    if cell.expected is not None:
        text.append(f"\ntypically measured {format_gbps(cell.expected.typical_gbps, '.0f')} through the port "
                    f"({cell.expected.basis})")
    text.append(f"\nPCIe {_gpu_label(gpu)}: {_pci_path(gpu.pci_path)}")
    text.append(f"\nPCIe {nic.name}: {_pci_path(nic.pci_path)}")
    return text


class LinkDetail(Static):
    """Shows the chosen cell; the parent sets `host`, `cell` and `nic_mode`."""

    cell: reactive[GridCell | None] = reactive(None)
    """The chosen cell, or None before the first choice."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.host: Host | None = None
        self.nic_mode = False
        self._lines = 0

    def watch_cell(self, cell: GridCell | None) -> None:
        """Redraw for the new cell."""
        self.refresh_detail()

    def describe(self) -> Text:
        """The whole detail of the chosen cell."""
        cell, host = self.cell, self.host
        if cell is None or host is None:
            return Text("Move the cursor onto a cell (arrow keys or the mouse) to see the link.")
        return describe_gpu_nic(host, cell) if self.nic_mode else describe_gpu_pair(host, cell)

    def refresh_detail(self) -> None:
        """Recompute the text (after `host`, `cell` or `nic_mode` changed)."""
        text = self.describe()
        lines = text.plain.count("\n") + 1
        self.update(text, layout=lines != self._lines)  # lay out again only when the height changes
        self._lines = lines
