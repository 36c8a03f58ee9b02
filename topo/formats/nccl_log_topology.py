"""NCCL's topology and searched graphs as its debug log prints them (NCCL_DEBUG=INFO with the GRAPH subsystem).

`ncclTopoPrint` (src/graph/topo.cc) writes the tree: `=== System : maxBw 48.0 totalBw 370.8 ===`, then per CPU
`CPU/0-0 (1/2/-1)` and, indented under the node they leave, links `+ PCI[48.0] - GPU/0-68000 (8)`, `+ NVL[370.8] -
NVS/0-0`, `+ NET[50.0] - NET/0-c (0/guid/1/50.000000)`, `+ SYS[16.0] - CPU/0-1`, closed by a `=====` line. Older NCCL
(before 2.19) writes ids without the system part (`CPU/0`, `PCI/D000`). `ncclTopoPrintGraph` (src/graph/search.cc)
writes `Pattern 4, crossNic 0, nChannels 2, bw 24.0/24.0, type NVL/PIX, sameChannels 1` and one line per channel.
The same :class:`~topo.formats.nccl_topo_model.NcclTopology` and :class:`~topo.formats.nccl_graph.NcclGraph` as the
XML readers come out, so everything downstream reads both alike. Bandwidths are NCCL's, in GB/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from linkscope.topo.common.limits import MAX_KEPT_MESSAGES, MAX_NCCL_TREE_NODES
from linkscope.topo.formats.nccl_graph import (
    NcclGraph,
    NcclGraphs,
    graph_of_pattern_line,
    hops_of_channel_line,
    nccl_bus_of_id,
)
from linkscope.topo.formats.nccl_topo_model import NVSWITCH_CLASS, NcclCpu, NcclGpu, NcclNet, NcclNvLink, NcclPci, NcclTopology

NUMBER = r"\d{1,12}(?:\.\d{1,12})?"
SYSTEM = re.compile(rf"=== System : maxBw (?P<max>{NUMBER}) totalBw (?P<total>{NUMBER}) ===")
NODE = re.compile(r"(?P<type>CPU|PCI|GPU|NIC|NET|NVS|GIN|RMA|DEV|CXB)/(?P<id>[0-9a-fA-F]{1,16}(?:-[0-9a-fA-F]{1,16})?)"
                  r"(?: \((?P<info>[^)]{0,80})\))?")
LINK = re.compile(rf"\+ (?P<type>[A-Z0-9]{{0,4}})\[(?P<bw>{NUMBER})\] - ")

TOPOLOGY_STARTS = frozenset(" =+P0123456789")
"""First characters of the messages :class:`TopologyBook` may take (besides `CPU/`): any other is passed at once."""



def _local_id(ident: str) -> str:
    """The local part of `0-65000` (NCCL 2.19+) or `65000` (older)."""
    return ident.rpartition("-")[2]


def _busid(ident: str) -> str:
    """NCCL's bus id spelling (`0000:65:00.0`) of a node id (`0-65000` or `65000`)."""
    return nccl_bus_of_id(_local_id(ident))


@dataclass
class _Tree:
    """One printed tree being read."""

    max_bw: float
    total_bw: float
    cpus: list[NcclCpu] = field(default_factory=list)
    pcis: dict[str, NcclPci] = field(default_factory=dict)
    gpus: dict[str, NcclGpu] = field(default_factory=dict)
    nets: list[NcclNet] = field(default_factory=list)
    stack: list[tuple[int, str, str]] = field(default_factory=list)
    """(column, node type, node id) of the nodes printed so far on the current branch."""
    notes: list[str] = field(default_factory=list)

    def parent_at(self, column: int) -> tuple[str, str] | None:
        while self.stack and self.stack[-1][0] > column:
            self.stack.pop()
        if self.stack and self.stack[-1][0] == column:
            return self.stack[-1][1], self.stack[-1][2]
        return None

    def cpu_of(self) -> int:
        return max(len(self.cpus) - 1, 0)


