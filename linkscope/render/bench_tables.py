"""The tables `linkscope bench` prints: collective sweeps with their expected figures, peer-copy matrices and
host copies, the communicator-reuse comparison and the overlap experiment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from linkscope.topo.common.units import format_gbps

if TYPE_CHECKING:
    from linkscope.probes.bench.results import Straggler, SweepRow
    from linkscope.topo.cost.expect import Expected


def verdict_text(verdict: str | None) -> Any:
    from rich.text import Text

    from linkscope.render.expected import VERDICT_STYLES

    return Text(verdict or "-", style=VERDICT_STYLES.get(verdict or "", ""))


def print_collectives(rows: Sequence[SweepRow], setup_ms: Sequence[tuple[str, float]], slow_groups: Sequence[Straggler],
                      notes: Sequence[str], expected: Sequence[Expected | None], against: str | None) -> None:
    """`bench collectives`: a row per (group, op, size), its expected figures against `against`, and stragglers."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import table_console
    from linkscope.render.expected import add_expected_columns, expected_cells, print_verdict_summary
    from linkscope.topo.common.sizes import format_size_bytes

    table = Table(title="collectives: time averaged over ranks, GB/s, busbw by nccl-tests' factors", box=box.SIMPLE_HEAD)
    for column in ("op", "size", "dtype", "group", "time us", "algbw", "busbw", "wrong"):
        table.add_column(column, justify="right" if column not in ("op", "dtype", "group") else "left",
                         min_width=14 if column == "op" else None, overflow="fold")
    if against is not None:
        add_expected_columns(table)
    for row, each in zip(rows, expected, strict=True):
        wrong = "-" if row.wrong is None else str(row.wrong)
        table.add_row(row.op, format_size_bytes(row.size_bytes), row.dtype, row.group, f"{row.time_us:.1f}",
                      f"{row.algbw_gbps:.3f}", f"{row.busbw_gbps:.3f}", wrong,
                      *(expected_cells(each) if against is not None else ()),
                      style="bold red" if row.wrong else None)
    console = table_console()
    console.print(table)
    if against is not None:
        print_verdict_summary(console, expected, against)
    elif rows:  # no machine to judge against (gloo, or no snapshot): never a clean verdict
        console.print(Text(f"NOTHING JUDGED: {len(rows)} row(s), no GPU machine to judge them against (see the notes)",
                           style="bold yellow"))
    groups = {row.group: list(row.ranks) for row in rows if row.group != "world"}
    if groups:
        console.print("groups: " + ", ".join(f"{label} {ranks}" for label, ranks in groups.items()), highlight=False)
    if setup_ms:
        console.print("process-group set-up: " + ", ".join(f"{label} {ms:.1f} ms" for label, ms in setup_ms),
                      highlight=False)
    for slow in slow_groups:
        console.print(f"straggler: {slow.op} {format_size_bytes(slow.size_bytes)} in {slow.dim}: {slow.group} "
                      f"{format_gbps(slow.busbw_gbps, '.3f')} busbw is {slow.ratio:.0%} of {slow.fastest_group} "
                      f"{slow.fastest_busbw_gbps:.3f}", highlight=False, markup=False)
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False)


