"""Readers of GPU copy matrices: nvbandwidth and CUDA samples' p2pBandwidthLatencyTest.

Both print square tables (rows and columns are device numbers) under a title line. The title
says what the cells are: for nvbandwidth, e.g. `memcpy CE GPU(row) -> GPU(column) bandwidth
(GB/s)` (the arrow gives the direction; `<->` marks a bidirectional test, whose cells are the
bandwidth of one direction while the other runs, so a pair's bidirectional total is the sum of
its two cells); for p2pBandwidthLatencyTest, `Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)`
(cells are already both directions together). Every cell is checked; a malformed table is an
InputError naming `file:line` (the line in the original file: every text goes through the
line-cleaning front end first, so launcher prefixes, escapes and a poster's quote marks do not
matter). Fragments read too: no banner or device list is needed, only a matrix under its title.
p2pBandwidthLatencyTest's P2P=Enabled and P2P=Disabled figures are kept as separate records
(`p2p_enabled` True/None and False), never as two unlabelled records of one pair; the `P2P Reads`
matrices of newer versions are recorded only when the file has no `P2P Writes` figures of that kind.
A half-written last row (a copy cut short) is dropped and said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.numbers import is_integer, non_negative_number, parse_int
from linkscope.topo.formats.lines import Line, clean_lines
from linkscope.topo.model.measurements import HostCopy, Measurements, PeerCopy

_NVB_RUNNING = re.compile(r"^Running (?:benchmark )?(\w+)\.?\s*$")
_NVB_WAIVED = re.compile(r"^Waiving (?:benchmark )?(\w+)\.?\s*$")
_NVB_FAILURE = re.compile(r"\b(?:ASSERT|ERROR|Error|error|FAILED|Failed|Invalid value)\b")
_NVB_TITLE = re.compile(
    r"^(?P<what>.*?)\b(?P<left>CPU|GPU)\((?P<lside>rows?|columns?)\)\s*(?P<arrow><->|->|<-)\s*"
    r"(?P<right>CPU|GPU)\((?P<rside>rows?|columns?)\)\s*(?:bandwidth\s*)?\((?P<unit>GB/s|ns|us)\)\s*$"
)
_P2P_TITLE = re.compile(
    r"^(?P<dir>Unidirectional|Bidirectional)?[ \t]*P2P=(?P<state>Enabled|Disabled)[ \t]+(?P<kind>Bandwidth|Latency)"
    r"(?:[ \t]+\(P2P (?P<mode>Writes|Reads)\))?[ \t]+Matrix[ \t]*\((?P<unit>GB/s|us)\)[ \t]*$"
)
_P2P_ACCESS = re.compile(r"^Device=(\d{1,6})[ \t]+(CAN|CANNOT) Access Peer Device=(\d{1,6})", re.ASCII)
_CONNECTIVITY = "P2P Connectivity Matrix"


def _texts(text: str) -> list[str]:
    return [line.text.strip() for line in clean_lines(text)]


def looks_like_nvbandwidth(text: str) -> bool:
    """True for nvbandwidth output (its version banner or a `memcpy ... GPU(row)` matrix title)."""
    return any(line.startswith("nvbandwidth Version") or _NVB_TITLE.match(line) for line in _texts(text))


def looks_like_p2p_bandwidth_latency_test(text: str) -> bool:
    """True for cuda-samples p2pBandwidthLatencyTest output."""
    return "P2P (Peer-to-Peer) GPU Bandwidth Latency Test" in text or any(
        _P2P_TITLE.match(line) for line in _texts(text))


@dataclass
class Table:
    """A square-ish numeric table: column ids and rows of (row id, cells; None for N/A)."""

    columns: list[int]
    rows: list[tuple[int, list[float | None]]] = field(default_factory=list)
    end: int = 0
    """Index of the first line after the table."""
    labels: list[str] = field(default_factory=list)
    """Words before the column numbers in the header (`D\\D`, `GPU`, `CPU`)."""
    line: int = 0
    """Line number of the header in the original file."""


def _last_non_empty(lines: list[Line]) -> int:
    return max((index for index, line in enumerate(lines) if line.text.strip()), default=-1)


def _read_matrix(lines: list[Line], index: int, name: str, label_words: int, notes: list[str]) -> Table | None:
    """Read a header of column numbers (after `label_words` leading labels) and the numeric rows below it;
    None when the input ends before the table has a row (a copy cut short)."""
    title_number = lines[index - 1].number if index else 0
    while index < len(lines) and not lines[index].text.strip():
        index += 1
    if index >= len(lines):
        notes.append(f"line {title_number}: a matrix title at the end of the input, with no table under it")
        return None
    words = lines[index].text.split()
    number = lines[index].number
    labels, header = words[:label_words], words[label_words:]
    if not header or not all(is_integer(word) for word in header):
        raise InputError(f"{name}:{number}: expected a row of column numbers, found {lines[index].text.strip()[:60]!r}")
    table = Table([parse_int(word, f"{name}:{number}: column", minimum=0) for word in header], labels=labels, line=number)
    last = _last_non_empty(lines)
    index += 1
    while index < len(lines):
        words = lines[index].text.split()
        number = lines[index].number
        if not words or not is_integer(words[0]):
            break
        if len(words) != len(table.columns) + 1:
            if index == last and len(words) < len(table.columns) + 1:
                notes.append(f"line {number}: half-written last row dropped")
                index += 1
                break
            raise InputError(f"{name}:{number}: expected {len(table.columns)} values after the row number, "
                             f"found {len(words) - 1}")
        cells: list[float | None] = []
        for word in words[1:]:
            if word == "N/A":
                cells.append(None)
                continue
            cells.append(non_negative_number(word, f"{name}:{number}:"))
        table.rows.append((parse_int(words[0], f"{name}:{number}: row", minimum=0), cells))
        index += 1
    table.end = index
    if not table.rows:
        if index > last:
            notes.append(f"line {table.line}: a matrix header at the end of the input, with no complete row")
            return None
        raise InputError(f"{name}:{table.line}: a matrix header with no rows under it")
    return table


class _PeerBook:
    """Peer-copy fields per ordered pair; a field set twice (two tests) starts a second record."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def put(self, src: int, dst: int, name: str, value: float | bool | None, **extra: object) -> None:
        for record in self.records:
            if record["src"] == src and record["dst"] == dst and record.get(name) is None \
                    and all(record.get(k) == v for k, v in extra.items()):
                record[name] = value
                return
        self.records.append({"src": src, "dst": dst, name: value, **extra})

    def copies(self) -> tuple[PeerCopy, ...]:
        return tuple(PeerCopy(**record) for record in self.records)  # type: ignore[arg-type]


