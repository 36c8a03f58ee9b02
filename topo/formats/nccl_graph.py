"""Read the channels NCCL searched on its topology: an `NCCL_GRAPH_DUMP_FILE` (or a vendor's `NCCL_GRAPH_FILE`), or
the `Pattern 4, crossNic 0, nChannels 2, bw 24.0/24.0, type NVL/PIX, sameChannels 1` lines of a debug log.

The XML is `<graphs version="1">` of `<graph id pattern crossnic nchannels speedintra speedinter latencyinter typeintra
typeinter samechannels>`, each holding `<channel>`s of `<net dev>`, `<gpu dev>`... `<net dev>` (src/graph/search.cc,
`ncclTopoGetXmlFromGraph`). Speeds are GB/s per channel as NCCL planned them.
"""

from __future__ import annotations

import re

from linkscope.topo.common.frozen import frozen
from linkscope.topo.formats.nccl_xml import XmlElement, attr_int, attr_number, looks_like_xml_of, parse_nccl_root

GRAPH_XML_VERSION = 1
"""`NCCL_GRAPH_XML_VERSION` in src/graph/xml.h."""

PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "NVLS", 6: "CollNet direct"}
"""`NCCL_TOPO_PATTERN_*` of src/include/graph.h."""

GRAPH_IDS = {0: "ring", 1: "tree", 2: "CollNet chain", 3: "NVLS", 4: "CollNet direct"}
"""The graph ids NCCL's init.cc gives its algorithms' graphs."""

PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
"""`topoPathTypeStr` of src/graph/topo.cc, nearest first."""


@frozen
class NcclHop:
    """One stop of a channel: a GPU (`dev`, NCCL's CUDA device number; or its bus id in newer logs) or a NET end."""

    kind: str
    """`gpu` or `net`."""
    dev: int | None = None
    busid: str | None = None
    rank: int | None = None
    """The GPU's rank, where an older log (before NCCL 2.19) names GPUs by rank."""

    @property
    def label(self) -> str:
        if self.kind == "net":
            return f"net{self.dev if self.dev is not None else '?'}"
        if self.dev is not None:
            return str(self.dev)
        return f"rank{self.rank}" if self.rank is not None else (self.busid or "?")

    def as_json(self) -> int | str:
        """A GPU's dev number, or `netN`, `rankN` or a bus id where the dump does not give the dev."""
        if self.kind == "gpu" and self.dev is not None:
            return self.dev
        return self.label


@frozen
class NcclGraph:
    """One searched graph: its pattern, the bandwidth NCCL planned per channel, the path types, the channels."""

    pattern_code: int | None
    graph_id: int | None = None
    crossnic: int | None = None
    nchannels: int = 0
    speed_intra_gbps: float | None = None
    speed_inter_gbps: float | None = None
    type_intra: str | None = None
    type_inter: str | None = None
    same_channels: int | None = None
    channels: tuple[tuple[NcclHop, ...], ...] = ()
    line: int = 0

    @property
    def pattern(self) -> str:
        """The algorithm the graph serves (`ring`, `tree`, `NVLS`, `CollNet chain`...)."""
        if self.graph_id in GRAPH_IDS:
            return GRAPH_IDS[self.graph_id]
        return PATTERNS.get(self.pattern_code or 0, f"pattern {self.pattern_code}")

    @property
    def empty(self) -> bool:
        """True when NCCL found no channel for this graph (the algorithm is not available)."""
        return self.nchannels == 0


@frozen
class NcclGraphs:
    """All graphs of one dump or one rank's log."""

    name: str
    graphs: tuple[NcclGraph, ...]
    notes: tuple[str, ...] = ()


def looks_like_nccl_graph_xml(text: str) -> bool:
    """True when `text` is XML holding NCCL's `<graphs>`."""
    return looks_like_xml_of(text, "graphs")


def read_nccl_graph_xml(text: str, name: str) -> NcclGraphs:
    """The graphs of an `NCCL_GRAPH_DUMP_FILE`; raise InputError (one line) when it is not one."""
    root = parse_nccl_root(text, name, "graphs", GRAPH_XML_VERSION, "graph dump")
    notes: list[str] = []
    graphs = []
    for element in root.children:
        if element.tag != "graph":
            notes.append(f"line {element.line}: <{element.tag}> inside <graphs> is not part of NCCL's schema; ignored")
            continue
        graphs.append(_graph(element, notes))
    return NcclGraphs(name=name, graphs=tuple(graphs), notes=tuple(notes))


