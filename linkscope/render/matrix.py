"""The link matrix (`nvidia-smi topo -m` style, coloured by link class) and its legend.

The matrix wraps into blocks of columns that fit the console width, so a 72-GPU host prints at
80 columns; NIC columns are named `NIC<n>` as nvidia-smi does, with a NIC legend below.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from linkscope.render import UNKNOWN_TOKEN, gpu_nic_tokens, matrix_tokens, token_style
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import format_gbps, format_gbps_range
from linkscope.topo.machine.links import LinkSpeed, link_speed
from linkscope.topo.model.host import Host, LinkKind, parse_link_token

TOKEN_MEANINGS: dict[LinkKind, str] = {
    LinkKind.SELF: "self",
    LinkKind.NVLINK: "a bonded set of NVLinks (the number is how many)",
    LinkKind.PIX: "at most one PCIe bridge (one PCIe switch)",
    LinkKind.PXB: "several PCIe bridges, no host bridge",
    LinkKind.PHB: "through a PCIe host bridge (the CPU)",
    LinkKind.NODE: "between PCIe host bridges inside one NUMA node",
    LinkKind.SYS: "across the CPU interconnect between NUMA nodes",
}
"""What each legend token means, after the `nvidia-smi topo -m` legend."""

GROUP_GAP = 2
"""Spaces between the GPU columns and the NIC columns."""


@frozen
class _Column:
    label: str
    cells: tuple[str, ...]
    starts_group: bool

    @property
    def width(self) -> int:
        return max(len(self.label), *(len(cell) for cell in self.cells)) if self.cells else len(self.label)


def _gpu_labels(host: Host) -> list[str]:
    """Row and column names of the GPUs, by their NVML index as nvidia-smi names them."""
    return [f"GPU{gpu.index}" for gpu in host.gpus]


class LinkMatrix:
    """GPU rows x (GPU, NIC) columns of legend tokens, wrapped into blocks that fit the width."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def _columns(self) -> list[_Column]:
        gpu_rows = matrix_tokens(self.host)
        nic_rows = gpu_nic_tokens(self.host)
        labels = _gpu_labels(self.host)
        columns = [_Column(labels[i], tuple(row[i] for row in gpu_rows), False) for i in range(len(gpu_rows))]
        columns += [_Column(f"NIC{j}", tuple(row[j] for row in nic_rows), j == 0) for j in range(len(self.host.nics))]
        return columns

    def _blocks(self, columns: list[_Column], label_width: int, max_width: int) -> Iterator[list[_Column]]:
        block: list[_Column] = []
        used = label_width
        for column in columns:
            need = column.width + 1 + (GROUP_GAP if column.starts_group else 0)
            if block and used + need > max_width:
                yield block
                block, used = [], label_width
            block.append(column)
            used += need
        if block:
            yield block

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Each line as segments, written as rich writes a `Text` line in bold with the tokens' styles on it
        (unstyled neighbours joined into one segment), at about a third of the cost."""
        if not self.host.gpus:
            yield Text("(no GPUs recorded)")
            return
        labels = _gpu_labels(self.host)
        label_width = max(len(label) for label in labels)
        columns = self._columns()
        bold = console.get_style("bold")
        styles = {token: bold + console.get_style(token_style(token)) for column in columns for token in column.cells}
        for number, block in enumerate(self._blocks(columns, label_width, options.max_width)):
            if number:
                yield Segment.line()
            header: list[tuple[str, Style | None]] = [(" " * label_width, None)]
            for column in block:
                header += [(_gap(column), None), (column.label.center(column.width), bold)]
            yield from _line_segments(header, bold)
            for row, label in enumerate(labels):
                line: list[tuple[str, Style | None]] = [(label.ljust(label_width), None)]
                for column in block:
                    token = column.cells[row]
                    line += [(_gap(column), None), (token.center(column.width), styles[token])]
                yield from _line_segments(line, bold)


def _gap(column: _Column) -> str:
    """The spaces before `column` (wider before the first NIC column)."""
    return " " * ((GROUP_GAP if column.starts_group else 0) + 1)


def _line_segments(pieces: list[tuple[str, Style | None]], base: Style) -> Iterator[Segment]:
    """One line of (text, style) pieces, None meaning `base`, ending in a new line; pieces in `base` that follow
    one another are joined, as a `Text` in `base` renders what was appended to it without a style."""
    plain = ""
    for text, style in pieces:
        if style is None:
            plain += text
            continue
        if plain:
            yield Segment(plain, base)
            plain = ""
        yield Segment(text, style)
    if plain:
        yield Segment(plain, base)
    yield Segment.line()


def link_matrix(host: Host) -> RenderableType:
    """The link matrix of `host` as a renderable that wraps to the console width."""
    return LinkMatrix(host)


def nic_legend(host: Host) -> RenderableType:
    """`NIC<n>: <device>` lines naming the matrix's NIC columns (device names are untrusted text)."""
    labels = [Text.assemble((f"NIC{j}", "bold"), ": ", printable(nic.name)) for j, nic in enumerate(host.nics)]
    return Columns(labels, padding=(0, 3))