@dataclass
class TopologyBook:
    """The topology trees and graphs a log prints, the first of each host (every rank prints the same machine)."""

    trees: dict[str | None, NcclTopology] = field(default_factory=dict)
    graphs: dict[str | None, list[NcclGraph]] = field(default_factory=dict)
    reading: dict[tuple[str | None, int | None], _Tree] = field(default_factory=dict)
    graph_owner: dict[str | None, tuple[int | None, int | None]] = field(default_factory=dict)
    last_graph: dict[tuple[str | None, int | None], int] = field(default_factory=dict)

    def line(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> bool:
        """Take `message` when it is one of the topology or graph lines; say whether it was."""
        if message[:1] not in TOPOLOGY_STARTS and not message.startswith("CPU/"):
            return False
        text = message.rstrip()
        stripped = text.lstrip()
        key = (host, dev)
        if stripped.startswith("=== System"):
            match = SYSTEM.match(stripped)
            if match is not None and host not in self.trees and len(self.trees) < MAX_KEPT_MESSAGES:
                self.reading[key] = _Tree(float(match["max"]), float(match["total"]))
            return match is not None
        tree = self.reading.get(key)
        if tree is not None:
            if stripped.startswith("====="):
                self.finish(key, host)
                return True
            if self.tree_line(tree, text, number):
                return True
            self.finish(key, host)
        if stripped.startswith("Pattern "):
            return self.pattern(stripped, host, pid, dev, number)
        if stripped[:1].isdigit() and " : " in stripped:
            hops = hops_of_channel_line(stripped)
            index = self.last_graph.get(key)
            if hops is None or index is None or self.graph_owner.get(host) != (pid, dev):
                return hops is not None
            graphs = self.graphs[host]
            graph = graphs[index]
            if len(graph.channels) < graph.nchannels:
                graphs[index] = replace(graph, channels=(*graph.channels, hops))
            return True
        return False

    def pattern(self, text: str, host: str | None, pid: int | None, dev: int | None, number: int) -> bool:
        graph = graph_of_pattern_line(text, number)
        if graph is None:
            return False
        owner = self.graph_owner.setdefault(host, (pid, dev))
        if owner == (pid, dev):
            graphs = self.graphs.setdefault(host, [])
            if len(graphs) < MAX_KEPT_MESSAGES:
                graphs.append(graph)
                self.last_graph[(host, dev)] = len(graphs) - 1
        return True

    def tree_line(self, tree: _Tree, text: str, number: int) -> bool:
        link = LINK.search(text)
        if link is None:
            node = NODE.match(text.lstrip())
            if node is None or node["type"] != "CPU":
                return False
            numa = _local_id(node["id"])
            numa_id = int(numa, 16) if len(numa) <= 4 else None  # `ffffffffffffff`: no NUMA id (-1)
            tree.cpus.append(NcclCpu(numa_id=numa_id))
            tree.stack = [(len(text) - len(text.lstrip()), "CPU", node["id"])]
            return True
        node = NODE.match(text, link.end())
        if node is None:
            return False
        parent = tree.parent_at(link.start())
        if parent is None or len(tree.pcis) + len(tree.nets) > MAX_NCCL_TREE_NODES:
            return True
        link_type, bw = link["type"], float(link["bw"])
        parent_type, parent_id = parent
        if link_type == "PCI":
            self.pci_child(tree, node, parent_type, parent_id, bw, number)
            tree.stack.append((link.end(), node["type"], node["id"]))
        elif link_type == "NVL" and parent_type == "GPU":
            busid = _busid(parent_id)
            gpu = tree.gpus.get(busid)
            if gpu is not None:
                target = "nvswitch" if node["type"] == "NVS" else _busid(node["id"])
                nvlink = NcclNvLink(target, 0, NVSWITCH_CLASS if node["type"] == "NVS" else None, bw)
                tree.gpus[busid] = replace(gpu, nvlinks=(*gpu.nvlinks, nvlink))
        elif link_type == "NET" and node["type"] == "NET":
            dev = int(_local_id(node["id"]), 16)
            # (collSupport/guid/port/bw) since NCCL 2.19, (guid/port/bw) before
            fields = (node["info"] or "").split("/")
            guid, port_word = (fields[1], fields[2]) if len(fields) == 4 else (fields[0], fields[1]) \
                if len(fields) == 3 else (None, "")
            nic_bus = _busid(parent_id) if parent_type == "NIC" else None
            port = int(port_word) if re.fullmatch(r"\d{1,7}", port_word) else None
            tree.nets.append(NcclNet(name=f"net{dev}", cpu=tree.cpu_of(), busid=nic_bus if nic_bus in tree.pcis else None,
                                     dev=dev, speed_mbps=round(bw * 8000), port=port, guid=guid))
        elif link_type == "C2C":
            tree.notes.append(f"line {number}: C2C[{bw}] (the GPU's chip-to-chip link to its CPU) kept in the log only")
        return True

    def pci_child(self, tree: _Tree, node: re.Match[str], parent_type: str, parent_id: str, bw: float,
                  number: int) -> None:
        busid = _busid(node["id"])
        parent = _busid(parent_id) if parent_type in ("PCI", "GPU", "NIC") else None
        class_code = {"GPU": "0x030200", "NIC": "0x020000", "PCI": "0x060400"}.get(node["type"])
        if busid not in tree.pcis:
            tree.pcis[busid] = NcclPci(busid=busid, class_code=class_code, cpu=tree.cpu_of(), parent=parent,
                                       bw_gbps=bw, device=node["info"], line=number)
        if node["type"] == "GPU" and busid not in tree.gpus:
            words = (node["info"] or "").split()
            rank = words[0] if words and re.fullmatch(r"\d{1,7}", words[0]) else None
            tree.gpus[busid] = NcclGpu(busid=busid, cpu=tree.cpu_of(), rank=int(rank) if rank else None)

    def finish(self, key: tuple[str | None, int | None], host: str | None) -> None:
        tree = self.reading.pop(key)
        if host in self.trees or not tree.cpus:
            return
        self.trees[host] = NcclTopology(
            name=f"the topology NCCL printed on {host or 'the host'}", cpus=tuple(tree.cpus),
            pcis=tuple(tree.pcis.values()), gpus=tuple(tree.gpus.values()), nets=tuple(tree.nets),
            notes=tuple(tree.notes), form="log", max_bw_gbps=tree.max_bw, total_bw_gbps=tree.total_bw)

    def frozen(self, name: str) -> tuple[tuple[NcclTopology, ...], tuple[NcclGraphs, ...]]:
        """The trees (one per host) and graphs (one rank's per host) read."""
        for key in list(self.reading):
            self.finish(key, key[0])
        graphs = tuple(NcclGraphs(name=f"{name} ({host or 'host'})", graphs=tuple(found))
                       for host, found in self.graphs.items())
        return tuple(self.trees.values()), graphs
