"""Tables of a host: GPUs with their CPU/NUMA affinity and link state, NICs with their nearest GPUs,
the recorded gaps, and the header line that names host, source and GPU model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from linkscope.render import gpu_nic_tokens, token_style
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import format_gbps
from linkscope.topo.machine.links import network_speed
from linkscope.topo.model.host import PCIE_KINDS_NEAR_TO_FAR, Gap, Gpu, Host
from linkscope.topo.model.snapshot import Snapshot

WARN_STYLE = "bold red"


def _text(value: object | None, empty: str = "-") -> Text:
    """Plain text for an untrusted or missing value."""
    return Text(empty if value is None or value == "" else printable(str(value)))


def gpu_models(host: Host) -> str:
    """The GPU models of a host, e.g. `8x NVIDIA H100 80GB HBM3`."""
    if not host.gpus:
        return "no GPUs"
    counts = Counter(gpu.name for gpu in host.gpus if gpu.name)
    if not counts:
        return f"{len(host.gpus)} (model not recorded)"
    return ", ".join(f"{count}x {name}" for name, count in counts.items())


def host_header(snapshot: Snapshot, host: Host) -> RenderableType:
    """Host name, source, GPU models and driver versions, as plain text."""
    versions = host.versions
    software = ", ".join(
        f"{label} {value}" for label, value in (("driver", versions.driver), ("CUDA", versions.cuda_driver)) if value
    )
    lines = [
        Text.assemble(("host ", "bold"), printable(host.hostname) or "(unnamed)", ("   source ", "bold"),
                      printable(snapshot.source) or "-"),
        Text.assemble(("GPUs ", "bold"), printable(gpu_models(host)), *((("   ", ""), printable(software)) if software else ())),
    ]
    description = snapshot.meta_value("description")
    if description:
        lines.append(Text(printable(description), style="italic"))
    return Text("\n").join(lines)


def _nvlink_cell(gpu: Gpu) -> Text:
    if not gpu.nvlinks:
        return Text("-")
    active, total = gpu.nvlink_active_count, len(gpu.nvlinks)
    return Text(f"{active}/{total}", style=WARN_STYLE if active < total else "")


def _pcie_cell(gpu: Gpu) -> Text:
    if gpu.pcie_gen_max is None and gpu.pcie_width_max is None:
        return Text("-")
    gen = gpu.pcie_gen_current if gpu.pcie_gen_current is not None else gpu.pcie_gen_max
    width = gpu.pcie_width_current if gpu.pcie_width_current is not None else gpu.pcie_width_max
    text = Text(f"Gen{gen} x{width}")
    narrow = gpu.pcie_width_current is not None and gpu.pcie_width_max is not None and gpu.pcie_width_current < gpu.pcie_width_max
    if narrow:
        text.append(f" of x{gpu.pcie_width_max}", style=WARN_STYLE)
    elif gpu.pcie_gen_current is not None and gpu.pcie_gen_max is not None and gpu.pcie_gen_current < gpu.pcie_gen_max:
        text.append(f" of Gen{gpu.pcie_gen_max}", style="dim")
    return text


def gpu_table(host: Host) -> RenderableType:
    """One row per GPU: bus id, NUMA node, CPU affinity, active NVLinks, PCIe link (reduced width in red).

    The model column is left out when every GPU is the same model (the header names it).
    """
    mixed = len({gpu.name for gpu in host.gpus}) > 1
    table = Table(title="GPUs", title_justify="left", box=None, padding=(0, 1, 0, 0), header_style="bold")
    table.add_column("GPU", no_wrap=True)
    if mixed:
        table.add_column("name", overflow="fold")
    table.add_column("bus id", no_wrap=True)
    table.add_column("NUMA", no_wrap=True)
    table.add_column("CPU affinity", overflow="fold")
    table.add_column("NVLink", no_wrap=True)
    table.add_column("PCIe", no_wrap=True)
    for gpu in host.gpus:
        numa = gpu.numa_affinity if gpu.numa_affinity is not None else gpu.numa_node
        cells = [Text(f"GPU{gpu.index}")]
        if mixed:
            cells.append(_text(gpu.name))
        cells += [_text(gpu.pci_bus_id), _text(numa), _text(gpu.cpu_affinity), _nvlink_cell(gpu), _pcie_cell(gpu)]
        table.add_row(*cells)
    return table


def index_ranges(indices: Sequence[int]) -> str:
    """Compact ranges of sorted indices, e.g. `0-3,6`."""
    parts: list[str] = []
    start = previous = None
    for index in [*indices, None]:
        if index is not None and previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = index
    return ",".join(parts)


def nearest_gpus(host: Host, nic_position: int) -> tuple[str, list[int]]:
    """The closest link class between NIC `nic_position` and any GPU, and the GPU positions at that class."""
    column = [row[nic_position] for row in gpu_nic_tokens(host)]
    for kind in PCIE_KINDS_NEAR_TO_FAR:
        positions = [gpu for gpu, token in enumerate(column) if token == kind.value]
        if positions:
            return kind.value, positions
    return "", []


LINK_LAYER_SHORT = {"InfiniBand": "IB", "Ethernet": "Eth"}


def nic_table(host: Host) -> RenderableType:
    """One row per NIC: device, netdev, link layer, rate and expected GB/s, state, NUMA node, nearest GPUs."""
    if not host.nics:
        return Text("No NICs recorded.")
    table = Table(title="NICs", title_justify="left", box=None, padding=(0, 1, 0, 0), header_style="bold")
    for name in ("NIC", "device", "netdev", "link", "rate", "expect", "state", "NUMA", "nearest GPUs"):
        table.add_column(name, overflow="fold", no_wrap=name in ("NIC", "link", "rate", "expect", "NUMA"))
    for position, nic in enumerate(host.nics):
        rate, expect = Text("-"), Text("-")
        if nic.rate_gbit_per_s is not None:
            rate = Text(f"{nic.rate_gbit_per_s:g}G")
            typical_gbps = network_speed(nic.rate_gbit_per_s).typical_gbps
            expect = Text("~" + format_gbps(typical_gbps, ".0f" if typical_gbps >= 10 else ".1f"))
        state = _text(nic.state)
        if nic.state is not None and nic.state.upper() not in ("ACTIVE", "UP"):
            state.stylize(WARN_STYLE)
        token, gpus = nearest_gpus(host, position)
        nearest = Text(token, style=token_style(token)) if token else Text("-")
        if gpus:
            nearest.append(f" GPU{index_ranges([host.gpus[gpu].index for gpu in gpus])}")
        layer = LINK_LAYER_SHORT.get(nic.link_layer or "", nic.link_layer)
        table.add_row(
            Text(f"NIC{position}"),
            _text(nic.name),
            _text(nic.netdev),
            _text(layer),
            rate,
            expect,
            state,
            _text(nic.numa_node),
            nearest,
        )
    return table


def gaps_table(gaps: Sequence[Gap]) -> RenderableType:
    """What the probe could not read, and why (a partial failure is data)."""
    if not gaps:
        return Text("No gaps recorded: everything the source describes was read.")
    table = Table(title=f"Gaps ({len(gaps)})", title_justify="left", box=None, padding=(0, 1), header_style="bold")
    table.add_column("not read", overflow="fold")
    table.add_column("why", overflow="fold")
    for gap in gaps:
        table.add_row(Text(f"{gap.host}: {gap.subject}" if gap.host else gap.subject), Text(gap.reason))
    return table


def fit_numbers(table: Table, rows: Sequence[Sequence[str | Text]]) -> None:
    """Numbers are never cut short: every right-justified column of `table` gets at least the width of its
    widest cell in `rows` (and of its header's longest word), unwrapped, so a narrow terminal wraps or
    shortens the text columns instead. Call after adding the columns, then add `rows`."""
    for index, column in enumerate(table.columns):
        if column.justify != "right":
            continue
        cells = [row[index] for row in rows if index < len(row)]
        widest = max((Text(cell).cell_len if isinstance(cell, str) else cell.cell_len for cell in cells), default=0)
        header_word = max((len(word) for word in str(column.header).split()), default=0)
        column.min_width = max(widest, header_word, column.min_width or 0)
        column.no_wrap = True