@frozen
class _Direction:
    """What an nvbandwidth title says: the device kind of rows and columns, which side sends, the unit."""

    row_kind: str
    col_kind: str
    src_is_row: bool
    bidirectional: bool
    unit: str


def _direction(title: re.Match[str]) -> _Direction:
    left_is_row = title.group("lside").startswith("row")
    left, right = title.group("left"), title.group("right")
    row_kind, col_kind = (left, right) if left_is_row else (right, left)
    arrow = title.group("arrow")
    src_is_row = True if arrow == "<->" else (arrow == "->") == left_is_row
    return _Direction(row_kind, col_kind, src_is_row, arrow == "<->", title.group("unit"))


class NvbandwidthTables:
    """What nvbandwidth's matrices say, test by test, gathered into peer and host copies (its text and its JSON
    output share this)."""

    def __init__(self) -> None:
        self.book = _PeerBook()
        self.host: list[HostCopy] = []
        self.notes: list[str] = []
        self.bidir: dict[tuple[int, int], float] = {}
        self.tables = 0

    def add(self, test: str, title: re.Match[str], table: Table) -> None:
        """One test's matrix under its title."""
        self.tables += 1
        if "all" in test.split("_") or "local" in test:
            self.notes.append(f"{test}: not a per-pair test, skipped")
            return
        direction = _direction(title)
        for row_id, cells in table.rows:
            for col_id, value in zip(table.columns, cells, strict=True):
                if value is not None:
                    self._cell(test, direction, row_id, col_id, value)

    def _cell(self, test: str, direction: _Direction, row_id: int, col_id: int, value: float) -> None:
        if direction.src_is_row:
            src_kind, src, dst_kind, dst = direction.row_kind, row_id, direction.col_kind, col_id
        else:
            src_kind, src, dst_kind, dst = direction.col_kind, col_id, direction.row_kind, row_id
        if src_kind == "GPU" and dst_kind == "GPU":
            if src == dst:
                return
            if direction.unit != "GB/s":
                self.book.put(src, dst, "latency_us", value / 1000 if direction.unit == "ns" else value)
            elif direction.bidirectional:
                self.bidir[(src, dst)] = value
            else:
                self.book.put(src, dst, "unidir_gbps", value)
        elif direction.unit == "GB/s" and not direction.bidirectional:
            gpu, kind = (dst, "h2d") if src_kind == "CPU" else (src, "d2h")
            self.host.append(HostCopy(gpu=gpu, direction=kind, numa_node=None, size_bytes=None, gbps=value))
        else:
            self.notes.append(f"{test}: host latency and bidirectional host copies are not recorded")

    def measurements(self, name: str) -> Measurements:
        for (src, dst), value in self.bidir.items():
            back = self.bidir.get((dst, src))
            if back is not None:
                self.book.put(src, dst, "bidir_gbps", value + back)
        if self.bidir:
            self.notes.append("nvbandwidth bidirectional cells are per direction under opposite traffic; "
                              "bidir_gbps is the sum of a pair's two cells")
        if self.host:
            self.notes.append("nvbandwidth host copies: NUMA node and buffer size not stated")
        return Measurements(source=f"nvbandwidth ({name})", peer_copies=self.book.copies(), host_copies=tuple(self.host),
                            notes=tuple(dict.fromkeys(self.notes)))


