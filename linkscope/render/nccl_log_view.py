"""Text rendering of `linkscope nccl-log`: version, communicators, ranks per host, transports, findings.

Every string from the log (host names, details, warning texts) goes through `printable` and is
printed as plain Text, never as markup.
"""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from linkscope.render.console import table_console
from linkscope.topo.common.limits import MAX_NCCL_LOG_HOST_ROWS
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import counted
from linkscope.topo.formats.nccl_log_model import NcclLog
from linkscope.topo.nccl.checks import NcclFinding, implied_hosts, same_host
from linkscope.topo.nccl.placement import NcclPlacement

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def print_report(log: NcclLog, findings: tuple[NcclFinding, ...], placement: NcclPlacement | None) -> None:
    """Print the summary of one log."""
    console = table_console()
    skipped = f", {log.skipped_count} unreadable skipped" if log.skipped_count else ""
    skipped += f", {log.edges_dropped} connections past the {len(log.edges)} kept" if log.edges_dropped else ""
    console.print(Text(f"{printable(log.name)}: NCCL {printable(log.version or 'version not shown')}, "
                       f"{log.nccl_lines} NCCL lines of {log.lines}{skipped}", style="bold"))
    collnet_failed = any("Cannot initialize CollNet" in warning.text for warning in log.warnings)
    for comm in log.communicators:
        size = f"{comm.nranks} ranks" if comm.nranks is not None else "size not shown"
        nodes = f" on {counted(comm.nnodes, 'node')}" if comm.nnodes is not None else ""
        coll, collnet, nvls = comm.channels
        counts = "".join(f", {count} {name} channels" for name, count in (("coll", coll), ("CollNet", collnet), ("NVLS", nvls))
                         if count is not None)
        if collnet and collnet_failed:
            counts += " (CollNet then failed to initialise: NCCL used the point-to-point network)"
        console.print(Text(f"communicator {printable(comm.key)}: {size}{nodes}, {len(comm.rings)} ring orders{counts}"))
        for channel, order in comm.rings[:RINGS_SHOWN]:
            console.print(Text(f"  ring {channel:02d}: {' '.join(str(rank) for rank in order[:64])}"
                               f"{' ...' if len(order) > 64 else ''}"))
        if len(comm.rings) > RINGS_SHOWN:
            console.print(Text(f"  ... {len(comm.rings) - RINGS_SHOWN} more ring order(s) (--json lists every one)"))
    _print_hosts(console, log)
    _print_transports(console, log)
    if placement is not None:
        _print_placement(console, placement)
    if log.env:
        console.print(Text("set by the environment: " + ", ".join(f"{printable(name)}={printable(value)}"
                                                                  for name, value in log.env)))
    for error in log.errors[:10]:
        console.print(Text(f"error trace (line {error.line}, {error.count}x): {printable(error.text)}"))
    if not findings and not log.edges:
        console.print(Text("NOTHING JUDGED: the log has no connection lines (NCCL prints them once the communicator "
                           "connects; NCCL_DEBUG=INFO)", style="bold yellow"))
    elif not findings:
        console.print(Text(f"no findings ({len(log.edges)} connection(s) judged)"))
    for finding in findings:
        line = Text(f"{finding.severity:<8}", style=_SEVERITY_STYLE.get(finding.severity, ""))
        line.append(f" {finding.code}: {printable(finding.message)}")
        console.print(line)


RINGS_SHOWN = 2
"""Ring orders printed per communicator (each can be a line of hundreds of ranks)."""


def _print_hosts(console: Console, log: NcclLog) -> None:
    if not log.ranks:
        return
    per_host: dict[str, list[int]] = {}
    for rank in log.ranks:
        per_host.setdefault(rank.host or "?", []).append(rank.rank)
    table = Table(title="ranks per host", box=box.SIMPLE_HEAD)
    table.add_column("host")
    table.add_column("ranks", justify="right")
    table.add_column("rank numbers")
    for host, ranks in sorted(per_host.items())[:MAX_NCCL_LOG_HOST_ROWS]:
        numbers = sorted(set(ranks))
        table.add_row(Text(printable(host)), str(len(numbers)),
                      Text(" ".join(str(rank) for rank in numbers[:32]) + (" ..." if len(numbers) > 32 else "")))
    if len(per_host) > MAX_NCCL_LOG_HOST_ROWS:
        table.add_row(Text(f"... {len(per_host) - MAX_NCCL_LOG_HOST_ROWS} more hosts"), "", "")
    console.print(table)


def _print_transports(console: Console, log: NcclLog) -> None:
    if not log.edges:
        console.print(Text("no connection lines (NCCL prints them once the communicator connects)"))
        return
    hosts = implied_hosts(log)
    counts: Counter[tuple[str, str, str]] = Counter()
    for edge in log.edges:
        where = {True: "same host", False: "across hosts", None: "?"}[same_host(edge, hosts)]
        counts[(edge.transport, _without_nic(edge.detail), where)] += 1
    table = Table(title="connections by transport", box=box.SIMPLE_HEAD)
    for column in ("transport", "detail", "between", "connections"):
        table.add_column(column, justify="right" if column == "connections" else "left")
    for (transport, detail, where), count in sorted(counts.items()):
        table.add_row(transport, Text(printable(detail)), where, str(count))
    console.print(table)


def _print_placement(console: Console, placement: NcclPlacement) -> None:
    if not placement.edges:
        console.print(Text("no connection between two GPUs of one host could be placed on the snapshot "
                           "(hosts, bus ids or device numbers do not match)"))
    for note in placement.notes:
        console.print(Text(f"note: {note}"))
    if not placement.edges:
        return
    counts: Counter[tuple[str, str]] = Counter((edge.transport, edge.link) for edge in placement.edges)
    table = Table(title="links ridden inside a host", box=box.SIMPLE_HEAD)
    for column in ("transport", "link", "connections"):
        table.add_column(column, justify="right" if column == "connections" else "left")
    for (transport, link), count in sorted(counts.items()):
        table.add_row(transport, link, str(count))
    console.print(table)


def _without_nic(detail: str) -> str:
    """`NET/IB/3(2)/GDRDMA` -> `NET/IB/*/GDRDMA`: one row per kind of path, not per NIC."""
    parts = detail.split("/")
    if parts[0] in ("NET", "COLLNET") and len(parts) > 2:
        parts[2] = "*"
    return "/".join(parts)
