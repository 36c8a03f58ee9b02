"""The findings list of the Ranks tab: severity, code, dimension and message per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.common.limits import MAX_FINDING_ROWS


class FindingsTable(DataTable[Text]):
    """One row per finding; Enter or a click chooses it (the parent draws its group)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"findings--error", "findings--warning", "findings--info"}

    class FindingChosen(Message):
        """A finding row was selected."""

        def __init__(self, finding: LayoutFinding) -> None:
            self.finding = finding
            super().__init__()

    class FindingHighlighted(Message):
        """The cursor moved onto a finding row."""

        def __init__(self, finding: LayoutFinding) -> None:
            self.finding = finding
            super().__init__()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._findings: Sequence[LayoutFinding] = ()

    def on_mount(self) -> None:
        self.add_columns("sev", "code", "dim", "message")

    def show(self, findings: Sequence[LayoutFinding], checked: bool = True) -> None:
        """Replace the rows with `findings` (the first :data:`MAX_FINDING_ROWS`); `checked` False leaves it empty."""
        self._findings = findings
        self.clear()
        if not checked:
            return
        if not findings:
            self.add_row(Text("ok"), Text("-"), Text("-"), Text("no findings: every group sits on the links it needs"))
            return
        for finding in findings[:MAX_FINDING_ROWS]:
            severity = str(finding.severity)
            style = (
                self.get_component_rich_style(f"findings--{severity}", partial=True, default=None)
                if severity
                in (
                    "error",
                    "warning",
                    "info",
                )
                else None
            )
            self.add_row(
                Text(severity, style=style or ""),
                Text(str(finding.code)),
                Text(str(finding.dim or "-")),
                Text(str(finding.message)),
            )
        if len(findings) > MAX_FINDING_ROWS:
            self.add_row(Text("..."), Text(""), Text(""), Text(f"{len(findings) - MAX_FINDING_ROWS} more findings not listed"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Turn the row selection into a message carrying the finding."""
        event.stop()
        if 0 <= event.cursor_row < min(len(self._findings), MAX_FINDING_ROWS):
            self.post_message(self.FindingChosen(self._findings[event.cursor_row]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Tell the parent which finding the cursor is on (its detail shows it whole)."""
        event.stop()
        if 0 <= event.cursor_row < min(len(self._findings), MAX_FINDING_ROWS):
            self.post_message(self.FindingHighlighted(self._findings[event.cursor_row]))