def nvbandwidth_title(text: str) -> re.Match[str] | None:
    """The title of an nvbandwidth matrix (`memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)`), or None."""
    return _NVB_TITLE.match(text.strip())


def read_nvbandwidth(text: str, name: str) -> Measurements:
    """Parse nvbandwidth output: GPU<->GPU copies (bandwidth, latency) and CPU<->GPU copies. A run whose tests
    printed no matrix (waived: the GPUs cannot run it; or failed, e.g. a data-verification ASSERT) reads as no
    copies with a note per test; a text with neither a matrix nor a test that ran is refused."""
    lines = clean_lines(text)
    tables = NvbandwidthTables()
    test = "?"
    ran: dict[str, tuple[int, str | None]] = {}
    """Test -> (its `Running` line, what it printed instead of a matrix)."""
    index = 0
    while index < len(lines):
        stripped = lines[index].text.strip()
        if running := _NVB_RUNNING.match(stripped):
            test = running.group(1)
            ran[test] = (lines[index].number, None)
        elif waived := _NVB_WAIVED.match(stripped):
            test = waived.group(1)
            ran[test] = (lines[index].number, "waived (nvbandwidth cannot run it on these GPUs, e.g. without peer access)")
        elif test in ran and ran[test][1] is None and _NVB_FAILURE.search(stripped):
            ran[test] = (ran[test][0], f"failed before printing a matrix: {stripped[:100]!r}")
        title = _NVB_TITLE.match(stripped)
        if not title:
            index += 1
            continue
        table = _read_matrix(lines, index + 1, name, 0, tables.notes)
        if table is None:
            break
        if test in ran:
            ran[test] = (ran[test][0], "")
        index = table.end
        tables.add(test, title, table)
    for done, (line, outcome) in ran.items():
        if outcome:
            tables.notes.append(f"line {line}: {done} {outcome}: no figures")
    if not tables.tables and not any(outcome for _, outcome in ran.values()):
        raise InputError(f"{name}: no nvbandwidth matrix (a title like `memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)`)")
    return tables.measurements(name)


