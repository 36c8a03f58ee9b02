"""The real-world corpus: every file under tests/fixtures/real/<kind>/ with its hand-checked facts.

Each real file has a sidecar `<file>.facts.json`: `{"kind", "read", "refuse", "gaps", "checked"}`.
`read` holds what a reader must get out of the file, `refuse` (when not null) says the file cannot be
read at all and names the line (`{"why", "line"}`), `gaps` lists what the file lacks that a reader must
say it lacks, `checked` says how the facts were checked by hand. The facts were read off the raw text
(never by running linkscope); this module runs the right reader over each file and says which facts
hold. A fact key that no rule here knows fails the test, so a new kind of fact needs a rule (or an
entry in :data:`NOT_A_READER_FACT` saying why a reader has nothing to say about it).
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.model.busbw import bus_factor
from support.paths import REAL

SIDECAR = ".facts.json"
NOT_CORPUS = frozenset({"SOURCES.md", "README.md"})
RECORDINGS = "gpu"
"""tests/fixtures/real/gpu/ holds recordings of a real GPU's NVML answers, not tool outputs: not in the corpus."""


@dataclass(frozen=True)
class RealFile:
    """One real file and its facts."""

    path: Path
    facts: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.facts["kind"])

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def real_files() -> list[RealFile]:
    """Every real file of the corpus, sorted; a file without a sidecar (or a sidecar without its file) is an error."""
    files: list[RealFile] = []
    for folder in sorted(path for path in REAL.iterdir() if path.is_dir() and path.name != RECORDINGS):
        names = {path.name for path in folder.iterdir() if path.is_file()}
        for name in sorted(names):
            if name in NOT_CORPUS or name.endswith(SIDECAR):
                continue
            sidecar = folder / (name + SIDECAR)
            if not sidecar.exists():
                raise AssertionError(f"{folder.name}/{name} has no {SIDECAR} sidecar")
            files.append(RealFile(folder / name, json.loads(sidecar.read_text(encoding="utf-8"))))
        orphans = [name for name in names if name.endswith(SIDECAR) and name[: -len(SIDECAR)] not in names]
        if orphans:
            raise AssertionError(f"{folder.name}: sidecars without their file: {', '.join(sorted(orphans))}")
    return files


# --- reading -------------------------------------------------------------------------------------------------


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def read_topo(path: Path) -> Any:
    from linkscope.topo.formats.source import parse_source_text

    return parse_source_text(_text(path), path.name)


def read_results(path: Path) -> Any:
    from linkscope.topo.formats.results import read_measurements

    return read_measurements(_text(path), path.name)


def read_nccl_log(path: Path) -> Any:
    from linkscope.topo.formats.nccl_log import read_nccl_log_text

    return read_nccl_log_text(_text(path), path.name)


def read_trace(path: Path) -> Any:
    from linkscope.topo.formats.trace import read_rank_trace

    with gzip.open(path, "rt", encoding="utf-8") as stream:
        return read_rank_trace(io.StringIO(stream.read()), path.name)


READERS: dict[str, Callable[[Path], Any]] = {
    "topo": read_topo,
    "nccl_tests": read_results,
    "p2p": read_results,
    "nvbandwidth_json": read_results,
    "nccl_log": read_nccl_log,
    "trace": read_trace,
    "nccl_topo_xml": lambda path: read_nccl_topo_xml(path),
    "nccl_graph_xml": lambda path: read_nccl_graph_xml(path),
}
"""The reader linkscope runs on each kind of file."""


@dataclass
class Outcome:
    """What a reader made of one file and which facts hold."""

    file: RealFile
    result: Any = None
    error: str | None = None
    held: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def absorb(self, other: Outcome) -> None:
        """Take the facts another check of the same file held and failed."""
        self.held.extend(other.held)
        self.failed.extend(other.failed)

    def expect(self, fact: str, ok: bool, got: object = None, want: object = None) -> None:
        if ok:
            self.held.append(fact)
        else:
            self.failed.append(f"{fact}: expected {want!r}, read {got!r}")


def run(real: RealFile) -> Outcome:
    """Run the kind's reader over the file and check every fact of its sidecar."""
    outcome = Outcome(real)
    reader = READERS[real.kind]
    try:
        outcome.result = reader(real.path)
    except InputError as exc:
        outcome.error = str(exc)
    refuse = real.facts.get("refuse")
    if refuse:
        _check_refusal(outcome, refuse)
        return outcome
    if outcome.error is not None:
        outcome.failed.append(f"refused: {outcome.error}")
        return outcome
    CHECKS[real.kind](outcome, real.facts.get("read") or {})
    _check_gaps(outcome, real.facts.get("gaps") or [])
    return outcome


def _check_refusal(outcome: Outcome, refuse: dict[str, Any]) -> None:
    if outcome.error is None:
        outcome.failed.append(f"refuse: expected a refusal naming line {refuse['line']} ({refuse['why']}), but it was read")
        return
    line = int(refuse["line"])
    named = re.search(rf"(?::|line ){line}(?:\D|$)", outcome.error) is not None
    outcome.expect("refuse.line", named, outcome.error, f"a message naming line {line}")


# --- nccl-tests ----------------------------------------------------------------------------------------------

_OP_WORDS = {"sendrecv": "send_recv", "alltoall": "all_to_all", "send_recv": "send_recv"}


def _op(word: str) -> str:
    word = word.strip()
    return _OP_WORDS.get(word, word)


def _stated_ops(value: str) -> list[str]:
    """`all_reduce` or `all_reduce, all_gather (2 blocks)` or `reduce (twice)` as a list of ops."""
    text = re.sub(r"\([^)]*\)", "", value)
    return [_op(word) for word in re.split(r"[,\s]+", text) if word and word != "and"]


