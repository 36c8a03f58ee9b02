"""The whole console view of a snapshot, as `linkscope show` prints it: for a cluster the hosts table
and cross-host findings first; per host the header, link matrix, NIC legend, bandwidth legend, GPU
and NIC tables; then the recorded gaps."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from linkscope.render.matrix import link_legend, link_matrix, nic_legend, p2p_note
from linkscope.render.tables import gaps_table, gpu_table, host_header, nic_table
from linkscope.topo.common.limits import MAX_HOSTS_IN_FULL
from linkscope.topo.model.host import Host
from linkscope.topo.model.snapshot import Snapshot


def host_view(snapshot: Snapshot, host: Host) -> RenderableType:
    """Everything `show` prints about one host of `snapshot`."""
    parts: list[RenderableType] = [host_header(snapshot, host), Text("")]
    if not host.gpus:
        parts += [Text("No GPUs recorded (to try linkscope without a GPU: linkscope show sample:dgx-h100).")]
        parts += [Text(""), nic_table(host)]
        return Group(*parts)
    parts.append(link_matrix(host))
    if host.nics:
        parts += [Text(""), nic_legend(host)]
    parts += [Text(""), link_legend(host)]
    note = p2p_note(host)
    if note is not None:
        parts.append(note)
    parts += [Text(""), gpu_table(host), Text(""), nic_table(host)]
    return Group(*parts)


def snapshot_view(snapshot: Snapshot) -> RenderableType:
    """Every host of `snapshot` (separated by a rule naming the host when there are several), then its gaps."""
    parts: list[RenderableType] = []
    shown = list(snapshot.hosts)
    if len(snapshot.hosts) > 1:
        from linkscope.render.cluster_view import cluster_view
        from linkscope.topo.health.cluster import cluster_findings

        findings = cluster_findings(snapshot)
        parts += [cluster_view(snapshot, findings), Text("")]
        if len(shown) > MAX_HOSTS_IN_FULL:
            named = {finding.host for finding in findings}
            shown = [host for position, host in enumerate(shown) if position == 0 or host.hostname in named]
            shown = shown[:MAX_HOSTS_IN_FULL]
    for host in shown:
        if len(snapshot.hosts) > 1:
            parts.append(Rule(Text(host.hostname or "(unnamed)"), align="left"))
        parts += [host_view(snapshot, host), Text("")]
    if len(shown) < len(snapshot.hosts):
        parts += [Text(f"{len(snapshot.hosts) - len(shown)} more hosts not shown in full (the first host and those "
                       "named by a finding are); `linkscope show --json` has every one."), Text("")]
    if not snapshot.hosts:
        parts += [Text("No hosts in this snapshot."), Text("")]
    parts.append(gaps_table(snapshot.gaps))
    return Group(*parts)
