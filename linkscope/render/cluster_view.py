"""The cluster part of `linkscope show` for a multi-host snapshot: one row per host (GPUs, NVLinks
up, narrowest PCIe link, NICs carrying GPU traffic, driver, NVLink domain) and the cross-host
findings of :mod:`topo.health.cluster` (the odd node out)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from linkscope.topo.health.cluster import host_summaries
from linkscope.topo.health.finding import HealthFinding
from linkscope.topo.model.snapshot import Snapshot

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def hosts_table(snapshot: Snapshot, findings: tuple[HealthFinding, ...]) -> Table:
    """One row per host (NVLinks: active links per GPU; PCIe: the narrowest current width; rails: NICs that
    carry GPU traffic; domain: the multi-node NVLink domain); hosts named by a finding carry its codes."""
    table = Table(title="Hosts", title_justify="left", box=None, pad_edge=False)
    table.add_column("host", no_wrap=True)
    for column in ("GPUs", "NVLinks", "PCIe", "rails", "driver", "domain"):
        table.add_column(column, no_wrap=True)
    table.add_column("findings", overflow="fold")
    for row in host_summaries(snapshot, findings):
        style = "bold red" if "host-not-collected" in row.findings else ""
        table.add_row(Text(row.hostname), str(row.gpus) if row.gpus else "-", row.nvlinks, row.pcie_width,
                      str(row.rails) if row.gpus else "-", Text(row.driver), row.domain,
                      Text(", ".join(row.findings) or "-", style=style))
    return table


def findings_view(findings: tuple[HealthFinding, ...]) -> RenderableType:
    """The cross-host findings, one block each: severity and code, message, evidence, fix."""
    if not findings:
        return Text("No odd node out: every host looks like the others.")
    parts: list[RenderableType] = []
    for finding in findings:
        head = Text(f"{finding.severity.upper()} {finding.code}  ", style=SEVERITY_STYLE[finding.severity])
        head.append(Text(finding.message))
        parts += [head, *(Text(f"  evidence: {line}") for line in finding.evidence), Text(f"  fix: {finding.fix}")]
    return Group(*parts)


def cluster_view(snapshot: Snapshot, findings: tuple[HealthFinding, ...]) -> RenderableType:
    """Hosts table and cross-host findings."""
    return Group(hosts_table(snapshot, findings), Text(""), findings_view(findings))