def check_nccl_tests(outcome: Outcome, read: dict[str, Any], prefix: str = "") -> None:
    measurements = outcome.result
    rows = list(measurements.collectives)
    per_block = isinstance(read.get("blocks"), list)
    for key, want in read.items():
        fact = prefix + key
        if per_block and key in ("nranks", "peak_busbw_gbps"):
            # a summary over blocks that each say their own: it must be one of theirs
            tables = [[row for row in rows if row.table_line == table] for table in _tables_of(rows)]
            got_values = [table[0].nranks if key == "nranks" else max(row.busbw_gbps for row in table) for table in tables]
            outcome.expect(fact, want in got_values, got_values, f"{want} in one of the blocks")
        elif key == "op":
            ops = _stated_ops(str(want))
            got = list(dict.fromkeys(row.op for row in rows))
            outcome.expect(fact, set(got) == set(ops), got, ops)
        elif key == "nranks":
            got_ranks = sorted({row.nranks for row in rows}, key=lambda n: (n is None, n))
            if want is None:
                outcome.expect(fact, got_ranks == [None], got_ranks, "unknown")
            elif isinstance(want, int):
                outcome.expect(fact, got_ranks == [want], got_ranks, want)
            else:
                numbers = sorted({int(n) for n in re.findall(r"\d+", str(want))})
                outcome.expect(fact, got_ranks == numbers, got_ranks, numbers)
        elif key == "rows":
            got_rows = len(rows) + _zero_records(measurements)
            outcome.expect(fact, got_rows == want, got_rows, want)
        elif key == "peak_busbw_gbps":
            got_peak = max((row.busbw_gbps for row in rows), default=None)
            outcome.expect(fact, got_peak == want, got_peak, want)
        elif key == "sizes":
            if want is None:
                outcome.expect(fact, not rows, len(rows), 0)
                continue
            low, high = want
            sizes = [row.size_bytes for row in rows]
            zero_noted = any("0 bytes skipped" in note for note in measurements.notes)
            got_low = 0 if zero_noted else min(sizes, default=None)
            outcome.expect(fact, (got_low, max(sizes, default=None)) == (low, high), (got_low, max(sizes, default=None)),
                           (low, high))
        elif key == "hosts":
            _check_hosts(outcome, fact, want, measurements)
        elif key == "hosts_count":
            got_hosts = _hosts_of(measurements)
            outcome.expect(fact, len(got_hosts) == want, len(got_hosts), want)
        elif key == "inplace_wrong":
            in_place = [row.wrong for row in rows if row.in_place]
            outcome.expect(fact, bool(in_place) and all(w is None for w in in_place), in_place[:3], "N/A on every in-place row")
        elif key == "wrong_nonzero":
            got_wrong = sum(1 for row in rows if row.wrong)
            want_count = want if isinstance(want, int) else int(re.findall(r"\d+", str(want))[0])
            outcome.expect(fact, got_wrong == want_count, got_wrong, want_count)
        elif key == "busbw_over_algbw":
            factors = {round(bus_factor(row.op, row.nranks), 4) for row in rows if row.nranks}
            outcome.expect(fact, factors == {round(float(want), 4)}, factors, want)
        elif key == "nccl_tests_version":
            identity = measurements.identity
            got_version = identity.tool_version if identity else None
            outcome.expect(fact, got_version == want, got_version, want)
        elif key == "blocks":
            table_lines = _tables_of(rows)
            if isinstance(want, int):
                outcome.expect(fact, len(table_lines) == want, len(table_lines), want)
                continue
            outcome.expect(fact, len(table_lines) == len(want), len(table_lines), len(want))
            for number, (block, table) in enumerate(zip(want, table_lines, strict=False)):
                sub = Outcome(outcome.file, _only(measurements, table))
                check_nccl_tests(sub, {key: value for key, value in block.items()
                                       if key in ("op", "nranks", "peak_busbw_gbps", "rows")}, f"{fact}[{number}].")
                outcome.absorb(sub)
        elif key in NOT_A_READER_FACT["nccl_tests"]:
            continue
        else:
            outcome.failed.append(f"{fact}: no rule for this fact")


def _zero_records(measurements: Any) -> int:
    """Records (out-of-place and in-place halves) of the 0-byte rows the reader skipped and said it skipped."""
    per_row = 2 if any(row.in_place for row in measurements.collectives) else 1
    return sum(int(found) * per_row for note in measurements.notes
               for found in re.findall(r"(\d+) row\(s\) of 0 bytes skipped", note))


def _tables_of(rows: list[Any]) -> list[int | None]:
    """The tables of a reading, in order (the line each starts at)."""
    return list(dict.fromkeys(row.table_line for row in rows))


def _only(measurements: Any, table: int | None) -> Any:
    import dataclasses

    rows = tuple(row for row in measurements.collectives if row.table_line == table)
    notes = tuple(note for note in measurements.notes if f"(line {table})" in note)
    return dataclasses.replace(measurements, collectives=rows, notes=notes)


def _hosts_of(measurements: Any) -> list[str]:
    identity = measurements.identity
    hosts = list(identity.hosts) if identity is not None else []
    for row in measurements.collectives:
        for host in row.hosts:
            if host not in hosts:
                hosts.append(host)
    return hosts


def _check_hosts(outcome: Outcome, fact: str, want: Any, measurements: Any) -> None:
    got = _hosts_of(measurements)
    if want is None:
        return
    if isinstance(want, int):
        if want == 0:
            outcome.expect(fact, not got, got, "no host names")
        else:
            outcome.expect(fact, len(got) == want, len(got), want)
        return
    outcome.expect(fact, got == list(want), got, list(want))


NOT_A_READER_FACT: dict[str, frozenset[str]] = {
    "nccl_tests": frozenset({
        "op_stated_by", "nranks_stated_by", "peak_at", "avg_busbw", "line_prefix", "prefix", "hash_prefix",
        "format_era", "peak_busbw_note", "rows_note", "hosts_note", "nranks_note", "sizes_note", "hosts_from",
        "threads_per_process", "elided_rows", "hosts_first", "step", "also_nccl_log", "gpu", "rank_lines_shown",
        "rows_size_0", "max_algbw_gbps", "nccl_version", "nccl_version_code", "tables", "dtype", "wrong_column",
    }),
    "topo": frozenset({"nic_nic_cells", "vm", "caption_line", "matrix", "legend", "also"}),
    "p2p": frozenset({"test", "convention", "p2p_access", "peer_access", "line_prefix", "line_indent", "hosts",
                      "direction", "diagonal", "sum", "sums", "range_offdiag_gbps", "range_gbps", "matrices",
                      "device_names", "rows", "version", "result", "device_busids", "tool", "tests", "driver",
                      "waived", "passed", "matrix_value_type"}),
    "nccl_log": frozenset({"nccl_version_note", "hosts_note", "nranks_stated_by", "transports_note", "example_edges",
                           "topology_dump_details", "nvls_details", "prefix", "rank_busids",
                           "ranks_per_host", "collnet_note", "topo_file", "net", "vm", "ranks_by_host", "nvls_note",
                           "socket_fallback", "nranks_note", "line_prefix", "env", "rings", "channels", "gpu",
                           "nranks_from", "failure", "warn_lines", "topology_dump_says", "table", "corrupt_lines",
                           "gdr", "gdr_note", "p2p_check", "nccl_era", "cuda_driver", "warn", "ranks_seen", "note"}),
    "trace": frozenset({"collectives_source", "record_param_comms", "gpu", "nccl_kernel_names", "c10d_ops"}),
    "nccl_topo_xml": frozenset({"vm", "container"}),
}
"""Facts that describe the file for people (where a value was read, the footer's average, the prefix style) and
that no reader output carries; they are documentation, not checks."""


