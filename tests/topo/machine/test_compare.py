"""`topo.machine.compare`: the facts of a host, what differs between two, and the odd host among many."""

from __future__ import annotations

import dataclasses

from linkscope.topo.machine.compare import Member, diff_snapshots, host_facts, members_of, odd_one_out
from linkscope.topo.model.measurements import Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.health import with_host

H100 = load_sample("dgx-h100")
DEGRADED = load_sample("dgx-h100-degraded")


def _named(snapshot: Snapshot, hostname: str) -> Snapshot:
    return with_host(snapshot, hostname=hostname)


def test_a_snapshot_does_not_differ_from_itself() -> None:
    assert diff_snapshots(H100, H100) == []


def test_hostnames_and_sources_are_not_differences() -> None:
    assert diff_snapshots(H100, dataclasses.replace(_named(H100, "node-17"), source="probe")) == []


def test_degraded_gpu_differences_are_worse() -> None:
    found = {difference.what: difference for difference in diff_snapshots(H100, DEGRADED)}
    assert set(found) == {"GPU3 NVLinks up", "GPU3 PCIe width", *(f"GPU{min(i, 3)}-GPU{max(i, 3)} link"
                                                                    for i in range(8) if i != 3)}
    assert (found["GPU3 NVLinks up"].before, found["GPU3 NVLinks up"].after) == (18, 16)
    assert all(difference.worse for difference in found.values())
    back = diff_snapshots(DEGRADED, H100)
    assert all(difference.worse is False for difference in back), "the repair is for the better"


def test_a_lost_nic_is_one_difference_not_one_per_field() -> None:
    fewer = with_host(H100, nics=H100.host.nics[1:], gpu_nic=tuple(row[1:] for row in H100.host.gpu_nic))
    found = [difference.what for difference in diff_snapshots(H100, fewer)]
    assert "NIC mlx5_0" in found and not any(what.startswith("NIC mlx5_0 ") for what in found)
    assert "GPU0 nearest NIC path" in found, "GPU0's nearest NIC is now across the socket"


def test_versions_differ_without_a_direction() -> None:
    newer = with_host(H100, versions=dataclasses.replace(H100.host.versions, driver="550.54.15"))
    (difference,) = diff_snapshots(H100, newer)
    assert (difference.what, difference.worse) == ("driver version", None)


def test_measured_bandwidth_differs_only_beyond_noise() -> None:
    def measured(gbps: float) -> Snapshot:
        return dataclasses.replace(H100, measurements=Measurements("nvbandwidth", (PeerCopy(0, 1, unidir_gbps=gbps),)))

    assert diff_snapshots(measured(390.0), measured(360.0)) == []
    (difference,) = diff_snapshots(measured(390.0), measured(300.0))
    assert difference.worse and difference.gpus == (0, 1)


def test_odd_one_out_names_the_degraded_host() -> None:
    snapshots = [(f"h{n}.json", _named(H100, f"node{n}")) for n in range(4)]
    snapshots.append(("h4.json", _named(DEGRADED, "node4")))
    report = odd_one_out(members_of(snapshots))
    assert report.hosts == 5 and [label for label, _ in report.odd] == ["node4"]
    differences = {difference.what: difference for difference in report.odd[0][1]}
    assert (differences["GPU3 NVLinks up"].before, differences["GPU3 NVLinks up"].after) == (18, 16)
    assert report.split == ()


def test_two_odd_hosts_of_five_are_both_named() -> None:
    snapshots = [(f"h{n}.json", _named(DEGRADED if n in (1, 3) else H100, f"node{n}")) for n in range(5)]
    assert sorted(label for label, _ in odd_one_out(members_of(snapshots)).odd) == ["node1", "node3"]


def test_an_even_split_has_no_odd_host() -> None:
    snapshots = [(f"h{n}.json", _named(DEGRADED if n < 2 else H100, f"node{n}")) for n in range(4)]
    report = odd_one_out(members_of(snapshots))
    assert report.odd == () and "GPU3 NVLinks up" in report.split


def test_a_fact_one_side_does_not_know_is_not_a_difference() -> None:
    """Measurements on one host only, GPU names missing from a topo text: unknown there, not different."""
    members = [Member(f"n{n}", host_facts(H100.host)) for n in range(3)]
    extra = dataclasses.replace(H100, measurements=Measurements("nvbandwidth", (PeerCopy(0, 1, unidir_gbps=390.0),)))
    members.append(Member("n3", host_facts(extra.host, extra.measurements)))
    assert odd_one_out(members).odd == ()
    unnamed = with_host(H100, gpus=tuple(dataclasses.replace(gpu, name="") for gpu in H100.host.gpus))
    assert diff_snapshots(unnamed, H100) == []


def test_a_nic_only_the_odd_host_lacks_makes_it_odd() -> None:
    members = [Member(f"n{n}", host_facts(H100.host)) for n in range(3)]
    fewer = with_host(H100, nics=H100.host.nics[:-1], gpu_nic=tuple(row[:-1] for row in H100.host.gpu_nic))
    members.append(Member("n3", host_facts(fewer.host)))
    ((label, (difference,)),) = odd_one_out(members).odd
    assert (label, difference.what, difference.before, difference.after, difference.worse) == (
        "n3", "NIC mlx5_11", "present", None, True)


def test_repeated_hostnames_are_told_apart_by_file() -> None:
    members = members_of([("a.json", H100), ("b.json", H100)])
    assert [member.label for member in members] == ["dgx-h100 (a.json)", "dgx-h100 (b.json)"]


def test_the_same_file_twice_is_two_members() -> None:
    members = members_of([("sample:dgx-h100", H100), ("sample:dgx-h100", H100), ("sample:dgx-h100-degraded", DEGRADED)])
    assert [member.label for member in members] == ["dgx-h100 (sample:dgx-h100) #1", "dgx-h100 (sample:dgx-h100) #2",
                                                    "dgx-h100-degraded"]


def test_one_engine_says_what_most_hosts_have() -> None:
    """`diff --odd-one-out` and the cluster rules compare every host with usual_value; the rules are a health rule
    like any other, imported by the registry at its top (no import inside a function to dodge a cycle)."""
    import ast
    import inspect

    from linkscope.topo.health import cluster, odd_hosts, rules
    from linkscope.topo.machine.compare import usual_value

    assert usual_value([18, 16, 18, 18]) == (18, 3) and usual_value(["a", "b"]) == ("a", 1)
    assert cluster.cross_host in rules.RULES
    assert "usual_value(" in inspect.getsource(odd_hosts) and "def _usual" not in inspect.getsource(odd_hosts)
    nested = [node for function in ast.walk(ast.parse(inspect.getsource(rules))) if isinstance(function, ast.FunctionDef)
              for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not nested
