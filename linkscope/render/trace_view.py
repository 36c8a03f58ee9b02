"""Text rendering of a trace report: who the traces are, steps, the slowest collectives, the straggler, findings."""

from __future__ import annotations

from collections import defaultdict
from statistics import median

from rich import box
from rich.table import Table
from rich.text import Text

from linkscope.render.console import table_console
from linkscope.topo.common.limits import MAX_STEP_ROWS
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import counted, format_share
from linkscope.topo.trace.report import CollectiveRow, StepRow, TraceReport

TOP_COLLECTIVES = 8
WORST_STEPS = 5
"""Longest steps a summarised steps table names."""


def print_trace_report(report: TraceReport, all_steps: bool = False) -> None:
    """Print the report for people; every string from a trace goes through `printable`. More steps than
    MAX_STEP_ROWS are summarised (the first, the worst, percentiles) unless `all_steps`. Priced on a machine, the
    report says where the job's ranks were placed, in one line."""
    console = table_console()
    priced = report.placed is not None
    for trace in report.traces:
        who = f"rank {trace.rank} of {trace.world_size}" if trace.rank is not None else "rank unknown"
        details = ", ".join(part for part in (trace.backend, f"NCCL {trace.nccl_version}" if trace.nccl_version else None,
                                              f"host {trace.host}" if trace.host else None) if part)
        console.print(Text(printable(f"{trace.name}: {who}" + (f" ({details})" if details else "") +
                                     f", {counted(len(trace.collectives), 'collective call')}"
                                     + (" (known from their CPU launches only: no NCCL kernel in the trace)"
                                        if trace.collectives and all(call.launch_only for call in trace.collectives) else "")
                                     + (" (a job of one rank has no peer to talk to)" if trace.world_size == 1 else "")
                                     + f", {counted(len(trace.steps), 'step')}")))
    if len(report.hosts) > 1:
        console.print(Text("note: traces from several hosts: waits across hosts are as exact as the hosts' clocks"))
    if report.placed is not None:
        console.print(Text(printable(f"placed: {report.placed.line}")))
    if report.steps:
        console.print(_steps_table(report, all_steps))
    rows = report.slowest(TOP_COLLECTIVES) if priced else []
    if rows:
        console.print(_collectives_table(rows, priced=True))
    else:
        if priced and report.collectives:
            console.print(Text(f"no collective judged against its links: {report.why_unpriced()}"))
        if report.collectives:
            console.print(_collectives_table(_longest(report.collectives), priced=False))
    if (assumed := report.assumed_groups_note()) is not None:
        console.print(Text(f"note: {assumed}"))
    if report.straggler is not None:
        s = report.straggler
        where = ", ".join(part for part in (f"GPU {s.device}" if s.device is not None else "", s.host or "") if part)
        console.print(Text(printable(
            f"last to arrive: rank {s.rank}{' (' + where + ')' if where else ''}, last at {s.last_arrivals} of "
            f"{s.matched_calls} matched calls; the earliest rank waited {s.others_waited_us / 1e3:.1f} ms for it")))
    if (verdict := report.verdict_line()) is not None:
        console.print(Text(verdict, style="" if verdict == "No findings." else "bold yellow"))
    for finding in report.findings:
        console.print(Text(f"{finding.severity}: {finding.code}: ", style="bold") + Text(printable(finding.message)))


_StepCells = tuple[str, str, float, float, float, float, float, float, float]
"""One step's row: step, ranks, then time, compute, comm, exposed comm, GPU idle (us), exposed share and idle share."""


def _steps_table(report: TraceReport, all_steps: bool) -> Table:
    by_step: dict[int, list[StepRow]] = defaultdict(list)
    for row in report.steps:
        by_step[row.step].append(row)
    steps = [_step_cells(step, rows) for step, rows in sorted(by_step.items())]
    shown: list[_StepCells] = steps
    caption = ("compute: GPU kernels only; memory copies and memsets are kept apart, as Holistic Trace Analysis "
               "keeps them. GPU idle: neither compute nor exposed communication (launch gaps, CPU work, data loading, "
               "memory copies)")
    title = "steps (ms; median over ranks)"
    if not all_steps and len(steps) > MAX_STEP_ROWS:
        shown = _step_summary(steps)
        title = f"{len(steps)} steps (ms; median over ranks): the first, the {WORST_STEPS} longest, and percentiles"
        caption = f"{caption}; --all-steps lists every step"
    table = Table(title=title, box=box.SIMPLE_HEAD, caption=caption)
    for column in ("step", "ranks", "time", "compute", "comm", "exposed comm", "GPU idle", "exposed share", "idle share"):
        table.add_column(column, justify="right")
    for step, ranks, *times_us, exposed_share, idle_share in shown:
        table.add_row(step, ranks, *(f"{value / 1e3:.2f}" for value in times_us), format_share(exposed_share),
                      format_share(idle_share))
    return table


def _step_cells(step: int, rows: list[StepRow]) -> _StepCells:
    return (str(step), str(len(rows)), median(r.time_us for r in rows), median(r.compute_us for r in rows),
            median(r.comm_us for r in rows), median(r.exposed_comm_us for r in rows),
            median(r.idle_us for r in rows), median(r.exposed_share for r in rows), median(r.idle_share for r in rows))


def _step_summary(steps: list[_StepCells]) -> list[_StepCells]:
    """The first step (often warm-up), the longest ones, then each column's percentiles over all steps."""
    longest = sorted(steps[1:], key=lambda cells: -cells[2])[:WORST_STEPS]
    rows = [steps[0], *sorted(longest, key=lambda cells: int(cells[0]))]
    for label, share in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)):
        columns = [sorted(cells[index] for cells in steps) for index in range(2, 9)]
        picked = [column[min(len(column) - 1, int(share * (len(column) - 1) + 0.5))] for column in columns]
        rows.append((label, "", *picked))  # type: ignore[arg-type]
    return rows


def _longest(rows: tuple[CollectiveRow, ...]) -> list[CollectiveRow]:
    return sorted(rows, key=lambda row: -row.call.duration_us)[:TOP_COLLECTIVES]


def _collectives_table(rows: list[CollectiveRow], priced: bool) -> Table:
    title = "collectives furthest below their links" if priced else "longest collective calls"
    table = Table(title=title, box=box.SIMPLE_HEAD)
    columns = ["rank", "step", "op", "size", "group size", "time (ms)", "busbw (GB/s)"]
    if priced:
        columns += ["link", "expected (ms)", "speed vs expected"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("op", "link") else "right")
    for row in rows:
        call = row.call
        cells = [str(row.rank) if row.rank is not None else "?", str(call.step) if call.step is not None else "-", call.op,
                 format_size_bytes(call.size_bytes) if call.size_bytes is not None else "?",
                 str(call.group_size) if call.group_size else "?", f"{call.duration_us / 1e3:.3f}",
                 f"{row.busbw_gbps:.2f}" if row.busbw_gbps is not None else "-"]
        if priced:
            expected, ratio = row.expected, row.ratio
            cells += [printable(expected.link) if expected else "-", f"{expected.time_us / 1e3:.3f}" if expected else "-",
                      format_share(ratio) if ratio is not None else "-"]
        table.add_row(*(Text(cell) for cell in cells))
    return table