# --- nvidia-smi topo -m ---------------------------------------------------------------------------------------

_CELL = re.compile(r"(GPU|NIC)?(\w+?)-(GPU|NIC)?(\w+)")


def check_topo(outcome: Outcome, read: dict[str, Any]) -> None:
    snapshot = outcome.result
    host = snapshot.host
    legend = read.get("nic_legend") or read.get("nic_names") or {}
    for key, want in read.items():
        if key == "gpus":
            outcome.expect(key, len(host.gpus) == want, len(host.gpus), want)
        elif key == "nics":
            if want is None:
                continue
            names = [legend.get(label, label) for label in want]
            got = [nic.name for nic in host.nics]
            outcome.expect(key, got == names, got, names)
        elif key == "nics_count":
            outcome.expect(key, len(host.nics) == want, len(host.nics), want)
        elif key in ("nic_legend", "nic_names"):
            got = [nic.name for nic in host.nics]
            outcome.expect(key, all(device in got for device in want.values()), got, sorted(want.values()))
        elif key == "gpu_gpu_cells":
            for pair, token in want.items():
                a, b = (int(x) for x in re.findall(r"GPU(\d+)", pair))
                got = host.link(_gpu_position(host, a), _gpu_position(host, b)).token
                outcome.expect(f"{key}.{pair}", got == token, got, token)
        elif key == "gpu_nic_cells":
            nic_names = [nic.name for nic in host.nics]
            for pair, token in want.items():
                gpu_label, nic_label = pair.split("-", 1)
                gpu = _gpu_position(host, int(gpu_label[3:]))
                column = _nic_column(nic_label, nic_names, legend, read.get("nics"))
                got_token = host.gpu_nic[gpu][column] if column is not None else None
                outcome.expect(f"{key}.{pair}", got_token == token, got_token, token)
        elif key in ("cpu_affinity", "numa_affinity"):
            got = [getattr(gpu, key) for gpu in host.gpus]
            wanted = [None] * len(host.gpus) if want is None else want  # null: the text has no such column
            outcome.expect(key, got == wanted, got, wanted)
        elif key == "gpu_numa_id":
            got = [gpu.gpu_numa_id for gpu in host.gpus]
            wanted = [None if value == "N/A" else int(value) for value in want]
            outcome.expect(key, got == wanted, got, wanted)
        elif key in NOT_A_READER_FACT["topo"]:
            continue
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


def _gpu_position(host: Any, index: int) -> int:
    return next(position for position, gpu in enumerate(host.gpus) if gpu.index == index)


def _nic_column(label: str, names: list[str], legend: dict[str, str], listed: list[str] | None) -> int | None:
    device = legend.get(label, label)
    if device in names:
        return names.index(device)
    if listed and label in listed:
        return listed.index(label)
    match = re.fullmatch(r"NIC(\d+)", label)
    return int(match.group(1)) if match and int(match.group(1)) < len(names) else None


# --- p2p matrices ----------------------------------------------------------------------------------------------


_PAIR = re.compile(r"(\d+)\s*->\s*(\d+)")


def check_p2p(outcome: Outcome, read: dict[str, Any]) -> None:
    measurements = outcome.result
    for key, want in read.items():
        if key == "devices":
            seen = {copy.src for copy in measurements.peer_copies} | {copy.dst for copy in measurements.peer_copies} | \
                {copy.gpu for copy in measurements.host_copies}
            identity = measurements.identity
            count = identity.gpu_count if identity is not None and identity.gpu_count else len(seen)
            outcome.expect(key, count == want or (not seen and count in (0, want)), count, want)
        elif key == "cells":
            no_peer = "CANNOT" in str(read.get("p2p_access", "")) + str(read.get("peer_access", ""))
            for cell, value in want.items():
                got = _p2p_cell(measurements, cell, no_peer)
                if got is _UNREPRESENTED:
                    outcome.held.append(f"cells.{cell} (not a link figure: {_why_unrepresented(cell)})")
                    continue
                outcome.expect(f"cells.{cell}", got is not None and abs(got - value) <= 1e-9 + 1e-6 * abs(value), got, value)
        elif key in NOT_A_READER_FACT["p2p"]:
            continue
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


_UNREPRESENTED = object()


def _why_unrepresented(cell: str) -> str:
    if cell.startswith("local") or re.search(r"(\d+)->\1\b", cell):
        return "a GPU's copy within its own memory (the matrix diagonal)"
    if "CPU" in cell and "latency" in cell:
        return "the CPU-side latency of the launch, not of a link"
    if "disabled" in cell:
        return ("P2P=Disabled figures of pairs that cannot reach their peer: their P2P=Enabled figures already are "
                "host-staged copies")
    if "reads" in cell:
        return "P2P Reads figures beside the P2P Writes of the same test: linkscope's peer copies are writes"
    if "sum" in cell.lower():
        return "a sum line"
    return "a test linkscope does not import"


def _p2p_cell(measurements: Any, cell: str, no_peer: bool = False) -> Any:
    words = cell.replace("(", " ").replace(")", " ").split()
    if no_peer and "disabled" in words:
        return _UNREPRESENTED
    if words[0] == "local" or (re.search(r"(\d+)\s*->\s*\1\b", cell) and "row" not in cell):
        return _UNREPRESENTED
    if "latency" in words and "CPU" in words:
        return _UNREPRESENTED
    if words[0] in ("h2d", "d2h"):
        gpu = int(words[1].removeprefix("GPU"))
        direction = words[0]
        values = [copy.gbps for copy in measurements.host_copies if copy.gpu == gpu and copy.direction == direction]
        return values[0] if len(values) == 1 else (values or None)
    if words[0].endswith("_ce") or words[0].endswith("_sm") or words[0] in ("device_local_copy",):
        return _nvbandwidth_cell(measurements, words)
    row_col = re.match(r"row(\d+) col(\d+)", cell)
    pair = _PAIR.search(cell)
    if row_col is not None:
        src, dst = int(row_col.group(2)), int(row_col.group(1))
    elif pair is not None:
        src, dst = int(pair.group(1)), int(pair.group(2))
    else:
        return None
    p2p: bool | str | None = "any"
    if "disabled" in words or (no_peer and "enabled" in words):
        p2p = False
    elif "enabled" in words:
        p2p = True
    copies = [copy for copy in measurements.peer_copies if copy.src == src and copy.dst == dst
              and (p2p == "any" or (copy.p2p_enabled is False) == (p2p is False))]
    if "latency" in words:
        values = [copy.latency_us for copy in copies if copy.latency_us is not None]
    elif "bidir" in words:
        values = [copy.bidir_gbps for copy in copies if copy.bidir_gbps is not None]
    else:
        values = [copy.unidir_gbps for copy in copies if copy.unidir_gbps is not None]
    if "reads" in words and any(copy.p2p_enabled is not False for copy in measurements.peer_copies) and \
            "P2P Reads figures not recorded" in " ".join(measurements.notes):
        return _UNREPRESENTED
    return values[0] if values else None