def _graph(element: XmlElement, notes: list[str]) -> NcclGraph:
    channels = []
    for channel in element.children:
        if channel.tag != "channel":
            notes.append(f"line {channel.line}: <{channel.tag}> inside <graph> ignored")
            continue
        hops = [NcclHop(hop.tag, attr_int(hop.get("dev"))) for hop in channel.children if hop.tag in ("gpu", "net")]
        channels.append(tuple(hops))
    nchannels = attr_int(element.get("nchannels"))
    if nchannels is not None and nchannels != len(channels):
        notes.append(f"line {element.line}: nchannels={nchannels} but {len(channels)} <channel> elements")
    return NcclGraph(
        pattern_code=attr_int(element.get("pattern")), graph_id=attr_int(element.get("id")),
        crossnic=attr_int(element.get("crossnic")), nchannels=nchannels if nchannels is not None else len(channels),
        speed_intra_gbps=attr_number(element.get("speedintra")), speed_inter_gbps=attr_number(element.get("speedinter")),
        type_intra=element.get("typeintra"), type_inter=element.get("typeinter"),
        same_channels=attr_int(element.get("samechannels")), channels=tuple(channels), line=element.line)


_BW = r"\d{1,12}(?:\.\d{1,12})?"
PATTERN_LINE = re.compile(
    r"Pattern (?P<pattern>\d{1,4}), crossNic (?P<crossnic>\d{1,4}), nChannels (?P<nchannels>\d{1,6}), "
    rf"(?:bw|speed) (?P<intra>{_BW})/(?P<inter>{_BW}), type (?P<tintra>\w{{1,8}})/(?P<tinter>\w{{1,8}})"
    r"(?:, sameChannels (?P<same>\d{1,4}))?")
"""`ncclTopoPrintGraph`'s first line (`speed` before NCCL 2.19, `bw` since)."""

CHANNEL_LINE = re.compile(r"^\s*(?P<channel>\d{1,6}) :(?P<hops>(?: (?:NET|GPU)/[0-9a-fA-F]{1,16}(?:-[0-9a-fA-F]{1,16})?)+)\s*$")
"""`ncclTopoPrintGraph`'s channel lines: ` 0 : NET/0 GPU/0 GPU/1 NET/0` (before NCCL 2.19: GPUs by rank) or
` 0 : GPU/0-1b000 GPU/0-29000` (GPUs by bus id)."""


def graph_of_pattern_line(message: str, line: int) -> NcclGraph | None:
    """The graph a `Pattern ...` message starts (its channels follow on the next lines), or None."""
    match = PATTERN_LINE.search(message)
    if match is None:
        return None
    return NcclGraph(
        pattern_code=int(match["pattern"]), crossnic=int(match["crossnic"]), nchannels=int(match["nchannels"]),
        speed_intra_gbps=float(match["intra"]), speed_inter_gbps=float(match["inter"]), type_intra=match["tintra"],
        type_inter=match["tinter"], same_channels=int(match["same"]) if match["same"] else None, line=line)


def nccl_bus_of_id(ident: str) -> str:
    """NCCL's bus id spelling (`0000:65:00.0`) of a node id's local part (`65000`)."""
    from linkscope.topo.formats.nccl_log_model import bus_id_to_pci

    domain, rest = bus_id_to_pci(ident.lower()).split(":", 1)
    return f"{domain[-4:]}:{rest}".lower()


def hops_of_channel_line(message: str) -> tuple[NcclHop, ...] | None:
    """The stops of a channel line, or None when `message` is not one."""
    match = CHANNEL_LINE.match(message)
    if match is None:
        return None
    hops = []
    for word in match["hops"].split():
        kind, _, ident = word.partition("/")
        system, dash, local = ident.partition("-")
        if kind == "NET":
            hops.append(NcclHop("net", int(local if dash else system, 16)))
        elif dash:
            hops.append(NcclHop("gpu", busid=nccl_bus_of_id(local)))
        elif system.isdigit():
            hops.append(NcclHop("gpu", rank=int(system)))
        else:  # a rank is written in decimal: `GPU/1c` is no line NCCL prints
            return None
    return tuple(hops)
