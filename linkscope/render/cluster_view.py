"""The cluster part of `linkscope show` for a multi-host snapshot: one row per host (GPUs, NVLinks
up, narrowest PCIe link, NICs carrying GPU traffic, driver, NVLink domain) and the cross-host
findings of :mod:`topo.cluster_health` (the odd node out)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from topo.cluster import gpu_rails, nvlink_domains
from topo.cluster_health import ClusterFinding
from topo.model import Snapshot

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def hosts_table(snapshot: Snapshot, findings: tuple[ClusterFinding, ...]) -> Table:
    """One row per host (NVLinks: active links per GPU; PCIe: the narrowest current width; rails: NICs that
carry GPU traffic; domain: the multi-node NVLink domain); hosts named by a finding carry its codes."""
    domain_of: dict[int, str] = {}
    for number, domain in enumerate(nvlink_domains(snapshot)):
        for position in domain.hosts:
            domain_of[position] = f"NVL{number}" if domain.key is not None else "-"
    codes: dict[str, list[str]] = {}
    for finding in findings:
        for name in finding.hosts:
            codes.setdefault(name, []).append(finding.code)
    table = Table(title="Hosts", title_justify="left", box=None, pad_edge=False)
    table.add_column("host", no_wrap=True)
    for column in ("GPUs", "NVLinks", "PCIe", "rails", "driver", "domain"):
        table.add_column(column, no_wrap=True)
    table.add_column("findings", overflow="fold")
    for position, host in enumerate(snapshot.hosts):
        links = [gpu.nvlink_active_count for gpu in host.gpus]
        widths = [gpu.pcie_width_current for gpu in host.gpus if gpu.pcie_width_current is not None]
        rails = {rail.nic for rail in gpu_rails(host) if rail.nic is not None}
        table.add_row(Text(host.hostname), str(len(host.gpus)),
                      f"{min(links)}-{max(links)}" if links and min(links) != max(links) else str(links[0] if links else "-"),
                      f"x{min(widths)}" if widths else "-", str(len(rails)), Text(host.versions.driver or "-"),
                      domain_of.get(position, "-"), Text(", ".join(codes.get(host.hostname, [])) or "-"))
    missing = [finding for finding in findings if finding.code == "host-not-collected"]
    for finding in missing:
        table.add_row(Text(finding.hosts[0]), "-", "-", "-", "-", "-", "-", Text("host-not-collected", style="bold red"))
    return table


def findings_view(findings: tuple[ClusterFinding, ...]) -> RenderableType:
    """The cross-host findings, one block each: severity and code, message, evidence, fix."""
    if not findings:
        return Text("No odd node out: every host looks like the others.")
    parts: list[RenderableType] = []
    for finding in findings:
        head = Text(f"{finding.severity.upper()} {finding.code}  ", style=SEVERITY_STYLE[finding.severity])
        head.append(Text(finding.message))
        parts += [head, Text(f"  evidence: {finding.evidence}"), Text(f"  fix: {finding.fix}")]
    return Group(*parts)


def cluster_view(snapshot: Snapshot, findings: tuple[ClusterFinding, ...]) -> RenderableType:
    """Hosts table and cross-host findings."""
    return Group(hosts_table(snapshot, findings), Text(""), findings_view(findings))