def _nvbandwidth_cell(measurements: Any, words: list[str]) -> Any:
    test = words[0]
    gpu_word = next((word for word in words[1:] if "GPU" in word), "")
    gpu = int(re.findall(r"GPU(\d+)", gpu_word)[-1]) if "GPU" in gpu_word else None
    if test.startswith("host_to_device") and "bidirectional" not in test:
        direction = "h2d"
    elif test.startswith("device_to_host") and "bidirectional" not in test:
        direction = "d2h"
    else:
        return _UNREPRESENTED
    values = [copy.gbps for copy in measurements.host_copies if copy.gpu == gpu and copy.direction == direction]
    if not values:
        return None
    return values[-1] if test.endswith("_sm") else values[0]  # nvbandwidth runs its copy-engine tests before the SM ones


# --- NCCL logs -------------------------------------------------------------------------------------------------


def check_nccl_log(outcome: Outcome, read: dict[str, Any]) -> None:
    log = outcome.result
    for key, want in read.items():
        if key == "nccl_version":
            got = log.version
            ok = got == want or (want is not None and got is not None and got.split("+")[0] == str(want).split("+")[0])
            outcome.expect(key, ok, got, want)
        elif key == "nranks":
            stated = _log_nranks(log)
            seen = max((rank.rank for rank in log.ranks), default=None)
            if want is None:
                outcome.expect(key, stated is None, stated, "no communicator size stated")
            else:
                ok = stated == want or (stated is None and seen is not None and seen + 1 == want)
                outcome.expect(key, ok, f"stated {stated}, highest rank seen {seen}", want)
        elif key == "hosts":
            got = sorted(log.hosts)
            if isinstance(want, list):
                outcome.expect(key, got == sorted(want), got, sorted(want))
            elif isinstance(want, int):
                outcome.expect(key, len(got) == want, len(got), want)
        elif key == "transports":
            got = dict(Counter(edge.transport for edge in log.edges))
            outcome.expect(key, got == want, got, want)
        elif key == "nvls":
            outcome.expect(key, log.nvls.used == want, log.nvls, want)
        elif key == "collnet":
            got = any(edge.transport == "COLLNET" for edge in log.edges)
            outcome.expect(key, got == want, got, want)
        elif key == "topology_dump":
            outcome.expect(key, bool(log.topologies) == want, len(log.topologies), want)
        elif key == "graph":
            _check_log_graph(outcome, log, want)
        elif key == "also_nccl_tests":
            from linkscope.topo.formats.results import read_measurements

            try:
                tables = Outcome(outcome.file, read_measurements(_text(outcome.file.path), outcome.file.path.name))
            except InputError as exc:
                outcome.failed.append(f"also_nccl_tests: refused: {exc}")
                continue
            check_nccl_tests(tables, want, "also_nccl_tests.")
            outcome.absorb(tables)
        elif key in NOT_A_READER_FACT["nccl_log"]:
            continue
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


def _check_log_graph(outcome: Outcome, log: Any, want: dict[str, Any]) -> None:
    """`{"pattern4": {"nChannels", "bw": "intra/inter", "type": "intra/inter", "channel": "NET/0 GPU/0..GPU/7 NET/0"},
    "pattern1": "same"}`: the graphs of the `Pattern N, ...` lines."""
    graphs = [graph for found in log.graphs for graph in found.graphs]
    first: dict[str, Any] = {}
    for label, facts in want.items():
        facts = first if facts == "same" else facts
        first = first or facts
        code = int(label.removeprefix("pattern"))
        graph = next((graph for graph in graphs if graph.pattern_code == code), None)
        if graph is None:
            outcome.failed.append(f"graph.{label}: no Pattern {code} line read")
            continue
        intra, inter = (float(value) for value in facts["bw"].split("/"))
        type_intra, type_inter = facts["type"].split("/")
        got = (graph.nchannels, graph.speed_intra_gbps, graph.speed_inter_gbps, graph.type_intra, graph.type_inter)
        wanted = (facts["nChannels"], intra, inter, type_intra, type_inter)
        outcome.expect(f"graph.{label}", got == wanted, got, wanted)
        ends = re.fullmatch(r"NET/(\d+) GPU/(\d+)\.\.GPU/(\d+) NET/(\d+)", facts["channel"])
        if ends:
            net_in, low, high, net_out = (int(n) for n in ends.groups())
            hops = [f"net{net_in}", *(f"rank{n}" for n in range(low, high + 1)), f"net{net_out}"]
            got_hops = [hop.as_json() for hop in graph.channels[0]] if graph.channels else []
            outcome.expect(f"graph.{label}.channel", got_hops == hops, got_hops, hops)


def _log_nranks(log: Any) -> int | None:
    sizes = [comm.nranks for comm in log.communicators if comm.nranks is not None]
    return max(sizes) if sizes else None


# --- profiler traces -------------------------------------------------------------------------------------------


def check_trace(outcome: Outcome, read: dict[str, Any]) -> None:
    trace = outcome.result
    for key, want in read.items():
        if key in ("rank", "world_size", "backend", "nccl_version"):
            got = getattr(trace, key)
            outcome.expect(key, got == want, got, want)
        elif key == "steps":
            outcome.expect(key, len(trace.steps) == want, len(trace.steps), want)
        elif key == "step_names":
            got = [f"ProfilerStep#{step.step}" for step in trace.steps]
            ok = all(name in got for name in want)
            outcome.expect(key, ok, got, want)
        elif key == "collectives_by_op":
            got = dict(Counter(call.op for call in trace.collectives))
            outcome.expect(key, got == want, got, want)
        elif key == "nccl_kernels":
            got = sum(1 for call in trace.collectives if call.on_device)
            outcome.expect(key, got <= want, got, f"at most {want} calls timed by a kernel")
        elif key in NOT_A_READER_FACT["trace"]:
            continue
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


# --- NCCL topology and graph XML -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopoReading:
    """NCCL's machine as read from its XML, and the snapshot made of it."""

    topology: Any
    snapshot: Any
    text: str

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.topology.notes)

    @property
    def gaps(self) -> tuple[Any, ...]:
        return tuple(self.snapshot.gaps)