def _speeds_by_token(host: Host) -> dict[str, list[LinkSpeed]]:
    speeds: dict[str, list[LinkSpeed]] = {}
    for link in host.links:
        if 0 <= link.a < len(host.gpus) and 0 <= link.b < len(host.gpus):
            speeds.setdefault(link.token, []).append(link_speed(host, link))
    return speeds


def _speed_text(speeds: list[LinkSpeed]) -> tuple[str, str]:
    bases = sorted({speed.basis for speed in speeds})
    basis = bases[0] if len(bases) == 1 else f"{bases[0]} (and {len(bases) - 1} more)"
    typical = format_gbps_range(speed.typical_gbps for speed in speeds)
    return f"~{typical} (spec {format_gbps_range(speed.spec_gbps for speed in speeds)})", basis


def _token_order(token: str) -> tuple[int, int]:
    try:
        kind, count = parse_link_token(token)
    except ValueError:
        return (99, 0)
    order = list(TOKEN_MEANINGS).index(kind)
    return (order, -count)


def link_legend(host: Host) -> RenderableType:
    """The tokens present on `host`, what each means, and the bandwidth a GPU pair should get over it."""
    speeds = _speeds_by_token(host)
    tokens = {token for row in matrix_tokens(host) for token in row}
    tokens |= {token for row in gpu_nic_tokens(host) for token in row}
    tokens.discard("X")
    table = Table(title="Legend (expected GPU-GPU bandwidth per direction)", title_justify="left", box=None, padding=(0, 1))
    table.add_column("link", no_wrap=True)
    table.add_column("meaning")
    table.add_column("GPU pair", no_wrap=True)
    table.add_column("basis")
    for token in sorted(tokens, key=_token_order):
        style = token_style(token)
        if token == UNKNOWN_TOKEN:
            table.add_row(Text(token, style=style), "not recorded in this snapshot", "", "")
            continue
        kind, count = parse_link_token(token)
        meaning = TOKEN_MEANINGS[kind]
        if kind is LinkKind.NVLINK:
            meaning = f"a bonded set of {count} NVLink{'s' if count != 1 else ''}"
        bandwidth, basis = _speed_text(speeds[token]) if token in speeds else ("(GPU-NIC only)", "")
        table.add_row(Text(token, style=style), meaning, bandwidth, basis)
    return table


def p2p_note(host: Host) -> Text | None:
    """The GPU pairs `nvidia-smi topo -p2p` says cannot copy peer to peer (None when every pair read can, or none
    was read): their traffic is staged through host memory, whatever the legend says of their link."""
    off = [link for link in host.links if link.p2p is not None and not link.p2p.any_ok]
    if not off:
        return None
    from linkscope.topo.cost.params import HOST_PATH_FRACTION  # the cost model loads only for pairs that need it
    from linkscope.topo.machine.links import gpu_pcie_speed

    pairs = ", ".join(f"GPU{host.gpus[link.a].index}-GPU{host.gpus[link.b].index} ({link.token})" for link in off[:8])
    more = f" and {len(off) - 8} more" if len(off) > 8 else ""
    staged = min(gpu_pcie_speed(host, position).typical_gbps for link in off for position in (link.a, link.b))
    return Text(f"P2P not supported ({off[0].p2p.read if off[0].p2p else '?'} in `nvidia-smi topo -p2p`): {pairs}{more}: "
                f"copies and NCCL between them are staged through host memory, about "
                f"{format_gbps(staged * HOST_PATH_FRACTION, '.0f')} rather than the legend's figure", style="bold")
