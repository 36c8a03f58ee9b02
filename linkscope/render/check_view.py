"""The console view of `linkscope check`: layout, per-dimension groups and costs, findings, suggestion."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from linkscope.render import SEVERITY_STYLES
from linkscope.topo.checks.report import CheckReport, LayoutFinding
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.text import printable
from linkscope.topo.common.units import format_seconds
from linkscope.topo.layout.spec import GROUP_NAMES

SHOWN_GROUPS = 3
"""Groups listed per dimension before `...`."""


def _group_text(groups: list[list[int]]) -> str:
    shown = []
    for group in groups[:SHOWN_GROUPS]:
        ranks = ",".join(map(str, group[:8])) + (",..." if len(group) > 8 else "")
        shown.append(f"[{ranks}]")
    return " ".join(shown) + (" ..." if len(groups) > SHOWN_GROUPS else "")


def groups_table(report: CheckReport) -> Table:
    """One row per dimension larger than 1: groups, the link its slowest group rides, time per step."""
    table = Table(title="Process groups", title_justify="left", show_edge=False)
    for column in ("dim", "groups", "size", "first groups", "slowest link", "comm / step"):
        table.add_column(column, overflow="fold")  # wrapped, never cut with an ellipsis, in a terminal or a file
    costs = {cost.dim: cost for cost in report.costs}
    layout = report.layout
    roles = {dim.name: dim.role for dim in layout.mesh} if layout is not None else {}
    for dim, groups in report.groups.items():
        size = len(groups[0]) if groups else 0
        if size < 2 or (dim in ("etp", "edp") and not (layout is not None and layout.has_expert_layout)):
            continue
        cost = costs.get(dim)
        name = GROUP_NAMES.get(dim) or f"mesh dimension, role {roles.get(dim, '?')}"
        table.add_row(
            Text(f"{dim} ({name})"),
            str(len(groups)),
            str(size),
            Text(_group_text(groups)),
            Text(cost.link_label if cost else "-"),
            format_seconds(cost.time_s if cost else None),
        )
    return table


def costs_table(report: CheckReport) -> Table:
    """What each dimension sends per step, by collective, on its slowest group."""
    table = Table(title="Predicted communication per step (slowest group of each dimension)", title_justify="left",
                  show_edge=False)
    for column in ("dim", "collective", "bytes/call", "calls/step", "algo", "time/call", "time/step"):
        table.add_column(column, justify="right" if column.startswith(("bytes", "calls", "time")) else "left",
                         overflow="fold")
    for cost in report.costs:
        for op in cost.ops:
            table.add_row(cost.dim, op.op, format_size_bytes(op.size_bytes), str(op.calls_per_step), op.algo,
                          format_seconds(op.time_per_call_s), format_seconds(op.time_per_step_s))
    return table


def finding_view(finding: LayoutFinding) -> RenderableType:
    """One finding: severity and code, the message, cost against the best alternative, the fix."""
    head = Text()
    head.append(f"{finding.severity.upper():8}", style=SEVERITY_STYLES.get(finding.severity, ""))
    head.append(f"{finding.code}", style="bold")
    if finding.dim:
        head.append(f"  [{finding.dim}]")
    lines: list[RenderableType] = [head, Text("  " + printable(finding.message))]
    if finding.cost_s is not None:
        cost = f"  cost: {format_seconds(finding.cost_s)} per step"
        if finding.best_cost_s is not None:
            cost += f", best alternative {format_seconds(finding.best_cost_s)}"
        lines.append(Text(cost, style="dim"))
    if finding.fix:
        lines.append(Text("  fix: " + finding.fix, style="green"))
    return Group(*lines)


def check_view(report: CheckReport) -> RenderableType:
    """The whole `check` output."""
    parts: list[RenderableType] = []
    if report.layout is not None:
        layout = report.layout
        shown = [(dim, size) for dim, size in layout.sizes if size > 1 and (dim != "etp" or layout.has_expert_layout)]
        if layout.has_expert_layout:
            shown.append(("edp", layout.size("edp")))
        if layout.vpp > 1:
            shown.append(("vpp", layout.vpp))
        sizes = " ".join(f"{dim}={size}" for dim, size in shown) or "one rank per group"
        form = "mesh" if layout.mesh else "order"
        roles = f" (roles {', '.join(f'{dim.name}={dim.role}' for dim in layout.mesh)})" if layout.mesh else ""
        parts.append(Text(f"Layout: {sizes}, world size {layout.world_size}, {form} {layout.order_string}{roles}"))
    if report.placement_description:
        parts.append(Text(f"Placement: {report.placement_description}"))
    for note in report.assumptions:
        parts.append(Text(f"Assumed: {note}", style="dim"))
    parts += [Text(""), groups_table(report)]
    if report.costs:
        parts += [Text(""), costs_table(report),
                  Text(f"Communication per step (no overlap): {format_seconds(report.step_time_s)}", style="bold")]
    parts.append(Text(""))
    if report.findings:
        parts.append(Text(f"Findings ({len(report.findings)})", style="bold"))
        parts += [finding_view(finding) for finding in report.findings]
    else:
        parts.append(Text("No findings: every group rides the best links this machine offers for it.", style="green"))
    if report.suggestion is not None:
        suggestion = report.suggestion
        parts.append(Text(""))
        if suggestion.one_flag is not None:
            simple = suggestion.one_flag
            parts.append(Text(f"Suggestion, one flag: {simple.speedup:.2f}x less communication per step "
                              f"({format_seconds(simple.current_time_s)} -> {format_seconds(simple.time_s)})",
                              style="bold green"))
            parts.extend(Text(f"  {flag}") for flag in simple.flags)
        heading = "Or, changing more" if suggestion.one_flag is not None else "Suggestion"
        parts.append(Text(f"{heading}: {suggestion.speedup:.2f}x less communication per step "
                          f"({format_seconds(suggestion.current_time_s)} -> {format_seconds(suggestion.time_s)})",
                          style="bold green"))
        for name, value in suggestion.env:
            parts.append(Text(f"  export {name}={value}"))
        for flag in suggestion.flags:
            parts.append(Text(f"  {flag}"))
        if suggestion.needs and any(flag.startswith(("--order", "--mesh")) for flag in suggestion.flags):
            parts.append(Text(f"  started by: {suggestion.needs}"))
    return Group(*parts)
