"""The checked layout as a `linkscope check` command and JSON, and the checker's suggestion as text/form."""

from __future__ import annotations

import dataclasses
import json
import shlex

from rich.text import Text

from topo.model import Snapshot
from tui.services import LayoutForm, ReportLike


def export_command(snapshot: Snapshot, form: LayoutForm, report: ReportLike) -> tuple[str, str]:
    """(`linkscope check ...` command line, JSON document with the form, groups, placement and findings)."""
    args = ["linkscope", "check"]
    if snapshot.source and snapshot.source != "probe":
        args.append(snapshot.source)
    args += form.cli_args()
    document = {
        "source": snapshot.source,
        "layout": {
            "sizes": dict(form.sizes),
            "order": form.order,
            "nodes": form.nodes,
            "distribution": form.distribution,
            "visible_devices": list(form.visible_devices) if form.visible_devices is not None else None,
            "model": form.model,
        },
        "groups": report.groups,
        "placement": [list(spot) for spot in report.placement],
        "findings": [
            {
                "code": finding.code,
                "severity": finding.severity,
                "dim": finding.dim,
                "ranks": list(finding.ranks),
                "message": finding.message,
            }
            for finding in report.findings
        ],
    }
    return shlex.join(args), json.dumps(document, indent=2)


def suggestion_text(suggestion: object | None) -> Text:
    """One or two lines: the suggested flags and environment, the predicted speedup, the key to apply it."""
    if suggestion is None:
        return Text("No better layout found for this machine.")
    text = Text("Suggested: ", style="bold")
    flags = " ".join(getattr(suggestion, "flags", ()) or ())
    env = " ".join(f"{name}={value}" for name, value in getattr(suggestion, "env", ()) or ())
    text.append(" ".join(part for part in (env, flags) if part) or "a different layout")
    speedup = getattr(suggestion, "speedup", None)
    if isinstance(speedup, float):
        text.append(f"  predicted {speedup:.2f}x faster communication per step", style="bold")
    text.append("  (a: apply)")
    return text


def suggested_form(suggestion: object | None, form: LayoutForm) -> LayoutForm | None:
    """`form` with the suggestion's order, distribution and device order; None without a suggestion."""
    if suggestion is None:
        return None
    order = getattr(suggestion, "order", None) or form.order
    distribution = getattr(suggestion, "distribution", None) or form.distribution
    devices = getattr(suggestion, "visible_devices", None)
    return dataclasses.replace(
        form,
        order=str(order),
        distribution=str(distribution),
        visible_devices=tuple(devices) if devices is not None else None,
    )
