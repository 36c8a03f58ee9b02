"""The checked layout as a `linkscope check` command and JSON, and the checker's suggestion as text and form."""

from __future__ import annotations

import dataclasses
import shlex

from rich.text import Text

from linkscope.topo.checks.report import CheckReport
from linkscope.topo.checks.suggest import Suggestion
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.model.snapshot import Snapshot
from linkscope.tui.services import LayoutForm


def export_command(snapshot: Snapshot, form: LayoutForm, report: CheckReport) -> tuple[str, str]:
    """(`linkscope check ...` command line, JSON: the source, the command and the report as `check --json` has it)."""
    args = ["linkscope", "check"]
    if snapshot.source and snapshot.source != "probe":
        args.append(snapshot.source)
    args += form.cli_args()
    command = shlex.join(args)
    document = {"source": snapshot.source, "command": command, **report.to_json()}
    return command, json_text(document)


def suggestion_text(suggestion: Suggestion | None) -> Text:
    """One or two lines: the suggested flags and environment, the predicted speedup, the key to apply it."""
    if suggestion is None:
        return Text("No better layout found for this machine.")
    text = Text("Suggested: ", style="bold")
    env = " ".join(f"{name}={value}" for name, value in suggestion.env)
    text.append(" ".join(part for part in (env, " ".join(suggestion.flags)) if part) or "a different layout")
    text.append(f"  predicted {suggestion.speedup:.2f}x faster communication per step", style="bold")
    if suggestion.needs and any(flag.startswith(("--order", "--mesh")) for flag in suggestion.flags):
        text.append(f"  (started by {suggestion.needs})")
    text.append("  (a: apply)")
    return text


def suggested_form(suggestion: Suggestion | None, form: LayoutForm) -> LayoutForm | None:
    """`form` with the suggestion's order, distribution and device order; None without a suggestion."""
    if suggestion is None:
        return None
    return dataclasses.replace(
        form,
        order=suggestion.order,
        distribution=suggestion.distribution,
        visible_devices=suggestion.visible_devices,
    )
