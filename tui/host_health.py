"""What the health rules say about each host of a snapshot, judged once per snapshot (in a worker) and shared by
every tab that lists hosts or GPUs: the odd hosts of a cluster and each GPU's `linkscope doctor` codes."""

from __future__ import annotations

from dataclasses import field

from linkscope.topo.common.frozen import frozen
from linkscope.topo.health.cluster import cluster_findings, cross_host
from linkscope.topo.health.finding import HealthContext, HealthFinding
from linkscope.topo.health.rules import RULES, run_health
from linkscope.topo.model.snapshot import Snapshot

ODD_NAMED = 3
"""Odd hosts named in a title before the rest are counted."""


@frozen
class HostHealth:
    """The health rules' verdicts on one snapshot, by host."""

    cluster: tuple[HealthFinding, ...] = ()
    """Cross-host findings (:func:`topo.health.cluster.cluster_findings`): which hosts differ from the rest."""
    gpu_codes: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    """Per hostname, the doctor codes (hardware and platform rules) of each GPU by NVML index."""

    @property
    def odd(self) -> dict[str, list[str]]:
        """Per hostname, the codes of the cross-host findings that name it (the hosts that are odd ones out)."""
        codes: dict[str, list[str]] = {}
        for finding in self.cluster:
            codes.setdefault(finding.host, []).append(finding.code)
        return codes

    def odd_note(self, hostnames: list[str], shown: str) -> str:
        """One line for the title of host `shown`: which hosts are odd ones out (empty when none is)."""
        odd = self.odd
        if not odd:
            return ""
        if shown in odd:
            return f"this host is an odd one out ({', '.join(odd[shown])})"
        named = [name for name in hostnames if name in odd]
        others = f" and {len(named) - ODD_NAMED} more" if len(named) > ODD_NAMED else ""
        return f"odd one{'s' if len(named) > 1 else ''} out: {', '.join(named[:ODD_NAMED])}{others}"


def judge_hosts(snapshot: Snapshot) -> HostHealth:
    """Run the health rules once over `snapshot` (blocking: seconds on a 1,024-host cluster; call from a worker)."""
    per_gpu = run_health(HealthContext(snapshot), tuple(rule for rule in RULES if rule is not cross_host))
    codes: dict[str, dict[int, list[str]]] = {}
    cluster = cluster_findings(snapshot) if len(snapshot.hosts) > 1 or any(gap.host for gap in snapshot.gaps) else ()
    for finding in (*per_gpu, *cluster):
        for index in finding.gpus:
            codes.setdefault(finding.host, {}).setdefault(index, []).append(finding.code)
    return HostHealth(cluster, codes)
