"""A check on a cluster with odd hosts prices each group once: a health finding's "with its links up" figure
re-prices only the groups the repair changes, and gives what pricing the whole repaired job gives."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.layout.placement import Distribution
from linkscope.topo.model.host import LinkKind
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample


def _cluster(hosts: int, odd_every: int) -> Snapshot:
    healthy, degraded = load_sample("dgx-h100").host, load_sample("dgx-h100-degraded").host
    return Snapshot(hosts=tuple(dataclasses.replace(degraded if number % odd_every == 1 else healthy,
                                                    hostname=f"gpu{number:03d}") for number in range(hosts)),
                    source="test")


def _repaired(snapshot: Snapshot, hostname: str) -> Snapshot:
    """`snapshot` with `hostname`'s NVLinks at the count its other GPU pairs have (the degraded sample's GPU3 has
    16 where the others have 18)."""
    full = max(link.nvlink_count for host in snapshot.hosts for link in host.links if link.kind is LinkKind.NVLINK)
    return dataclasses.replace(snapshot, hosts=tuple(
        dataclasses.replace(host, links=tuple(dataclasses.replace(link, nvlink_count=full)
                                              if link.kind is LinkKind.NVLINK else link for link in host.links))
        if host.hostname == hostname else host for host in snapshot.hosts))


def _cost_s(snapshot: Snapshot, sizes: tuple[tuple[str, int], ...], dim: str = "tp",
            distribution: Distribution = "block") -> float:
    report = check_layout(snapshot, CheckRequest(sizes=sizes, nodes=len(snapshot.hosts), distribution=distribution))
    return next(cost.time_s for cost in report.costs if cost.dim == dim)


@pytest.mark.parametrize("sizes", [(("tp", 8),), (("tp", 4), ("pp", 2)), (("tp", 2), ("pp", 4))])
@pytest.mark.parametrize("odd_every", [5, 12])
def test_links_up_figure_is_the_job_checked_again_with_that_host_repaired(sizes: tuple[tuple[str, int], ...],
                                                                           odd_every: int) -> None:
    """With one odd host the repair removes the slow group; with three, repairing one leaves the others slow (0%)."""
    snapshot = _cluster(12, odd_every)
    report = check_layout(snapshot, CheckRequest(sizes=sizes, nodes=len(snapshot.hosts)))
    current_s = _cost_s(snapshot, sizes)
    findings = [finding for finding in report.findings if finding.code == "nvlink-fewer-links"]
    assert len(findings) == len(range(1, 12, odd_every))
    for finding in findings:
        hostname = f"gpu{finding.ranks[0] // 8:03d}"  # block placement, 8 GPUs a host
        expected = round((1 - _cost_s(_repaired(snapshot, hostname), sizes) / current_s) * 100)
        assert f"would take {expected}% less time" in finding.message, (hostname, finding.message)
    if odd_every == 12:
        assert "would take 0% less" not in findings[0].message


def counted_shapes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A counter of the group shapes the pricer works out (`GroupPricer.signature` calls) from now on."""
    shapes = {"count": 0}
    signature = GroupPricer.signature

    def counted(self: GroupPricer, ranks: object) -> object:
        shapes["count"] += 1
        return signature(self, ranks)  # type: ignore[arg-type]

    monkeypatch.setattr(GroupPricer, "signature", counted)
    return shapes


