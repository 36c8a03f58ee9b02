"""Topology: NUMA nodes -> PCIe host bridges and switches -> GPUs and NICs, and the identity table; for a
cluster, first the hosts with their cross-host findings (Enter on one shows it here and on Links)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Static
from textual.widgets.tree import TreeNode

from linkscope.probes.identity import IdentityTable, identity_table
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.health.cluster import host_summaries
from linkscope.topo.health.finding import HealthFinding
from linkscope.topo.model.host import Gpu, Host, Nic
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.host_health import HostHealth
from linkscope.tui.messages import HostPicked
from linkscope.tui.text import plain
from linkscope.tui.widgets.kept_table import KeptTable
from linkscope.tui.widgets.plain_tree import PlainTree
from linkscope.tui.widgets.static_update import update_in_place


@dataclass
class _Bridge:
    """One PCI bridge in the tree being built, with what hangs below it."""

    children: dict[str, _Bridge] = field(default_factory=dict)
    devices: list[Gpu | Nic] = field(default_factory=list)


def _insert(root: _Bridge, path: tuple[str, ...], device: Gpu | Nic) -> None:
    node = root
    for bus_id in path:
        node = node.children.setdefault(bus_id, _Bridge())
    node.devices.append(device)


def _device_label(device: Gpu | Nic, health: dict[int, list[str]]) -> Text:
    if isinstance(device, Gpu):
        text = plain(f"GPU{device.index} ", "bold")
        text.append(device.name or "GPU")
        if device.pci_bus_id:
            text.append(f"  {device.pci_bus_id}")
        if health.get(device.index):
            text.append("  ! " + ", ".join(health[device.index]), style="bold reverse")
        return text
    text = plain(f"NIC {device.name}", "bold")
    details = [
        part
        for part in (device.link_layer, f"{device.rate_gbit_per_s:g} Gb/s" if device.rate_gbit_per_s else None, device.state)
        if part
    ]
    if details:
        text.append("  " + ", ".join(details))
    return text


def _chain(bus_id: str, bridge: _Bridge) -> tuple[list[str], _Bridge]:
    """The bus ids from `bus_id` down a chain of bridges that each hold one bridge and nothing else, and the
    bridge at its end (where the tree branches or devices hang)."""
    chain = [bus_id]
    while len(bridge.children) == 1 and not bridge.devices:
        (bus_id, bridge), = bridge.children.items()
        chain.append(bus_id)
    return chain, bridge


def _bridge_label(chain: list[str]) -> Text:
    """`bridge A`, or for a chain `bridge A > ... > Z (n bridges)`; host bridges (`pci0000:15`) say so."""
    kind = "host bridge" if chain[0].startswith("pci") else "bridge"
    if len(chain) == 1:
        return plain(f"{kind} {chain[0]}")
    middle = " > " if len(chain) == 2 else " > ... > "
    return plain(f"{kind} {chain[0]}{middle}{chain[-1]} ({len(chain)} bridges)")


def _add_bridge(tree_node: TreeNode[str], bridge: _Bridge, health: dict[int, list[str]]) -> None:
    """Add `bridge`'s children: chains of single-child bridges as one line, and a bridge that holds just one
    device as that device's line (so the GPUs, not the bridges, fill a small terminal)."""
    for bus_id, child in bridge.children.items():
        chain, end = _chain(bus_id, child)
        if not end.children and len(end.devices) == 1:
            label = _device_label(end.devices[0], health)
            label.append(f"  via {_bridge_label(chain).plain}", style="dim")
            tree_node.add_leaf(label)
            continue
        _add_bridge(tree_node.add(_bridge_label(chain), expand=True), end, health)
    for device in bridge.devices:
        tree_node.add_leaf(_device_label(device, health))