def print_p2p(result: dict[str, Any], copies: Any, uni: Any, bi: Any, findings: Any, notes: list[str],
              asked: Sequence[Expected], against: str | None) -> None:
    """`bench p2p`: matrices, peer copies and host copies against their links' figures; how the GPUs were matched
    to `against` and what was judged (:func:`linkscope.render.expected.print_verdict_summary`), findings, notes."""
    from rich.table import Table
    from rich.text import Text

    from linkscope.probes.bench.p2p_report import matrix
    from linkscope.render.console import table_console
    from linkscope.render.expected import print_verdict_summary
    from linkscope.topo.common.sizes import format_size_bytes

    console = table_console()
    count = len(result["devices"])
    matrices = (("unidirectional GB/s", "unidir_gbps", "{:.1f}"), ("bidirectional GB/s", "bidir_gbps", "{:.1f}"),
                ("small-copy latency us", "latency_us", "{:.2f}"))
    for title, attribute, fmt in matrices if copies else ():  # one GPU, or --no-host alone: no pair to show
        table = Table(title=title)
        table.add_column("from\\to")
        for dst in range(count):
            table.add_column(str(dst), justify="right")
        values = matrix(count, {(c.src, c.dst): getattr(c, attribute) for c in copies})
        for src, row in enumerate(values):
            table.add_row(str(src), *("-" if v is None else fmt.format(v) for v in row))
        console.print(table)
    pairs = Table(title="peer copies (GB/s, us) against the expected link speed")
    for column in ("pair", "link", "uni", "expect", "ratio", "verdict", "bi", "ratio", "lat", "p2p", "data"):
        pairs.add_column(column, justify="left" if column in ("pair", "link", "data", "verdict") else "right", no_wrap=True)
    for copy, u, b, judged in zip(copies, uni, bi, asked, strict=False):  # `asked`: the pairs first, then host copies
        pairs.add_row(f"{copy.src}->{copy.dst}", Text(u.link_token or "?"), f"{copy.unidir_gbps:.1f}",
                      f"{u.expected.typical_gbps:.1f}" if u.expected else "-", f"{u.ratio:.2f}" if u.ratio else "-",
                      verdict_text(judged.verdict),
                      f"{copy.bidir_gbps:.1f}", f"{b.ratio:.2f}" if b.ratio else "-", f"{copy.latency_us:.2f}",
                      {True: "yes", False: "no", None: "?"}[copy.p2p_enabled],
                      Text("ok" if copy.verified else "CORRUPTED", style="" if copy.verified else "bold red"))
    if copies:
        console.print(pairs)
    if result["host"]:
        host = Table(title="host <-> GPU from pinned memory per NUMA node")
        for column in ("GPU", "dir", "NUMA node", "local", "GB/s", "vs local", "expect", "ratio", "verdict", "data"):
            host.add_column(column, justify="right" if column in ("GB/s", "vs local", "expect", "ratio") else "left")
        for row in result["host"]:
            expected = "-" if row["expected_gbps"] is None else f"{row['expected_gbps']:.1f}"
            penalty = "-" if row["vs_local"] is None else f"{row['vs_local']:.2f}"
            host.add_row(str(row["gpu"]), row["direction"], str(row["numa_node"]), "yes" if row["local"] else "no",
                         f"{row['gbps']:.1f}", penalty, expected, "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                         verdict_text(row["verdict"]),
                         Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(host)
    if result.get("pageable"):
        pageable = Table(title="host <-> GPU, pageable memory (not judged)")
        for column in ("GPU", "dir", "NUMA node", "GB/s", "PCIe expect", "ratio", "data"):
            pageable.add_column(column, justify="right" if column in ("GB/s", "PCIe expect", "ratio") else "left")
        for row in result["pageable"]:
            pageable.add_row(str(row["gpu"]), row["direction"], "-" if row["numa_node"] is None else str(row["numa_node"]),
                             f"{row['gbps']:.1f}", "-" if row["expected_gbps"] is None else f"{row['expected_gbps']:.1f}",
                             "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                             Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(pageable)
    if result.get("local_copies"):
        local = Table(title="copy within one GPU")
        for column in ("GPU", "size", "GB/s copied", "data"):
            local.add_column(column, justify="right" if column in ("size", "GB/s copied") else "left")
        for row in result["local_copies"]:
            local.add_row(str(row["gpu"]), format_size_bytes(row["size_bytes"]), f"{row['gbps']:.1f}",
                          Text("ok" if row["verified"] else "CORRUPTED", style="" if row["verified"] else "bold red"))
        console.print(local)
    for device in result["devices"]:
        console.print(Text(f"GPU {device['index']}: {device['name']} {device['pci_bus_id'] or ''}"))
    if asked:
        print_verdict_summary(console, asked, against or "no machine (see the notes)")
    for finding in findings:
        console.print(Text(f"{finding.severity}: {finding.message}", style="bold red" if finding.severity == "error" else "bold"))
    for note in notes:
        console.print(Text(f"note: {note}"))



def print_reuse(rows: list[dict[str, Any]], backend: str, world_size: int) -> None:
    """`bench collectives --reuse`: all_reduce per call on a reused group against a group created per call."""
    from rich import box
    from rich.table import Table

    from linkscope.render.console import table_console
    from linkscope.topo.common.sizes import format_size_bytes

    table = Table(title=f"all_reduce per call (us, slowest rank): reused group vs a new group per call, "
                  f"{backend} x{world_size}", box=box.SIMPLE_HEAD)
    for column in ("size", "reused", "new group per call", "group set-up", "slowdown"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(format_size_bytes(row["size_bytes"]), f"{row['reuse_us']:.1f}", f"{row['recreate_us']:.1f}",
                      f"{row['group_setup_us']:.1f}", f"{row['slowdown']:.1f}x" if row["slowdown"] else "-")
    table_console().print(table)


def print_step(spec: Any, summaries: list[Any], notes: list[str]) -> None:
    """`bench step`: per mode, step time, compute, communication, exposed communication and speedup."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from linkscope.render.console import table_console
    from linkscope.topo.common.sizes import format_size_bytes
    from linkscope.topo.common.units import format_share

    console = table_console()
    console.print(Text(f"{spec.layers} x Linear({spec.width}, {spec.width}): {spec.parameters:,} parameters, "
                       f"{format_size_bytes(spec.parameters * 4)} of float32 gradients per step; batch {spec.batch}; "
                       f"{spec.backend} x{spec.world_size}"))
    table = Table(title="per step (ms, medians; the step time is the slowest rank's)", box=box.SIMPLE_HEAD)
    for column in ("mode", "step", "10-90%", "compute", "comm", "exposed comm", "comm hidden", "speedup vs no-overlap"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for s in summaries:
        hidden = format_share(1 - s.exposed_comm_ms / s.comm_ms) if s.comm_ms > 0 else "-"
        table.add_row(s.label, f"{s.step_ms:.2f}", f"{s.step_p10_ms:.1f}-{s.step_p90_ms:.1f}", f"{s.compute_ms:.2f}",
                      f"{s.comm_ms:.2f}", f"{s.exposed_comm_ms:.2f}", hidden,
                      f"{s.speedup_vs_no_overlap:.2f}x" if s.speedup_vs_no_overlap else "-")
    console.print(table)
    for note in notes:
        console.print(Text(f"note: {note}"))