def test_a_check_prices_each_group_once_however_many_hosts_are_odd(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups priced in one check grow with the cluster, not with the cluster times its odd hosts."""
    calls = counted_shapes(monkeypatch)
    counts = []
    for hosts in (48, 96):
        calls["count"] = 0
        check_layout(_cluster(hosts, 6), CheckRequest(sizes=(("tp", 8), ("pp", 2)), nodes=hosts))
        counts.append(calls["count"])
    assert counts[1] <= 2.2 * counts[0], counts
    assert counts[0] <= 3 * 48 * 8, counts  # a few pricings per rank, not one per rank and odd host


@pytest.mark.parametrize("distribution", ["block", "cyclic"])
@pytest.mark.parametrize("sizes", [(("tp", 4), ("pp", 2)), (("tp", 2),), (("pp", 3),)])
def test_each_findings_figures_are_those_of_its_job_priced_on_its_own(sizes: tuple[tuple[str, int], ...],
                                                                      distribution: Distribution) -> None:
    """Every odd host's finding, priced on the pricing the check shares between findings, gives the figures of
    pricing that finding's job separately: the check's own cost of the dimension, and the cost of the same job on
    the cluster with that host repaired (TP groups inside a host or across hosts, DP groups across every host).
    Host 1 is worse than the other odd hosts, so repairing it leaves theirs as the slowest groups."""
    snapshot = _cluster(15, 4)  # hosts 1, 5, 9 and 13 odd
    worse = snapshot.hosts[1]
    worse = dataclasses.replace(worse, links=tuple(dataclasses.replace(link, nvlink_count=12)
                                                   if link.kind is LinkKind.NVLINK and link.nvlink_count == 16 else link
                                                   for link in worse.links))
    snapshot = dataclasses.replace(snapshot, hosts=(snapshot.hosts[0], worse, *snapshot.hosts[2:]))
    request = CheckRequest(sizes=sizes, nodes=len(snapshot.hosts), distribution=distribution)
    report = check_layout(snapshot, request)
    findings = [finding for finding in report.findings if finding.code == "nvlink-fewer-links"]
    hostnames = [report.hostnames[report.placement[finding.ranks[0]][0]] for finding in findings]
    assert sorted(hostnames) == [f"gpu{number:03d}" for number in (1, 5, 9, 13)]
    for finding, hostname in zip(findings, hostnames, strict=True):
        current = _cost_s(snapshot, sizes, finding.dim, distribution)
        assert finding.cost_s == pytest.approx(current, rel=1e-12)
        alone = _cost_s(_repaired(snapshot, hostname), sizes, finding.dim, distribution)
        assert finding.best_cost_s == pytest.approx(alone, rel=1e-12), (hostname, finding.dim)
        if distribution == "block":  # (cyclic: the groups span hosts, and the network sets their pace)
            assert (alone < current) == (hostname == "gpu001"), hostname


def test_a_check_after_another_layout_is_the_check_of_a_fresh_snapshot() -> None:
    """What one check keeps for the next (the cluster's classes, the pricing of its hosts, their health) changes no
    figure: an edit of the layout reports what checking a new copy of the snapshot reports."""
    snapshot = _cluster(24, 5)
    edits = [(("tp", 8), ("pp", 2)), (("tp", 4), ("pp", 4)), (("tp", 2), ("pp", 3)), (("pp", 2),)]
    for sizes in edits:
        check_layout(snapshot, CheckRequest(sizes=edits[0], nodes=24))
        again = check_layout(snapshot, CheckRequest(sizes=sizes, nodes=24)).to_json()
        fresh = check_layout(dataclasses.replace(snapshot), CheckRequest(sizes=sizes, nodes=24)).to_json()
        assert again == fresh


def test_an_edit_back_to_a_layout_checked_before_works_out_no_group_shape_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The links of the groups priced on a placement are kept by their ranks for the next check of that placement
    (tp 4 <-> 8 keeps it): going back to a layout finds every group's links without working out its shape (but the
    group on each odd host, priced again with the host repaired for its finding), and another placement (cyclic)
    works them out afresh; the figures are those a fresh snapshot gives."""
    shapes = counted_shapes(monkeypatch)
    snapshot = _cluster(24, 5)
    check_layout(snapshot, CheckRequest(sizes=(("tp", 8),), nodes=24))
    check_layout(snapshot, CheckRequest(sizes=(("tp", 4),), nodes=24))
    shapes["count"] = 0
    again = check_layout(snapshot, CheckRequest(sizes=(("tp", 8),), nodes=24))
    assert shapes["count"] == len(range(1, 24, 5))  # hosts 1, 6, 11, 16 and 21 odd
    assert again.to_json() == check_layout(dataclasses.replace(snapshot), CheckRequest(sizes=(("tp", 8),), nodes=24)).to_json()
    shapes["count"] = 0
    check_layout(snapshot, CheckRequest(sizes=(("tp", 8),), nodes=24, distribution="cyclic"))
    assert shapes["count"] > 24


def test_the_context_says_once_per_group_whether_it_leaves_its_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The health findings of many odd hosts ask whether the same few groups of thousands of ranks leave their node:
    the check's context answers from the placement, once per group, and the placement keeps its ranks per node."""
    import linkscope.topo.checks.check as check_module
    from linkscope.topo.checks.context import LayoutContext

    contexts: list[LayoutContext] = []

    class Recorded(LayoutContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            contexts.append(self)

    monkeypatch.setattr(check_module, "LayoutContext", Recorded)
    report = check_layout(_cluster(12, 5), CheckRequest(sizes=(("tp", 4),), nodes=12))
    context = contexts[-1]
    assert any(finding.code == "pcie-width-reduced" and finding.dim == "dp" for finding in report.findings)
    asked = dict(context._leaves_node)
    # what the health rule asked: its odd hosts' TP groups (inside a node), then their DP group (across nodes)
    assert ("dp", 3) in asked and all(leaves == (dim == "dp") for (dim, _), leaves in asked.items())
    assert not context.group_leaves_node("tp", 0) and context.group_leaves_node("dp", 0)
    ranks_on = context.placement.ranks_on_node()
    assert ranks_on is context.ranks_on_node() and ranks_on[1] == tuple(range(8, 16))