def fill_tree(tree: PlainTree, host: Host, health: dict[int, list[str]] | None = None) -> None:
    """Rebuild `tree` for `host`: one branch per NUMA node (and one for devices of unknown node); GPUs with
    health findings carry their codes."""
    health = health or {}
    tree.clear()
    tree.root.set_label(plain(host.hostname or "host", "bold"))
    by_numa: dict[int | None, _Bridge] = {}
    devices: list[Gpu | Nic] = [*host.gpus, *host.nics]
    for device in devices:
        _insert(by_numa.setdefault(device.numa_node, _Bridge()), device.pci_path, device)
    numa_info = {node.id: node for node in host.numa_nodes}
    node_ids = sorted({*numa_info, *(key for key in by_numa if key is not None)})
    for node_id in node_ids:
        info = numa_info.get(node_id)
        label = plain(f"NUMA {node_id}", "bold")
        if info is not None:
            label.append(
                f"  CPUs {info.cpus or '?'}  memory {format_size_bytes(info.memory_bytes) if info.memory_bytes else '?'}"
            )
        _add_bridge(tree.root.add(label, expand=True), by_numa.get(node_id, _Bridge()), health)
    if None in by_numa:
        _add_bridge(tree.root.add(plain("NUMA node unknown", "bold"), expand=True), by_numa[None], health)
    tree.root.expand()


HOST_COLUMNS = ("host", "GPUs", "NVLinks", "PCIe", "rails", "driver", "NVLink domain", "findings")


def host_rows(snapshot: Snapshot, findings: Sequence[HealthFinding]) -> list[list[Text]]:
    """One row per host of a cluster (:func:`topo.health.cluster.host_summaries`): an odd host is marked `!` before
    its name (the findings column may lie out of view) and its finding codes are bold."""
    rows = []
    for row in host_summaries(snapshot, findings):
        name = plain(f"! {row.hostname}", "bold") if row.findings else plain(f"  {row.hostname}")
        cells = [name, plain(row.gpus if row.gpus else "-"), plain(row.nvlinks), plain(row.pcie_width),
                 plain(row.rails if row.gpus else "-"), plain(row.driver), plain(row.domain),
                 plain(", ".join(row.findings) or "-", "bold" if row.findings else "")]
        rows.append(cells)
    return rows


IDENTITY_COLUMNS = ("NVML", "health", "CUDA", "bus id", "PCIe", "NUMA", "nearest NIC", "CPU affinity", "name", "UUID")
"""Most used first: the indices people mix up, whether the GPU is healthy, where it sits and what is near it;
the long name and UUID (alike or opaque across a box) last, where a narrow terminal cuts them."""


def pcie_label(gpu: Gpu | None) -> Text:
    """`Gen5 x16`, with the maximum where the link runs below it (`Gen5 x8/16 <`); a dash when not read."""
    if gpu is None or (gpu.pcie_gen_current is None and gpu.pcie_width_current is None and gpu.pcie_gen_max is None):
        return Text("-")
    gen = gpu.pcie_gen_current or gpu.pcie_gen_max
    width = gpu.pcie_width_current or gpu.pcie_width_max
    narrower = gpu.pcie_width_current is not None and gpu.pcie_width_max is not None and \
        gpu.pcie_width_current < gpu.pcie_width_max
    text = Text(f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}")
    if narrower:
        text.append(f"/{gpu.pcie_width_max} <", style="bold")
    return text


def health_label(codes: list[str] | None, judged: bool) -> Text:
    """`ok`, `! code, code` (bold) for a GPU with findings, or `...` while the rules still run."""
    if not judged:
        return Text("...")
    return plain("! " + ", ".join(codes), "bold") if codes else Text("ok")


def identity_rows(table: IdentityTable, host: Host | None = None, health: dict[int, list[str]] | None = None) -> list[list[Text]]:
    """One row per GPU of `probes.identity`'s table, in :data:`IDENTITY_COLUMNS` order (PCIe link from `host`,
    health codes from `health`, None while not judged yet)."""
    gpus = {gpu.index: gpu for gpu in host.gpus} if host is not None else {}
    rows = []
    for row in table.rows:
        nearest = f"{', '.join(row.nearest_nics)} ({row.nearest_nic_token})" if row.nearest_nics else None
        rows.append([plain(row.nvml_index), health_label((health or {}).get(row.nvml_index), health is not None),
                     plain(row.cuda_index), plain(row.pci_bus_id), pcie_label(gpus.get(row.nvml_index)),
                     *(plain(value) for value in (row.numa_node, nearest, row.cpu_affinity, row.name, row.uuid))])
    return rows


