"""nvbandwidth's JSON output (`nvbandwidth -j`): the same tests and matrices as its text, as one JSON object.

`{"nvbandwidth": {"git_version", "Driver Version", "GPU Device list": ["0: NAME (BUS): (HOST)", ...],
"testcases": [{"name", "status", "bandwidth_description", "bandwidth_matrix": [["56.38", ...]], "sum"}]}}`:
matrix cells are strings (`"N/A"` where there is none), the description is the title the text prints above
the matrix, and a test that could not run says `"status": "Waived"` with no matrix. Each matrix is read
as the text's would be (:class:`topo.formats.p2p_matrices.NvbandwidthTables`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.numbers import non_negative_number
from linkscope.topo.formats.p2p_matrices import NvbandwidthTables, Table, nvbandwidth_title
from linkscope.topo.model.measurements import MeasuredOn, Measurements

_DEVICE = re.compile(r"(?P<device>\d{1,4}):\s*(?P<name>.+?)\s*\((?P<bus>[0-9A-Fa-f:.]+)\)(?::\s*\((?P<host>[^()]{1,255})\))?\s*$")


def looks_like_nvbandwidth_json(text: str) -> bool:
    """True for a JSON object whose top-level key is `nvbandwidth`."""
    head = text.lstrip()[:200]
    return head.startswith("{") and '"nvbandwidth"' in head


def read_nvbandwidth_json(text: str, name: str) -> Measurements:
    """Parse `nvbandwidth -j` output; InputError naming what is missing or malformed."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    run = document.get("nvbandwidth") if isinstance(document, dict) else None
    if not isinstance(run, dict):
        raise InputError(f"{name}: a JSON object without an `nvbandwidth` key: not nvbandwidth -j output")
    cases = run.get("testcases")
    if not isinstance(cases, list):
        raise InputError(f"{name}: nvbandwidth JSON without a `testcases` list")
    tables = NvbandwidthTables()
    for position, case in enumerate(cases):
        if not isinstance(case, dict):
            raise InputError(f"{name}: testcases[{position}] is not an object")
        _case(case, position, name, tables)
    if not tables.tables and not tables.notes:
        raise InputError(f"{name}: nvbandwidth JSON with no test in it")
    measurements = tables.measurements(name)
    return Measurements(source=measurements.source, peer_copies=measurements.peer_copies,
                        host_copies=measurements.host_copies, notes=measurements.notes, identity=_identity(run))


def _case(case: dict[str, Any], position: int, name: str, tables: NvbandwidthTables) -> None:
    test = str(case.get("name", f"testcases[{position}]"))
    status = str(case.get("status", ""))
    matrix = case.get("bandwidth_matrix")
    if not isinstance(matrix, list):
        why = "waived (nvbandwidth cannot run it on these GPUs, e.g. without peer access)" if status == "Waived" else \
            f"has no matrix (status {status or 'not given'})"
        tables.notes.append(f"{test} {why}: no figures")
        return
    title = nvbandwidth_title(str(case.get("bandwidth_description", "")))
    if title is None:  # a GPU's copy within its own memory (`memcpy local GPU(column)`): no pair, no link
        tables.notes.append(f"{test}: not a copy between two devices "
                            f"({str(case.get('bandwidth_description'))[:60]!r}), skipped")
        return
    table = Table(columns=[])
    for row_id, row in enumerate(matrix):
        if not isinstance(row, list):
            raise InputError(f"{name}: testcases[{position}] ({test}): row {row_id} is not a list")
        cells: list[float | None] = []
        for cell in row:
            word = str(cell).strip()
            cells.append(None if word == "N/A" else non_negative_number(word, f"{name}: {test} row {row_id}:"))
        table.rows.append((row_id, cells))
    width = max((len(cells) for _, cells in table.rows), default=0)
    if any(len(cells) != width for _, cells in table.rows):
        raise InputError(f"{name}: testcases[{position}] ({test}): rows of different lengths")
    table.columns = list(range(width))
    tables.add(test, title, table)


def _identity(run: dict[str, Any]) -> MeasuredOn:
    devices = run.get("GPU Device list")
    found = [match for entry in devices if isinstance(entry, str) and (match := _DEVICE.match(entry.strip()))] \
        if isinstance(devices, list) else []
    names = {match.group("name") for match in found}
    hosts = tuple(dict.fromkeys(match.group("host") for match in found if match.group("host")))
    version = run.get("git_version")
    return MeasuredOn(
        gpu_model=(names.pop() if len(names) == 1 else " / ".join(sorted(names))) if names else None,
        gpu_count=len(found) or None, hosts=hosts, pci_bus_ids=tuple(match.group("bus") for match in found),
        tool="nvbandwidth", tool_version=str(version) if version is not None else None)
