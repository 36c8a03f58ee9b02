"""The `linkscope plan` worksheet as rich tables or markdown."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from linkscope.render.check_view import finding_view
from linkscope.topo.checks.plan import Plan
from linkscope.topo.common.sizes import format_size_bytes
from linkscope.topo.common.units import format_seconds
from linkscope.topo.layout.spec import GROUP_NAMES

RISK_STYLES = {"ok": "green", "medium": "yellow", "high": "bold red"}


def _title(plan: Plan) -> str:
    return (f"Plan for {plan.gpus} GPUs ({plan.nodes} node(s)), model {plan.model.name}: "
            f"{plan.model.params / 1e9:.3g}B params, hidden {plan.model.hidden}, {plan.model.layers} layers, "
            f"seq {plan.model.seq}, micro-batch {plan.model.micro_batch}, global batch {plan.model.global_batch}")


def _summary_lines(plan: Plan) -> list[str]:
    return [
        (f"Pipeline bubble (p-1)/(v*m+p-1) = {plan.bubble:.1%} with m = {plan.microbatches} micro-batches, "
         f"v = {plan.vpp} virtual stages" if plan.vpp > 1 else
         f"Pipeline bubble (p-1)/(m+p-1) = {plan.bubble:.1%} with m = {plan.microbatches} micro-batches"),
        f"Memory per GPU: ~{format_size_bytes(plan.memory_per_gpu_bytes)} of {format_size_bytes(plan.memory_total_bytes)}",
        f"Communication per step (no overlap): {format_seconds(plan.report.step_time_s)}",
    ]


def plan_view(plan: Plan) -> RenderableType:
    """Degrees, communication table, bubble, memory and the check's findings."""
    degrees = Table(title="Parallelism", title_justify="left", show_edge=False)
    for column in ("dim", "degree", "placement", "reason"):
        degrees.add_column(column)
    for degree in plan.degrees:
        degrees.add_row(f"{degree.dim} ({GROUP_NAMES[degree.dim]})", str(degree.size), Text(degree.placement),
                        Text(degree.reason))
    traffic = Table(title="Communication per step", title_justify="left", show_edge=False)
    for column in ("dim", "collective", "calls/step", "bytes/step", "wants", "gets", "time/step", "risk"):
        traffic.add_column(column, justify="right" if column in ("calls/step", "bytes/step", "time/step") else "left")
    for row in plan.traffic:
        traffic.add_row(row.dim, row.op, str(row.calls_per_step), format_size_bytes(row.bytes_per_step), row.preferred,
                        Text(row.actual), format_seconds(row.time_per_step_s), Text(row.risk, style=RISK_STYLES[row.risk]))
    parts: list[RenderableType] = [Text(_title(plan), style="bold")]
    parts += [Text(f"Assumed: {note}", style="dim") for note in plan.assumptions + plan.report.assumptions]
    parts += [Text(""), degrees, Text(""), traffic, Text("")]
    parts += [Text(line) for line in _summary_lines(plan)]
    if plan.report.findings:
        parts.append(Text(""))
        parts += [finding_view(finding) for finding in plan.report.findings]
    return Group(*parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def plan_markdown(plan: Plan) -> str:
    """The worksheet as GitHub markdown."""
    lines = [f"## {_cell(_title(plan))}", ""]
    lines += [f"_Assumed: {_cell(note)}_" for note in plan.assumptions + plan.report.assumptions]
    lines += ["", "| dim | degree | placement | reason |", "|---|---:|---|---|"]
    lines += [f"| {d.dim} | {d.size} | {_cell(d.placement)} | {_cell(d.reason)} |" for d in plan.degrees]
    lines += ["", "| dim | collective | calls/step | bytes/step | wants | gets | time/step | risk |",
              "|---|---|---:|---:|---|---|---:|---|"]
    lines += [
        f"| {r.dim} | {r.op} | {r.calls_per_step} | {format_size_bytes(r.bytes_per_step)} | {r.preferred} | "
        f"{_cell(r.actual)} | {format_seconds(r.time_per_step_s)} | {r.risk} |"
        for r in plan.traffic
    ]
    lines += [""] + [f"- {line}" for line in _summary_lines(plan)]
    for finding in plan.report.findings:
        head = f"- **{finding.severity} {finding.code}** ({finding.dim})"
        lines.append(f"{head}: {_cell(finding.message)} Fix: {_cell(finding.fix)}")
    return "\n".join(lines) + "\n"


def plan_json(plan: Plan) -> dict[str, Any]:
    """The worksheet as one JSON object."""
    return {
        "gpus": plan.gpus,
        "nodes": plan.nodes,
        "model": {"name": plan.model.name, "params": plan.model.params, "hidden": plan.model.hidden,
                  "layers": plan.model.layers, "seq": plan.model.seq, "micro_batch": plan.model.micro_batch,
                  "global_batch": plan.model.global_batch},
        "degrees": [{"dim": d.dim, "size": d.size, "placement": d.placement, "reason": d.reason} for d in plan.degrees],
        "traffic": [
            {"dim": r.dim, "op": r.op, "calls_per_step": r.calls_per_step, "bytes_per_step": r.bytes_per_step,
             "preferred": r.preferred, "actual": r.actual, "time_per_step_s": r.time_per_step_s, "risk": r.risk}
            for r in plan.traffic
        ],
        "microbatches": plan.microbatches,
        "vpp": plan.vpp,
        "bubble": plan.bubble,
        "memory_per_gpu_bytes": plan.memory_per_gpu_bytes,
        "memory_total_bytes": plan.memory_total_bytes,
        "step_time_s": plan.report.step_time_s,
        "findings": [finding.to_json() for finding in plan.report.findings],
        "assumptions": list(plan.assumptions + plan.report.assumptions),
    }