def identity_note(table: IdentityTable, probed_here: bool) -> str:
    """How the CUDA column was numbered, and any caveat the identity table raised."""
    where = "this process's environment" if probed_here else "CUDA's defaults (a saved snapshot or a sample, not this process)"
    visible = f", CUDA_VISIBLE_DEVICES={table.visible_devices}" if table.visible_devices is not None else ""
    return " ".join([f"CUDA index: {table.device_order} order{visible}, {where}.", *table.notes])


class TopologyView(Vertical):
    """The Topology tab; the app sets `snapshot`, `host_index` and `health`."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)
    """The snapshot on show."""
    host_index: reactive[int] = reactive(0)
    """Which host of a multi-host snapshot is on show (bound from the app: every tab shows the same host)."""
    health: reactive[HostHealth | None] = reactive(None)
    """The health rules' verdicts by host (bound from the app; None while they run): marks on GPUs and hosts."""

    def compose(self) -> ComposeResult:
        yield KeptTable(id="hosts-table")
        yield PlainTree("host", id="topology-tree")
        yield Static(id="identity-note", markup=False)
        yield KeptTable(id="identity-table")

    def watch_snapshot(self) -> None:
        self._fill_hosts()
        self._redraw()

    def watch_health(self) -> None:
        self._fill_hosts()
        self._redraw()

    def _fill_hosts(self) -> None:
        """The hosts table: shown only for a cluster, one row per host with the codes of its findings."""
        if not self.is_mounted:
            return
        table: DataTable[Text] = self.query_one("#hosts-table", DataTable)
        cluster = self.snapshot is not None and (len(self.snapshot.hosts) > 1 or any(gap.host for gap in self.snapshot.gaps))
        table.display = cluster
        table.clear(columns=True)
        if not cluster or self.snapshot is None:
            return
        table.add_columns(*HOST_COLUMNS)
        table.add_rows(host_rows(self.snapshot, self.health.cluster if self.health is not None else ()))
        table.move_cursor(row=self.host_index, animate=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a host of the hosts table shows that host here and on Links (the host picker)."""
        if event.data_table.id != "hosts-table" or self.snapshot is None:
            return
        event.stop()
        if event.cursor_row < len(self.snapshot.hosts):  # rows past the hosts are nodes that did not report
            self.post_message(HostPicked(event.cursor_row))

    def watch_host_index(self, index: int) -> None:
        if self.is_mounted:
            table: DataTable[Text] = self.query_one("#hosts-table", DataTable)
            if table.row_count > index and table.cursor_row != index:
                table.move_cursor(row=index, animate=False)
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted or self.snapshot is None or not self.snapshot.hosts:
            return
        host = self.snapshot.hosts[min(self.host_index, len(self.snapshot.hosts) - 1)]
        judged = self.health.gpu_codes.get(host.hostname, {}) if self.health is not None else None
        health = judged or {}
        fill_tree(self.query_one(PlainTree), host, health)
        table: DataTable[Text] = self.query_one("#identity-table", DataTable)
        table.clear(columns=True)
        table.add_columns(*IDENTITY_COLUMNS)
        probed_here = self.snapshot.source == "probe"
        identity = identity_table(host, None if probed_here else {})
        table.add_rows(identity_rows(identity, host, judged))
        note = identity_note(identity, probed_here)
        if health:
            flagged = "; ".join(f"GPU{index} {', '.join(codes)}" for index, codes in sorted(health.items()))
            note += f" Health (linkscope doctor for evidence and fixes): {flagged}."
        self._note = note
        self.call_after_refresh(self._show_note)

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_note)

    def _show_note(self) -> None:
        """The note, and a hint when the table is wider than the tab (its last columns out of view)."""
        if not self.is_mounted:
            return
        table = self.query_one("#identity-table", DataTable)
        hidden = table.virtual_size.width > table.scrollable_content_region.width
        hint = "  More columns: ←/→ on the table." if hidden else ""
        # the same note on each switch to the tab (which resizes the view) is left as it is: Static.update laid
        # the screen out again after every switch's own layout, a frame more before the switch settled
        update_in_place(self.query_one("#identity-note", Static), plain(getattr(self, "_note", "") + hint))


