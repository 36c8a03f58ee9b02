"""Read the text of `nvidia-smi topo -m` (as saved from a real machine) into a :class:`Snapshot`.

The text may carry anything around the matrix: provenance comments, shell prompts, captions,
the legends, and `nvidia-smi topo -p2p <r|w|n|a|p>` matrices, which fill :attr:`Link.p2p`.
What the text cannot say (GPU names, UUIDs, bus ids, NVLink generation...) is recorded as
:class:`Gap` entries, so consumers know it is unknown rather than absent. Anything inconsistent
(an asymmetric matrix, a short row, an unknown token) is an :class:`InputError` naming the line.

`nvidia-smi topo -p2p p` shows NVML's PCIe P2P capability (index PROP/PCI). It has no field of
its own in :class:`P2PStatus`; for pairs *not* joined by NVLink a peer copy must cross PCIe, so
its status stands in for `read` and `write` there (an `r` or `w` block, when present, wins).
For NVLink pairs it says nothing about reads and writes, which then stay unknown.

The text goes through the line-cleaning front end first (:mod:`topo.formats.lines`): a terminal
capture with colours or an underlined header, launcher prefixes and Markdown quotes read like the
plain output, and line numbers in errors still count lines of the original file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_GPUS_PER_HOST, MAX_NUMA_NODE
from linkscope.topo.common.numbers import parse_int
from linkscope.topo.formats.lines import clean_lines
from linkscope.topo.formats.nvsmi_matrix import (
    LINK_TOKENS,
    NOT_AVAILABLE,
    P2P_TOKENS,
    Block,
    normalized,
    parse_header,
    read_block,
)
from linkscope.topo.model.host import Gap, Gpu, Host, Link, LinkKind, Nic, P2PStatus, parse_link_token
from linkscope.topo.model.snapshot import Snapshot

FORMAT_NAME = "nvidia-smi topo -m"

P2P_MODES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "pcie"}
"""`nvidia-smi topo -p2p` arguments and the capability each one shows."""

_HEADER_START = re.compile(r"[ \t]*GPU0(?![0-9])")
_COMMAND = re.compile(
    r"nvidia-smi\s+topo\s+(?:(?P<matrix>-m|--matrix|-mp|--matrix_pci)|(?:-p2p|--p2pstatus)\s+(?P<mode>[rwnap]))(?![\w-])"
)
_PROMPTS = (
    re.compile(r"\s*(?:\([^)]*\)\s*)?[\w.+-]+@(?P<host>[\w.-]+):\S*\s*[#$]"),
    re.compile(r"\s*\[[\w.+-]+@(?P<host>[\w.-]+)(?![\w.-])[^\]]*\]\s*[#$]"),  # no backtracking into host
)
_NIC_LEGEND = re.compile(r"\s*(?P<label>NIC\d+)\s*:\s*(?P<device>\S+)\s*")
_GPU_LABEL = re.compile(r"GPU(\d+)")
_NIC_LABEL = re.compile(r"NIC(\d+)")
_NOT_IN_TOPO_M = "not printed by `nvidia-smi topo -m`"


def looks_like_nvsmi_topo(text: str) -> bool:
    """True when `text` holds a matrix header line that starts with a `GPU0` column."""
    return any(_HEADER_START.match(line) and parse_header(line, 0) is not None for line in _cleaned(text))


def _cleaned(text: str) -> list[str]:
    """The lines of `text` as the front end cleans them: one per original line, in order."""
    return [line.text for line in clean_lines(text)]


def read_nvsmi_topo(text: str, name: str) -> Snapshot:
    """Parse `nvidia-smi topo -m` text (with optional `-p2p` blocks) into a one-host Snapshot.

    `name` is the file name used in error messages and as the snapshot's source.
    """
    scan = _scan(_cleaned(text), name)
    host, gaps = _build_host(scan, name)
    return Snapshot(hosts=(host,), source=name, meta=(("format", FORMAT_NAME),), gaps=tuple(gaps))


@dataclass
class _Scan:
    """What one pass over the lines found."""

    matrix: Block | None = None
    p2p: dict[str, Block] = field(default_factory=dict)
    unlabelled_p2p_lines: list[int] = field(default_factory=list)
    hostname: str = ""
    legend: dict[str, tuple[str, int]] = field(default_factory=dict)
    """NIC label -> (device name, line number)."""


def _scan(lines: Sequence[str], name: str) -> _Scan:
    scan = _Scan()
    first_prompt_host = ""
    prompt_host = ""
    command: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        header = parse_header(line, index + 1) if "GPU" in line else None
        if header is None:
            host = _prompt_host(line)
            if host:
                prompt_host = host
                first_prompt_host = first_prompt_host or host
            found = _COMMAND.search(line)
            if found:
                command = found.group("mode") or "m"
            _note_legend(line, index + 1, scan, name)
            index += 1
            continue
        mode = _block_mode(command, lines[index + 1] if index + 1 < len(lines) else "")
        block = read_block(lines, header, LINK_TOKENS if mode == "m" else P2P_TOKENS, name)
        if mode == "m":
            if scan.matrix is not None:
                raise InputError(
                    f"{name}: line {header.line}: a second `nvidia-smi topo -m` matrix "
                    f"(the first starts at line {scan.matrix.header.line}); one machine per file"
                )
            scan.matrix = block
            scan.hostname = prompt_host
        elif mode == "?":
            scan.unlabelled_p2p_lines.append(header.line)
        elif mode in scan.p2p:
            raise InputError(f"{name}: line {header.line}: a second `nvidia-smi topo -p2p {mode}` matrix")
        else:
            scan.p2p[mode] = block
        command = None
        index = block.end
    if scan.matrix is None:
        if scan.p2p or scan.unlabelled_p2p_lines:
            first = min([block.header.line for block in scan.p2p.values()] + scan.unlabelled_p2p_lines)
            raise InputError(f"{name}: line {first}: only `nvidia-smi topo -p2p` matrices (P2P status), no "
                             "`nvidia-smi topo -m` matrix: P2P status gives no link types to build a topology from "
                             "(save `nvidia-smi topo -m` with it)")
        raise InputError(f"{name}: no `nvidia-smi topo -m` matrix (no header line starting with a GPU0 column)")
    scan.hostname = scan.hostname or first_prompt_host
    return scan


def _prompt_host(line: str) -> str:
    for pattern in _PROMPTS:
        match = pattern.match(line)
        if match:
            return match.group("host")
    return ""


def _note_legend(line: str, line_number: int, scan: _Scan, name: str) -> None:
    match = _NIC_LEGEND.fullmatch(line)
    if not match:
        return
    label, device = match.group("label"), match.group("device")
    earlier = scan.legend.get(label)
    if earlier is not None and earlier[0] != device:
        raise InputError(
            f"{name}: line {line_number}: NIC Legend names {label} {device!r}, but line {earlier[1]} named it {earlier[0]!r}"
        )
    scan.legend[label] = (device, line_number)


def _block_mode(command: str | None, first_row: str) -> str:
    """`m` for a link matrix, a `-p2p` argument for a P2P matrix, `?` for a P2P matrix no command names.

    The tokens decide first, so a command quoted in a caption cannot relabel a matrix; the
    command line before the block only says which P2P capability a P2P matrix shows.
    """
    for word in first_row.split()[1:]:
        if word == "X":
            continue
        if LINK_TOKENS.run.fullmatch(word):
            return "m"
        if P2P_TOKENS.run.fullmatch(word):
            return command if command in P2P_MODES else "?"
    return command or "m"


def _label_number(label: str) -> int:
    return int(label[3:])  # checked by _check_label_numbers first


def _check_label_numbers(devices: Sequence[str], name: str, line: int) -> None:
    """InputError naming the first `GPU<n>`/`NIC<n>` label whose number is no device index."""
    for label in devices:
        if _GPU_LABEL.fullmatch(label) or _NIC_LABEL.fullmatch(label):
            parse_int(label[3:], f"{name}: line {line}: device label {label[:40]!r}: number", 0, MAX_GPUS_PER_HOST - 1)


def _build_host(scan: _Scan, name: str) -> tuple[Host, list[Gap]]:
    block = scan.matrix
    assert block is not None
    devices = block.header.devices
    _check_label_numbers(devices, name, block.header.line)
    position = {label: index for index, label in enumerate(devices)}
    gpu_labels = sorted((label for label in devices if _GPU_LABEL.fullmatch(label)), key=_label_number)
    nic_labels = [label for label in devices if not _GPU_LABEL.fullmatch(label)]
    if all(_NIC_LABEL.fullmatch(label) for label in nic_labels):
        nic_labels.sort(key=_label_number)
    gaps = [Gap(subject, _NOT_IN_TOPO_M) for subject in ("GPU names", "GPU UUIDs", "GPU PCI bus ids", "NVLink generation")]
    gpus = [_gpu(block, label, name, gaps) for label in gpu_labels]
    p2p = _p2p_tokens(scan, gpu_labels, name)
    links: list[Link] = []
    for i, a in enumerate(gpu_labels):
        row = block.row(a)
        for j in range(i + 1, len(gpu_labels)):
            b = gpu_labels[j]
            try:
                kind, count = parse_link_token(normalized(row.tokens[position[b]]))
            except ValueError as exc:
                raise InputError(f"{name}: line {row.line}: {a} to {b}: {exc}") from None
            links.append(Link(i, j, kind, count, p2p=_p2p_status(p2p, a, b, kind)))
    gpu_nic = tuple(tuple(normalized(block.row(gpu).tokens[position[nic]]) for nic in nic_labels) for gpu in gpu_labels)
    nics = tuple(Nic(name=device) for device in _nic_names(scan, nic_labels, name, gaps))
    gaps.extend(_p2p_gaps(scan))
    if block.missing:
        gaps.append(Gap(f"NIC rows {', '.join(block.missing)}",
                        f"line {block.cut_line}: the rows stop here, with none for them (a paste cut short); their "
                        "cells with the GPUs are read from the GPU rows, NIC-to-NIC cells are unknown"))
    for column in ("CPU Affinity", "NUMA Affinity"):
        if column not in block.header.value_columns:
            gaps.append(Gap(column, f"line {block.header.line}: the matrix has no {column} column (older nvidia-smi, "
                                    "or cut from the paste)"))
    if nics:
        gaps.append(Gap("NIC details", "netdev, PCI bus id, NUMA node, link layer, rate and state are " + _NOT_IN_TOPO_M))
    if not scan.hostname:
        gaps.append(Gap("hostname", "no shell prompt (user@host) in the text"))
    host = Host(hostname=scan.hostname, gpus=tuple(gpus), links=tuple(links), nics=nics, gpu_nic=gpu_nic)
    return host, gaps


def _gpu(block: Block, label: str, name: str, gaps: list[Gap]) -> Gpu:
    """A GPU with the affinity columns of its row; a value not printed becomes a gap."""
    row = block.row(label)
    columns = block.header.value_columns
    values: dict[str, str | None] = {}
    for index, column in enumerate(columns):
        if index < len(row.values):
            printed = row.values[index]
            values[column] = None if printed == NOT_AVAILABLE else printed
        else:
            values[column] = None
            gaps.append(Gap(f"{label} {column}", f"line {row.line}: no value printed"))
    numa_affinity = values.get("NUMA Affinity")
    gpu_numa_id = values.get("GPU NUMA ID")
    where = f"{name}: line {row.line}: {label}"
    return Gpu(
        index=_label_number(label),
        cpu_affinity=values.get("CPU Affinity"),
        numa_affinity=numa_affinity,
        numa_node=_node_number(numa_affinity, f"{where} NUMA Affinity") if numa_affinity is not None else None,
        gpu_numa_id=_node_number(gpu_numa_id, f"{where} GPU NUMA ID") if gpu_numa_id is not None else None,
    )


def _node_number(value: str, where: str) -> int | None:
    """A NUMA node number read by the bounded parser; a node list (`0-1`, `0,2`) is kept as text only (None)."""
    if not value.isascii() or not value.isdigit():
        if where.endswith("GPU NUMA ID"):
            raise InputError(f"{where} {value[:40]!r} is not a node number or N/A")
        return None
    return parse_int(value, where, 0, MAX_NUMA_NODE)


def _nic_names(scan: _Scan, nic_labels: Sequence[str], name: str, gaps: list[Gap]) -> list[str]:
    """Device names of the NIC columns: from the NIC Legend for `NIC<n>` columns, else the column name."""
    assert scan.matrix is not None
    header_line = scan.matrix.header.line
    for label, (device, line) in scan.legend.items():
        if label not in nic_labels:
            raise InputError(
                f"{name}: line {line}: NIC Legend entry {label} ({device}) has no column in the matrix (line {header_line})"
            )
    numbered = [label for label in nic_labels if _NIC_LABEL.fullmatch(label)]
    if numbered and not scan.legend:
        gaps.append(Gap("NIC device names", f"no NIC Legend in the text; {', '.join(numbered)} keep their column names"))
        return list(nic_labels)
    for label in numbered:
        if label not in scan.legend:
            raise InputError(f"{name}: line {header_line}: column {label} is missing from the NIC Legend")
    return [scan.legend[label][0] if label in scan.legend else label for label in nic_labels]


def _p2p_tokens(scan: _Scan, gpu_labels: Sequence[str], name: str) -> dict[str, dict[tuple[str, str], str]]:
    """Per `-p2p` mode, the status token of each GPU pair (by labels); the GPUs must match the matrix."""
    tokens: dict[str, dict[tuple[str, str], str]] = {}
    for mode, block in scan.p2p.items():
        if sorted(block.header.devices) != sorted(gpu_labels):
            raise InputError(
                f"{name}: line {block.header.line}: `nvidia-smi topo -p2p {mode}` matrix has columns "
                f"{' '.join(block.header.devices)} but the topo -m matrix has GPUs {' '.join(gpu_labels)}"
            )
        position = {label: index for index, label in enumerate(block.header.devices)}
        tokens[mode] = {(a, b): block.row(a).tokens[position[b]] for a in gpu_labels for b in gpu_labels if a != b}
    return tokens


def _p2p_status(p2p: dict[str, dict[tuple[str, str], str]], a: str, b: str, kind: LinkKind) -> P2PStatus | None:
    if not p2p:
        return None
    status = {P2P_MODES[mode]: tokens[(a, b)] for mode, tokens in p2p.items()}
    pcie = status.get("pcie")
    if pcie is not None and kind is not LinkKind.NVLINK:
        status.setdefault("read", pcie)
        status.setdefault("write", pcie)
    result = P2PStatus(status.get("read"), status.get("write"), status.get("nvlink"), status.get("atomics"))
    return None if result == P2PStatus() else result


def _p2p_gaps(scan: _Scan) -> list[Gap]:
    gaps = [
        Gap(
            f"P2P matrix at line {line}",
            "no `nvidia-smi topo -p2p <r|w|n|a|p>` command line before it names its capability; ignored",
        )
        for line in scan.unlabelled_p2p_lines
    ]
    missing = [P2P_MODES[mode] for mode in "rwna" if mode not in scan.p2p]
    if not scan.p2p:
        gaps.append(Gap("P2P status", _NOT_IN_TOPO_M + "; add `nvidia-smi topo -p2p r` (w, n, a) output to the text"))
    elif missing:
        reason = f"no `nvidia-smi topo -p2p {'/'.join(mode for mode in 'rwna' if mode not in scan.p2p)}` block in the text"
        if "p" in scan.p2p:
            reason += "; read/write of pairs not joined by NVLink come from the `-p2p p` (PCIe) block"
        gaps.append(Gap(f"P2P status ({', '.join(missing)})", reason))
    return gaps
