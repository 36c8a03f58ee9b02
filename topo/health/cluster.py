"""Cross-host rules: which node of a cluster is not like the others ("the odd node out").

Pure functions over a multi-host :class:`~topo.model.snapshot.Snapshot` (what `linkscope collect` or
`merge` writes). Each host is compared with what most hosts have: GPU count, active NVLinks and
PCIe width per GPU, driver, compute NICs and their rates, the NIC each GPU sends through, and
membership of the multi-node NVLink domain. Nodes that failed to collect (gaps with a host) are
findings too. Each finding is about one host and carries the fields of `doctor`'s findings, so the
doctor can list them after its per-host rules.

The comparisons themselves (:mod:`topo.health.odd_hosts`) load only for a snapshot of several hosts: `doctor` on
one box, the common case, does not pay for them at start-up.
"""

from __future__ import annotations

from collections.abc import Sequence

from linkscope.topo.common.frozen import frozen
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.model.snapshot import Snapshot


def _not_collected(snapshot: Snapshot) -> list[HealthFinding]:
    present = {host.hostname for host in snapshot.hosts}
    return [HealthFinding("host-not-collected", "error", gap.host, (), f"{gap.host} did not report: {gap.reason}",
                           (f"{gap.subject}: {gap.reason}",),
                           f"look at {gap.host} (is it up, can it reach the rendezvous?) and collect again")
            for gap in snapshot.gaps if gap.host is not None and gap.host not in present]


def cross_host(context: HealthContext) -> tuple[HealthFinding, ...]:
    """The cluster rules as one health rule: the odd nodes of a snapshot of several hosts (or with nodes missing)."""
    snapshot = context.snapshot
    if len(snapshot.hosts) < 2 and not any(gap.host for gap in snapshot.gaps):
        return ()
    return cluster_findings(snapshot)


def cluster_findings(snapshot: Snapshot) -> tuple[HealthFinding, ...]:
    """Every cross-host finding of a cluster snapshot, errors first (none for a single host)."""
    findings = _not_collected(snapshot)
    if len(snapshot.hosts) > 1:
        from linkscope.topo.health.odd_hosts import odd_hosts

        findings += odd_hosts(snapshot.hosts)
    order = ("error", "warning", "info")
    return tuple(sorted(findings, key=lambda finding: order.index(finding.severity)))


@frozen
class HostSummary:
    """One host of a cluster in a line: what the hosts table of `show` and the app's Topology tab list."""

    hostname: str
    gpus: int
    nvlinks: str
    """Active NVLinks per GPU: `18`, or the range `16-18` when they differ."""
    pcie_width: str
    """The narrowest current PCIe width, e.g. `x8`; `-` when not read."""
    rails: int
    """NICs that carry GPU traffic."""
    driver: str
    domain: str
    """`NVL<n>` for the host's multi-node NVLink domain, `-` without one."""
    findings: tuple[str, ...]
    """Codes of the cross-host findings that name the host."""


def host_summaries(snapshot: Snapshot, findings: Sequence[HealthFinding]) -> tuple[HostSummary, ...]:
    """A HostSummary per host of `snapshot`, then one per node that did not report (from its gap)."""
    from linkscope.topo.machine.cluster import gpu_rails, nvlink_domains

    domain_of: dict[int, str] = {}
    for number, domain in enumerate(nvlink_domains(snapshot)):
        for position in domain.hosts:
            domain_of[position] = f"NVL{number}" if domain.key is not None else "-"
    codes: dict[str, list[str]] = {}
    for finding in findings:
        codes.setdefault(finding.host, []).append(finding.code)
    rows = []
    for position, host in enumerate(snapshot.hosts):
        links = [gpu.nvlink_active_count for gpu in host.gpus]
        widths = [gpu.pcie_width_current for gpu in host.gpus if gpu.pcie_width_current is not None]
        nvlinks = "-" if not links else str(links[0]) if min(links) == max(links) else f"{min(links)}-{max(links)}"
        rails = len({rail.nic for rail in gpu_rails(host) if rail.nic is not None})
        rows.append(HostSummary(host.hostname, len(host.gpus), nvlinks, f"x{min(widths)}" if widths else "-", rails,
                                host.versions.driver or "-", domain_of.get(position, "-"),
                                tuple(codes.get(host.hostname, ()))))
    for finding in findings:
        if finding.code == "host-not-collected":
            rows.append(HostSummary(finding.host, 0, "-", "-", 0, "-", "-", (finding.code,)))
    return tuple(rows)