def read_p2p_bandwidth_latency_test(text: str, name: str) -> Measurements:
    """Parse p2pBandwidthLatencyTest. P2P=Enabled figures go to records with `p2p_enabled` from the
    `CAN Access Peer` lines or the connectivity matrix (None when neither survives); P2P=Disabled figures
    (copies staged through the host) go to separate records with `p2p_enabled` False, except for pairs
    that cannot use P2P at all, whose Enabled figures already are such copies."""
    lines = clean_lines(text)
    access: dict[tuple[int, int], bool] = {}
    matrices: list[tuple[re.Match[str], Table]] = []
    notes: list[str] = []
    index = 0
    while index < len(lines):
        stripped = lines[index].text.strip()
        if match := _P2P_ACCESS.match(stripped):
            access[(int(match.group(1)), int(match.group(3)))] = match.group(2) == "CAN"
        if stripped == _CONNECTIVITY:
            table = _read_matrix(lines, index + 1, name, 1, notes)
            if table is None:
                break
            for row_id, cells in table.rows:
                for col_id, value in zip(table.columns, cells, strict=True):
                    if row_id != col_id and value is not None:
                        access.setdefault((row_id, col_id), value > 0)
            index = table.end
            continue
        title = _P2P_TITLE.match(stripped)
        if not title:
            index += 1
            continue
        table = _read_matrix(lines, index + 1, name, 1, notes)
        if table is None:
            break
        index = table.end
        if title.group("kind") == "Latency" and table.labels != ["GPU"]:
            raise InputError(f"{name}:{table.line}: expected the GPU latency table under the title, "
                             f"found {' '.join(table.labels)!r}")
        matrices.append((title, table))
    if not matrices:
        raise InputError(f"{name}: no p2pBandwidthLatencyTest matrix (`... P2P=Enabled Bandwidth Matrix (GB/s)`)")
    book = _PeerBook()
    writes = {(title.group("dir"), title.group("kind")) for title, _ in matrices
              if title.group("state") == "Enabled" and title.group("mode") != "Reads"}
    for title, table in matrices:
        enabled = title.group("state") == "Enabled"
        if enabled and title.group("mode") == "Reads" and (title.group("dir"), title.group("kind")) in writes:
            notes.append(f"line {table.line - 1}: P2P Reads figures not recorded (the P2P Writes figures of the "
                         "same test are; linkscope's peer copies are writes)")
            continue
        field_name = {"Unidirectional": "unidir_gbps", "Bidirectional": "bidir_gbps", None: "latency_us"}[title.group("dir")]
        for row_id, cells in table.rows:
            for col_id, value in zip(table.columns, cells, strict=True):
                if row_id == col_id or value is None:
                    continue
                peer = access.get((row_id, col_id))
                if enabled:
                    book.put(row_id, col_id, field_name, value, p2p_enabled=peer)
                elif peer is not False:
                    book.put(row_id, col_id, field_name, value, p2p_enabled=False)
    if access and not any(access.values()):
        notes.append("no GPU pair can access its peer: every figure is a copy staged through host memory")
    if not access:
        notes.append("P2P access not stated (no `Device=N CAN Access Peer` lines or connectivity matrix): "
                     "P2P=Enabled figures are kept with p2p unknown, P2P=Disabled ones as p2p off")
    if any(title.group("mode") == "Reads" for title, _ in matrices) and not writes:
        notes.append("the P2P=Enabled figures are P2P Reads")
    notes.append("device-local (diagonal) figures and CPU latency tables are not recorded")
    return Measurements(source=f"p2pBandwidthLatencyTest ({name})", peer_copies=book.copies(), notes=tuple(notes))
