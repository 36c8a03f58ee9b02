"""The whole console view of a snapshot, as `linkscope show` prints it: per host the header, link
matrix, NIC legend, bandwidth legend, GPU and NIC tables; then the recorded gaps."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from linkscope.render.matrix import link_legend, link_matrix, nic_legend
from linkscope.render.tables import gaps_table, gpu_table, host_header, nic_table
from topo.model import Host, Snapshot


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
    parts += [Text(""), link_legend(host), Text(""), gpu_table(host), Text(""), nic_table(host)]
    return Group(*parts)


def snapshot_view(snapshot: Snapshot) -> RenderableType:
    """Every host of `snapshot` (separated by a rule naming the host when there are several), then its gaps."""
    parts: list[RenderableType] = []
    for host in snapshot.hosts:
        if len(snapshot.hosts) > 1:
            parts.append(Rule(Text(host.hostname or "(unnamed)"), align="left"))
        parts += [host_view(snapshot, host), Text("")]
    if not snapshot.hosts:
        parts += [Text("No hosts in this snapshot."), Text("")]
    parts.append(gaps_table(snapshot.gaps))
    return Group(*parts)