def read_nccl_topo_xml(path: Path) -> Any:
    from linkscope.topo.formats.nccl_topo_snapshot import snapshot_of
    from linkscope.topo.formats.nccl_topo_xml import read_nccl_topo_xml as read

    text = _text(path)
    topology = read(text, path.name)
    return TopoReading(topology, snapshot_of(topology), text)


def read_nccl_graph_xml(path: Path) -> Any:
    from linkscope.topo.formats.nccl_graph import read_nccl_graph_xml as read

    return read(_text(path), path.name)


def _nccl_bus(gpu: Any) -> str:
    from linkscope.topo.formats.nccl_topo_snapshot import nccl_bus_id

    return nccl_bus_id(gpu.pci_bus_id or "")


def _bus_matches(token: str, busid: str) -> bool:
    """`0000:0f:00.0`, its domain `0001` or its bus `0f` name the bus id `busid` (NCCL's spelling)."""
    token = token.lower()
    domain, bus = busid.split(":")[0], busid.split(":")[1] if busid.count(":") == 2 else ""
    return token in (busid, domain, bus)


def _must(match: re.Match[str] | None, wording: str) -> re.Match[str]:
    """The match of a sidecar's wording; a wording no rule reads is a test error, not a silent pass."""
    if match is None:
        raise AssertionError(f"no rule reads this wording: {wording}")
    return match


def _first_word(value: Any) -> str:
    return str(value).split()[0]


def _speed_of(text: str) -> tuple[float, int] | None:
    match = re.search(r"(\d+(?:\.\d+)?) GT/s(?: PCIe)? x(\d+)", text)
    return (float(match.group(1)), int(match.group(2))) if match else None


def _expand_names(key: str, names: list[str]) -> list[str]:
    """`mlx5_0-3` -> mlx5_0..mlx5_3; `virtual (br-/veth)` -> the names starting so; else the name itself."""
    ranged = re.fullmatch(r"(.*?)(\d+)-(\d+)", key)
    if ranged:
        return [f"{ranged.group(1)}{n}" for n in range(int(ranged.group(2)), int(ranged.group(3)) + 1)]
    prefixes = re.search(r"\(([^)]*)\)", key)
    if prefixes:
        starts = tuple(part.strip() for part in prefixes.group(1).split("/"))
        return [name for name in names if name.startswith(starts)]
    return [key]


def check_nccl_topo_xml(outcome: Outcome, read: dict[str, Any]) -> None:
    reading = outcome.result
    topology, host = reading.topology, reading.snapshot.host
    gpu_pcis = [topology.pci(gpu.busid) for gpu in topology.gpus]
    stated_nets = [net for net in topology.nets if net.stated]
    got: Any
    wanted: Any
    for key, want in read.items():
        if key == "gpus":
            outcome.expect(key, len(host.gpus) == want, len(host.gpus), want)
        elif key == "gpu_busids":
            got = [_nccl_bus(gpu) for gpu in host.gpus]
            ok = len(got) == len(want) and all(_bus_matches(w, g) for w, g in zip(want, got, strict=False))
            outcome.expect(key, ok, got, want)
        elif key == "nics":
            names = [_first_word(name) for name in want]
            got = [nic.name.split(":")[0] if nic.name.split(":")[0] in names else nic.name for nic in host.nics]
            outcome.expect(key, got == names, got, names)
        elif key == "nic_class":
            classes = {topology.pci(net.busid).class_code for net in topology.nets}
            outcome.expect(key, classes == {_first_word(want)} and not stated_nets, (classes, len(stated_nets)), want)
        elif key == "nic_type":
            ids = re.search(r"([0-9a-f]{4}):([0-9a-f]{4})", want)
            klass = re.search(r"class (0x[0-9a-f]+)", want)
            got = {(pci.vendor, pci.device, pci.class_code) for pci in (topology.pci(net.busid) for net in topology.nets)}
            wanted = {(f"0x{ids.group(1)}", f"0x{ids.group(2)}", klass.group(1))} if ids and klass else None
            outcome.expect(key, got == wanted and not stated_nets, got, wanted)
        elif key == "nvlinks":
            _check_nvlinks(outcome, topology, host, str(want))
        elif key == "pci_link_speeds":
            for number, statement in enumerate(want):
                _check_link_speed(outcome, f"{key}[{number}]", topology, host, statement)
        elif key == "cpus_numa":
            for cpu_fact in want:
                _check_cpu(outcome, topology, host, cpu_fact)
        elif key == "gpu_device_id":
            got = {pci.device for pci in gpu_pcis if pci}
            outcome.expect(key, got == {want}, got, want)
        elif key == "gpu_sm":
            got = {gpu.sm for gpu in topology.gpus}
            capability = {gpu.compute_capability for gpu in host.gpus}
            outcome.expect(key, got == {want} and capability == {f"{want // 10}.{want % 10}"}, (got, capability), want)
        elif key == "nic_speeds":
            names = [net.name for net in topology.nets]
            for label, speed in want.items():
                chosen = _expand_names(label, names)
                got = {net.speed_mbps for net in topology.nets if net.name in chosen}
                rates = {nic.rate_gbit_per_s for nic in host.nics if nic.name in chosen}
                outcome.expect(f"{key}.{label}", bool(chosen) and got == {speed} and rates == {speed / 1000},
                               (chosen, got, rates), speed)
        elif key == "nic_speed":
            got = {net.speed_mbps for net in stated_nets}
            outcome.expect(key, got == {want}, got, want)
        elif key == "net":
            got = [(net.name, net.speed_mbps, net.gdr) for net in stated_nets]
            wanted = [(want["name"], want["speed"], bool(want["gdr"]))]
            outcome.expect(key, got == wanted, got, wanted)
        elif key == "host_hash":
            got = {cpu.host_hash for cpu in topology.cpus}
            outcome.expect(key, got == {want}, got, want)
        elif key == "nic_pci":
            nic_pci = _must(re.fullmatch(r"(\d+) NICs class (0x[0-9a-f]+), (\d+) ports each", want), want)
            count, pci_class, ports = int(nic_pci.group(1)), nic_pci.group(2), int(nic_pci.group(3))
            by_bus = Counter(net.busid for net in stated_nets)
            classes = {topology.pci(bus).class_code for bus in by_bus}
            ok = len(by_bus) == count and classes == {pci_class} and set(by_bus.values()) == {ports}
            outcome.expect(key, ok, (len(by_bus), classes, set(by_bus.values())), want)
        elif key == "gpu_nic_pairing":
            _check_pairing(outcome, topology, str(want))
        elif key == "gpu_nic_pairs_per_switch":
            per_switch = _must(re.search(r"(\d+) GPU \+ (\d+) NIC under each of (\d+)", want), want)
            gpus, nics, bridges = (int(n) for n in per_switch.groups())
            tops = [pci for pci in topology.pcis if pci.is_bridge]
            children = [(sum(1 for gpu in topology.gpus if topology.pci(gpu.busid).parent == bridge.busid),
                         sum(1 for net in topology.nets if net.busid and topology.pci(net.busid).parent == bridge.busid))
                        for bridge in tops]
            outcome.expect(key, len(tops) == bridges and set(children) == {(gpus, nics)}, children, want)
        elif key == "gdr":
            _check_gdr(outcome, topology, str(want))
        elif key == "gpu_devs_ranks":
            got = [[gpu.dev, gpu.rank] for gpu in topology.gpus]
            outcome.expect(key, got == want, got, want)
        elif key == "nics_note":
            distinct = int(_must(re.match(r"(\d+) distinct", want), want).group(1))
            devs = sorted(net.dev for net in topology.nets)
            repeated = any("appears under more than one CPU" in note for note in topology.notes)
            outcome.expect(key, len(topology.nets) == distinct and devs == list(range(distinct)) and repeated,
                           (len(topology.nets), devs), want)
        elif key == "xml_comments":
            later = reading.text.split("\n", 1)[1]
            outcome.expect(key, ("<!--" in later) == want and len(host.gpus) > 0, "<!--" in later, want)
        elif key == "leading_blank_line":
            lines = reading.text.split("\n")
            outcome.expect(key, (lines[1].strip() == "") == want and len(host.gpus) > 0, lines[1], want)
        elif key in NOT_A_READER_FACT["nccl_topo_xml"]:
            continue
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


