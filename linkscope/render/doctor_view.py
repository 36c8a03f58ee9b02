"""The console view of `linkscope doctor`: what was looked at, then each finding with its evidence and fix."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from linkscope.render import SEVERITY_STYLES
from linkscope.topo.health.finding import HealthFinding


def health_finding_view(finding: HealthFinding, qualified: bool = False) -> RenderableType:
    """One finding: severity, code and GPUs; the message; the evidence lines; the fix."""
    head = Text()
    head.append(f"{finding.severity.upper():8}", style=SEVERITY_STYLES.get(finding.severity, ""))
    head.append(finding.code, style="bold")
    if finding.gpus:
        head.append("  [" + ", ".join(str(label) for label in finding.gpu_labels(qualified)) + "]")
    elif qualified:
        head.append(f"  [{finding.host}]")
    lines: list[RenderableType] = [head, Text("  " + finding.message)]
    lines += [Text("    - " + line, style="dim") for line in finding.evidence]
    if finding.fix:
        lines.append(Text("  fix: " + finding.fix, style="green"))
    return Group(*lines)


def doctor_view(findings: Sequence[HealthFinding], looked_at: Sequence[str], qualified: bool) -> RenderableType:
    """The whole `doctor` output."""
    parts: list[RenderableType] = [Text(line) for line in looked_at]
    parts.append(Text(""))
    if findings:
        parts.append(Text(f"Findings ({len(findings)})", style="bold"))
        parts += [health_finding_view(finding, qualified) for finding in findings]
    else:
        parts.append(Text("No findings: links, PCIe, NUMA placement, platform settings and environment look healthy.",
                          style="green"))
    return Group(*parts)