def _check_nvlinks(outcome: Outcome, topology: Any, host: Any, want: str) -> None:
    fact = "nvlinks"
    nv_pairs = [link for link in host.links if link.kind.value == "NV"]
    if want.startswith("none"):
        outcome.expect(fact, not nv_pairs and not any(gpu.nvlinks for gpu in topology.gpus), len(nv_pairs), want)
        return
    pairs = re.findall(r"GPU(\d+) -> (\S+) count (\d+)", want)
    if pairs:
        for gpu_index, target, count in pairs:
            gpu = topology.gpus[int(gpu_index)]
            got = [(link.target, link.count) for link in gpu.nvlinks]
            outcome.expect(f"{fact}.GPU{gpu_index}", got == [(target, int(count))], got, (target, count))
        tokens = {link.token for link in host.links}
        outcome.expect(f"{fact}.matrix", tokens == {f"NV{pairs[0][2]}"}, tokens, f"NV{pairs[0][2]}")
        return
    count = int(_must(re.search(r"count=\\?\"?(\d+)", want), want).group(1)) if "count=" in want else None
    if "self-loop" in want:
        ok = all(len(gpu.nvlinks) == 1 and gpu.nvlinks[0].target == gpu.busid and gpu.nvlinks[0].count == count
                 for gpu in topology.gpus)
        noted = any("targets the GPU itself" in note for note in topology.notes)
        outcome.expect(fact, ok and noted and not nv_pairs, [gpu.nvlinks for gpu in topology.gpus], want)
        return
    if "each GPU one" in want:
        target = _must(re.search(r'target=\\?"([^"\\]+)', want), want).group(1)
        ok = all([(link.target, link.count, link.to_nvswitch) for link in gpu.nvlinks] == [(target, count, True)]
                 for gpu in topology.gpus)
        outcome.expect(fact, ok and {link.token for link in host.links} == {f"NV{count}"},
                       [gpu.nvlinks for gpu in topology.gpus][:1], want)
        return
    per_gpu = re.search(r"each GPU (\d+) <nvlink> to NVSwitches (\S+) \(tclass (0x[0-9a-f]+)\) with counts ([\d+]+) = (\d+)",
                        want)
    if per_gpu:
        number, targets, tclass, counts, total = per_gpu.groups()
        domain, buses, rest = _must(re.fullmatch(r"(\w+):([\w/]+):(\S+)", targets), targets).groups()
        wanted_targets = {f"{domain}:{bus}:{rest}" for bus in buses.split("/")}
        wanted_counts = sorted(int(n) for n in counts.split("+"))
        for gpu in topology.gpus:
            seen = (len(gpu.nvlinks), {link.target for link in gpu.nvlinks}, {link.target_class for link in gpu.nvlinks},
                    sorted(link.count for link in gpu.nvlinks))
            stated = (int(number), wanted_targets, {tclass}, wanted_counts)
            outcome.expect(f"{fact}.{gpu.busid}", seen == stated, seen, stated)
        outcome.expect(f"{fact}.matrix", {link.token for link in host.links} == {f"NV{total}"},
                       {link.token for link in host.links}, f"NV{total}")
        return
    outcome.failed.append(f"{fact}: no rule for this wording: {want}")


def _check_link_speed(outcome: Outcome, fact: str, topology: Any, host: Any, statement: str) -> None:
    speed = _speed_of(statement)
    empty = statement.startswith('""') or '""' in statement
    if statement.startswith(("GPUs", '""')) or "GPU pci nodes" in statement or "on both GPUs" in statement:
        nodes = [topology.pci(gpu.busid) for gpu in topology.gpus]
    elif "host bridges" in statement:
        klass = _must(re.search(r"class (0x[0-9a-f]+)", statement), statement).group(1)
        nodes = [pci for pci in topology.pcis if pci.class_code == klass]
    elif re.match(r"(\w+ )?NICs? |enp|eno|mlx", statement):
        nodes = [topology.pci(bus) for bus in dict.fromkeys(net.busid for net in topology.nets if net.busid)]
    elif "top-level switches" in statement:
        nodes = [pci for pci in topology.pcis if pci.parent is None and pci.is_bridge]
        buses = _must(re.search(r"\(([^)]*)\)", statement), statement).group(1).replace("0000:", "").split(", ")
        outcome.expect(f"{fact}.buses", sorted(pci.busid.split(":")[1] for pci in nodes) == sorted(buses),
                       [pci.busid for pci in nodes], buses)
    elif "other pci nodes" in statement:
        nodes = [pci for pci in topology.pcis if not (pci.parent is None and pci.is_bridge)]
    else:
        nodes = list(topology.pcis)
    count = re.search(r"all (\d+)", statement) or re.search(r"on the (\d+)", statement)
    if count:
        outcome.expect(f"{fact}.count", len(nodes) == int(count.group(1)), len(nodes), int(count.group(1)))
    if empty:
        got = {(pci.link_speed, pci.link_width) for pci in nodes}
        outcome.expect(fact, got == {("", 0)}, got, {("", 0)})
        if statement.startswith('""') or "GPU" in statement:
            gens = {(gpu.pcie_gen_max, gpu.pcie_width_max) for gpu in host.gpus}
            outcome.expect(f"{fact}.snapshot", gens == {(None, None)}, gens, "no PCIe generation or width")
        return
    if speed is None:
        outcome.failed.append(f"{fact}: no rule for this wording: {statement}")
        return
    got = {(pci.link_gts, pci.link_width) for pci in nodes}
    outcome.expect(fact, bool(nodes) and got == {speed}, got, {speed})
    if statement.startswith("GPUs"):
        from linkscope.topo.formats.nccl_topo_model import pcie_gen_of

        gens = {(gpu.pcie_gen_max, gpu.pcie_width_max) for gpu in host.gpus}
        wanted = {(pcie_gen_of(speed[0]), speed[1])}
        outcome.expect(f"{fact}.snapshot", gens == wanted, gens, wanted)


def _check_cpu(outcome: Outcome, topology: Any, host: Any, want: dict[str, Any]) -> None:
    from linkscope.topo.formats.nccl_topo_snapshot import cpulist_of_mask

    numa = want["numaid"]
    fact = f"cpus_numa[{numa}]"
    positions = [i for i, cpu in enumerate(topology.cpus) if cpu.numa_id == numa]
    if not positions:
        outcome.failed.append(f"{fact}: no <cpu numaid={numa}> read")
        return
    cpu = topology.cpus[positions[0]]
    for key, value in want.items():
        if key == "numaid":
            outcome.held.append(f"{fact}.numaid")
        elif key == "affinity":
            outcome.expect(f"{fact}.affinity", cpu.affinity == _first_word(value), cpu.affinity, value)
            cpus = {gpu.cpu_affinity for gpu in host.gpus if gpu.numa_node == numa}
            outcome.expect(f"{fact}.cpu_affinity", cpus <= {cpulist_of_mask(cpu.affinity)}, cpus,
                           cpulist_of_mask(cpu.affinity))
        elif key == "gpus":
            gpus = [gpu for gpu in host.gpus if gpu.numa_node == numa]
            ok = len(gpus) == len(value) and all(
                any(gpu.index == item if isinstance(item, int) else _bus_matches(_first_word(item), _nccl_bus(gpu))
                    for gpu in gpus) for item in value)
            outcome.expect(f"{fact}.gpus", ok, [_nccl_bus(gpu) for gpu in gpus], value)
        elif key == "nics":
            nics = [nic for nic in host.nics if nic.numa_node == numa]
            ok = all(any(nic.name == _first_word(item) or _bus_matches(_first_word(item), nic.name) for nic in nics)
                     for item in value)
            outcome.expect(f"{fact}.nics", ok, [nic.name for nic in nics], value)
        elif key in ("switch", "switches"):
            for item in [value] if key == "switch" else value:
                bus = _first_word(item)
                top = topology.pci(bus)
                ok = top is not None and top.parent is None and top.cpu in positions
                outcome.expect(f"{fact}.{key}.{bus}", ok, top, bus)
                members = re.search(r"\(([^)]*)\)", item)
                for member in members.group(1).split(",") if members else ():
                    kind, index = _must(re.fullmatch(r"(GPU|NIC)(\d+)", member.strip()), member).groups()
                    device = (host.gpus if kind == "GPU" else host.nics)[int(index)]
                    from linkscope.topo.formats.nccl_topo_snapshot import nvml_bus_id

                    outcome.expect(f"{fact}.{key}.{bus}.{member}", nvml_bus_id(bus) in device.pci_path,
                                   device.pci_path, bus)
        else:
            outcome.failed.append(f"{fact}.{key}: no rule for this fact")


def _check_pairing(outcome: Outcome, topology: Any, want: str) -> None:
    for gpu_number, gpu in enumerate(topology.gpus):
        top = topology.pci_chain(gpu.busid)[0].busid
        nets = [net.name for net in topology.nets if net.busid and topology.pci_chain(net.busid)[0].busid == top]
        buses = {net.busid for net in topology.nets if net.name in nets}
        outcome.expect(f"gpu_nic_pairing.GPU{gpu_number}", len(nets) == 2 and len(buses) == 1, nets, "one dual-port NIC")
    for gpu_number, first, second in re.findall(r"GPU(\d+) with (\w+?_)(\d+)/(\d+)", want) and [
            (int(g), f"{p}{a}", f"{p}{b}") for g, p, a, b in re.findall(r"GPU(\d+) with (\w+?_)(\d+)/(\d+)", want)]:
        gpu = topology.gpus[gpu_number]
        top = topology.pci_chain(gpu.busid)[0].busid
        nets = [net.name for net in topology.nets if net.busid and topology.pci_chain(net.busid)[0].busid == top]
        outcome.expect(f"gpu_nic_pairing.GPU{gpu_number}.names", nets == [first, second], nets, [first, second])


def _check_gdr(outcome: Outcome, topology: Any, want: str) -> None:
    gpu_flags = {gpu.gdr for gpu in topology.gpus}
    net_flags = {net.gdr for net in topology.nets if net.stated}
    split = re.fullmatch(r"(\d) on GPUs, (\d) on NICs", want)
    if split:
        wanted = ({split.group(1) == "1"}, {split.group(2) == "1"})
    else:
        flag = _must(re.match(r"(\d)", want), want).group(1) == "1"
        wanted = ({flag}, {flag})
    outcome.expect("gdr", (gpu_flags, net_flags) == wanted, (gpu_flags, net_flags), wanted)


def check_nccl_graph_xml(outcome: Outcome, read: dict[str, Any]) -> None:
    dump = outcome.result
    for key, want in read.items():
        if key == "graphs":
            outcome.expect("graphs.count", len(dump.graphs) == len(want), len(dump.graphs), len(want))
            for graph, facts in zip(dump.graphs, want, strict=False):
                for name, value in facts.items():
                    got = {
                        "id": graph.graph_id, "pattern": graph.pattern_code, "nchannels": graph.nchannels,
                        "speedintra": graph.speed_intra_gbps, "speedinter": graph.speed_inter_gbps,
                        "typeintra": graph.type_intra, "typeinter": graph.type_inter, "crossnic": graph.crossnic,
                        "samechannels": graph.same_channels,
                        "channels": [[hop.as_json() for hop in channel] for channel in graph.channels],
                    }.get(name, KeyError)
                    if got is KeyError:
                        outcome.failed.append(f"graphs[{facts.get('id')}].{name}: no rule for this fact")
                        continue
                    outcome.expect(f"graphs[{facts.get('id')}].{name}", got == value, got, value)
        elif key == "gpus_per_channel":
            sizes = {sum(1 for hop in channel if hop.kind == "gpu") for graph in dump.graphs for channel in graph.channels}
            outcome.expect(key, sizes == {want}, sizes, want)
        elif key == "net_in_channels":
            got = any(hop.kind == "net" for graph in dump.graphs for channel in graph.channels for hop in channel)
            outcome.expect(key, got == want, got, want)
        elif key == "dev_format":
            devs = [hop.dev for graph in dump.graphs for channel in graph.channels for hop in channel]
            outcome.expect(key, devs[:4] == [0, 1, 2, 3], devs[:4], "0, 0x1, 0x2, 0x3 read as 0, 1, 2, 3")
        else:
            outcome.failed.append(f"{key}: no rule for this fact")


CHECKS: dict[str, Callable[[Outcome, dict[str, Any]], None]] = {
    "nccl_tests": check_nccl_tests,
    "topo": check_topo,
    "p2p": check_p2p,
    "nvbandwidth_json": check_p2p,
    "nccl_log": check_nccl_log,
    "trace": check_trace,
    "nccl_topo_xml": check_nccl_topo_xml,
    "nccl_graph_xml": check_nccl_graph_xml,
}


# --- gaps ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GapRule:
    """A kind of gap a reader must report, how the sidecars word it, and where the reader says it."""

    kinds: tuple[str, ...]
    wording: re.Pattern[str]
    said: Callable[[Any, re.Match[str]], bool]
    where: str


def _notes(result: Any) -> str:
    return "\n".join(getattr(result, "notes", ()))


def _half_written(result: Any, match: re.Match[str]) -> bool:
    line = re.search(r"line (\d+)", match.string)
    note = "half-written last row dropped"
    return any(note in text and (line is None or f"line {line.group(1)}:" in text) for text in result.notes)


def _no_command_names_it(result: Any, match: re.Match[str]) -> bool:
    sources = {row.op_source for row in result.collectives}
    return sources == {"inferred"} and ("no command line names" in _notes(result) or "op shown as both" in _notes(result))


def _gaps_of(result: Any) -> str:
    return "\n".join(f"{gap.subject}: {gap.reason}" for gap in getattr(result, "gaps", ()))


GAP_RULES: tuple[GapRule, ...] = (
    GapRule(("nccl_tests", "p2p"), re.compile(r"half-written"), _half_written, "a note naming the dropped row"),
    GapRule(("nccl_tests",), re.compile(r"collective (?:is )?not named|no command line / collective name"),
            _no_command_names_it, "op_source `inferred` and a note that no command line names the collective"),
    GapRule(("nccl_tests",), re.compile(r"named only through the wrapper"),
            lambda result, _: {row.op_source for row in result.collectives} == {"command"},
            "op_source `command` (the wrapper's command line)"),
    GapRule(("nccl_tests",), re.compile(r"size-0 rows"), lambda result, _: "0 bytes skipped" in _notes(result),
            "a note that the 0-byte rows were skipped"),
    GapRule(("nccl_tests",), re.compile(r"ONE GPU|ONE rank"), lambda result, _: "ran on ONE rank" in _notes(result),
            "a note that a table ran on one rank"),
    GapRule(("nccl_tests",), re.compile(r"data corruption|#wrong > 0"),
            lambda result, _: "report wrong elements" in _notes(result), "a note that rows report wrong elements"),
    GapRule(("nccl_tests",), re.compile(r"rows? (?:below|between)[^,]*elided|rows? [^,]*elided by the author"),
            lambda result, _: "left out by the poster" in _notes(result), "a note naming the elision line"),
    GapRule(("nccl_tests",), re.compile(r"removed [^;]*columns|in-place half of each row absent"),
            lambda result, _: "columns cut from the table" in _notes(result) or "only the out-of-place half" in _notes(result),
            "a note that columns (or the in-place half) are missing"),
    GapRule(("nccl_tests",), re.compile(r"inconsistent with the busbw factor"),
            lambda result, _: "busbw/algbw of its rows says" in _notes(result), "a note that the ratio overrules the rank lines"),
    GapRule(("nccl_log",), re.compile(r"no connection|no transport \(via\)|init lines only|no connections to read"),
            lambda log, _: not log.edges, "no connections read"),
    GapRule(("nccl_log",), re.compile(r"cut/fused|fused/truncated|NCCL line overwritten"),
            lambda log, _: log.skipped_count > 0, "the unreadable lines counted as skipped"),
    GapRule(("topo",), re.compile(r"no (?:NIC )?legend"),
            lambda snapshot, _: not any(re.fullmatch(r"NIC\d+", nic.name) for nic in snapshot.host.nics)
            or "NIC device names" in _gaps_of(snapshot), "a gap `NIC device names` where NIC columns keep NICn labels"),
    GapRule(("topo",), re.compile(r"no NUMA Affinity column"), lambda snapshot, _: "NUMA Affinity: line" in _gaps_of(snapshot),
            "a gap for the missing NUMA Affinity column"),
    GapRule(("p2p", "nvbandwidth_json"), re.compile(r"waived"), lambda result, _: "waived" in _notes(result),
            "a note that the test was waived"),
    GapRule(("p2p",), re.compile(r"aborted"), lambda result, _: "failed before printing a matrix" in _notes(result),
            "a note that the test failed before its matrix"),
    GapRule(("nccl_topo_xml",), re.compile(r"link speed(?:/width)? not reported"),
            lambda reading, _: "PCIe link speed/width of GPU" in _gaps_of(reading), "a gap per GPU without link speed"),
    GapRule(("nccl_topo_xml",), re.compile(r"no GPU attributes"),
            lambda reading, _: "GPUs and NVLinks" in _gaps_of(reading), "a gap that GPUs and NVLinks are not stated"),
    GapRule(("trace",), re.compile(r"no distributedInfo"),
            lambda trace, _: trace.rank is None and trace.world_size is None, "rank and world size unknown"),
    GapRule(("trace",), re.compile(r"no NCCL kernel events"),
            lambda trace, _: all(call.launch_only for call in trace.collectives), "every call timed on the CPU"),
    GapRule(("trace",), re.compile(r"kernels cannot be used to count calls|kernels outside the annotated calls"),
            lambda trace, _: bool(trace.notes), "a note on the kernels that are no calls or the calls no kernel timed"),
)
"""The gaps a reader must report. A sidecar gap no rule matches describes the file for people (`no footer`, `network
not stated`, `GPU model not printed`): nothing a reader could say about it is missing from its reading."""


def _check_gaps(outcome: Outcome, gaps: list[str]) -> None:
    for gap in gaps:
        for rule in GAP_RULES:
            match = rule.wording.search(gap)
            if match is None or outcome.file.kind not in rule.kinds:
                continue
            outcome.expect(f"gap: {gap}", rule.said(outcome.result, match), "not said", rule.where)
