"""The cluster model: rails, NVLink domains that span hosts, cross-host rules, and check/plan on clusters."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.plan import plan_layout
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.common.errors import InputError
from linkscope.topo.health.cluster import cluster_findings
from linkscope.topo.layout.placement import RankMapEntry, cluster_hosts
from linkscope.topo.machine.cluster import combine_hosts, domain_hosts, gpu_rails, merge_domain, nvlink_domains
from linkscope.topo.model.codec import from_jsonable
from linkscope.topo.model.host import Gap, Host, LinkKind, NvLinkPort, Versions
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample

NVL72 = load_sample("gb200-nvl72")
MIXED = load_sample("h100-cluster-mixed")


def _two_cliques() -> Snapshot:
    """The NVL72 sample cut into two NVLink cliques of 9 trays each (as a partitioned rack reports it)."""
    hosts = tuple(host if tray < 9 else dataclasses.replace(
        host, gpus=tuple(dataclasses.replace(gpu, fabric_clique_id=1) for gpu in host.gpus))
        for tray, host in enumerate(NVL72.hosts))
    return dataclasses.replace(NVL72, hosts=hosts)


def test_nvl72_is_one_nvlink_domain_of_18_hosts_and_72_gpus() -> None:
    domains = nvlink_domains(NVL72)
    assert len(domains) == 1 and domains[0].hosts == tuple(range(18)) and domains[0].key is not None
    (merged,) = domain_hosts(NVL72)
    assert len(merged.gpus) == 72 and [gpu.index for gpu in merged.gpus] == list(range(72))
    across = merged.link(3, 4)  # GPU 3 of tray01 and GPU 0 of tray02
    assert across.kind is LinkKind.NVLINK and across.nvlink_count == 18 and across.nvlink_gen == 5
    assert merged.link(0, 1) == dataclasses.replace(NVL72.hosts[0].link(0, 1))
    assert merged.nics[4].name == "nvl72-tray02:mlx5_0" and merged.gpu_nic[4][4] == "NODE" and merged.gpu_nic[4][0] == "SYS"


def test_hosts_without_fabric_info_stay_their_own_domains() -> None:
    assert [domain.hosts for domain in nvlink_domains(MIXED)] == [(0,), (1,), (2,), (3,)]
    assert domain_hosts(MIXED) == MIXED.hosts
    assert len(nvlink_domains(_two_cliques())) == 2


def test_gpus_in_a_clique_with_fewer_links_join_at_the_smaller_count() -> None:
    tray = NVL72.hosts[0]
    short = dataclasses.replace(tray.gpus[0], nvlinks=tuple(dataclasses.replace(port, active=port.link < 16)
                                                            for port in tray.gpus[0].nvlinks))
    merged = merge_domain([dataclasses.replace(tray, gpus=(short, *tray.gpus[1:])), NVL72.hosts[1]])
    assert merged.link(0, 4).nvlink_count == 16 and merged.link(1, 4).nvlink_count == 18


def test_rails_pair_each_gpu_with_its_nearest_nic() -> None:
    assert [(rail.nic, rail.rail, rail.path) for rail in gpu_rails(NVL72.hosts[0])] == [
        ("mlx5_0", 0, "NODE"), ("mlx5_1", 1, "NODE"), ("mlx5_2", 2, "NODE"), ("mlx5_3", 3, "NODE")]
    rails = gpu_rails(MIXED.hosts[2])  # node03 lacks mlx5_5
    assert rails[5].nic == "mlx5_4" and rails[5].path == "PXB" and rails[4].nic == "mlx5_4"
    assert {(rail.rate_gbit_per_s, rail.link_layer) for rail in rails} == {(400.0, "InfiniBand")}


def test_tp_across_trays_of_one_nvlink_domain_is_fine() -> None:
    report = check_layout(NVL72, CheckRequest(sizes=(("tp", 8),)))
    assert not [finding for finding in report.findings if finding.code == "tp-crosses-node"]
    assert report.groups["tp"][0] == list(range(8))  # ranks 0-7: trays 01 and 02


def test_tp_across_two_cliques_is_a_finding() -> None:
    report = check_layout(_two_cliques(), CheckRequest(sizes=(("tp", 8),)))
    crossing = [finding for finding in report.findings if finding.code == "tp-crosses-node"]
    assert crossing and crossing[0].severity == "error" and "NVLink domain" in crossing[0].message
    assert crossing[0].ranks == (32, 33, 34, 35, 36, 37, 38, 39)  # 36 GPUs per clique: the 5th group straddles


def test_tp_across_hosts_without_a_shared_domain_is_a_finding() -> None:
    report = check_layout(MIXED, CheckRequest(sizes=(("tp", 16),)), None)
    assert any(finding.code == "tp-crosses-node" for finding in report.findings)


def test_nodes_count_nvlink_domains() -> None:
    hosts, classes = cluster_hosts(NVL72, 3)
    assert len(hosts) == 3 and len(hosts[0].gpus) == 72 and classes == (0, 0, 0)
    with pytest.raises(InputError, match="already describes 2 NVLink domains"):
        cluster_hosts(_two_cliques(), 3)


def test_plan_on_nvl72_lets_tp_span_hosts_in_the_domain() -> None:
    plan = plan_layout(NVL72, 144, None, {"tp": 8})
    assert plan.nodes == 2
    assert not [finding for finding in plan.report.findings if finding.code == "tp-crosses-node"]
    tray = dataclasses.replace(NVL72, hosts=NVL72.hosts[:1])  # the same trays without the shared fabric
    tray = dataclasses.replace(tray, hosts=tuple(dataclasses.replace(host, gpus=tuple(
        dataclasses.replace(gpu, fabric_cluster_uuid=None) for gpu in host.gpus)) for host in tray.hosts))
    alone = plan_layout(tray, 144, None, {"tp": 8})  # 4-GPU nodes: TP 8 must cross the network
    assert alone.nodes == 36 and [finding for finding in alone.report.findings if finding.code == "tp-crosses-node"]


def test_mixed_cluster_odd_nodes_out() -> None:
    codes = {(finding.code, finding.host, finding.gpus) for finding in cluster_findings(MIXED)}
    assert codes == {
        ("host-fewer-nvlinks", "node02", (3,)),
        ("host-pcie-narrower", "node02", (3,)),
        ("host-nic-missing", "node03", ()),
        ("host-off-rail", "node03", (5,)),
    }
    assert cluster_findings(load_sample("dgx-h100")) == ()
    assert cluster_findings(NVL72) == ()


def _with(host: Host, **changes: object) -> Host:
    return dataclasses.replace(host, **changes)  # type: ignore[arg-type]


def test_driver_slow_nic_missing_node_and_split_domain_are_found() -> None:
    base = load_sample("dgx-h100").host
    hosts = [_with(base, hostname=f"n{i}") for i in range(4)]
    hosts[1] = _with(hosts[1], versions=Versions(driver="550.54.15"))
    hosts[2] = _with(hosts[2], nics=tuple(dataclasses.replace(nic, rate_gbit_per_s=200.0) if nic.name == "mlx5_2" else nic
                                          for nic in base.nics))
    hosts.append(_with(base, hostname="n5", gpus=base.gpus[:7]))
    snapshot = Snapshot(hosts=tuple(hosts), gaps=(Gap("collect (rank 4)", "probe did not finish within 60 s", "n4"),))
    findings = {finding.code: finding for finding in cluster_findings(snapshot)}
    assert findings["host-not-collected"].host == "n4" and findings["host-not-collected"].severity == "error"
    assert findings["host-missing-gpus"].host == "n5" and findings["host-missing-gpus"].severity == "error"
    assert findings["host-driver-differs"].host == "n1" and "535.129.03" in findings["host-driver-differs"].message
    assert findings["host-nic-slower"].host == "n2"
    assert findings["host-nic-slower"].evidence == ("mlx5_2 200 Gb/s against 400",)
    assert findings["host-nic-slower"].to_json() == {
        "code": "host-nic-slower", "severity": "warning", "host": "n2", "gpus": [],
        "message": "n2: mlx5_2 trained to a lower rate than on most hosts", "evidence": ["mlx5_2 200 Gb/s against 400"],
        "fix": "reseat or replace the cable or transceiver; check the switch port"}
    split = _two_cliques()
    outside = dataclasses.replace(split, hosts=(*split.hosts[:8], dataclasses.replace(split.hosts[8], gpus=tuple(
        dataclasses.replace(gpu, fabric_cluster_uuid=None) for gpu in split.hosts[8].gpus))))
    assert [f.host for f in cluster_findings(outside) if f.code == "host-outside-nvlink-domain"] == ["nvl72-tray09"]


def test_combine_keeps_every_host_and_tags_gaps() -> None:
    one = dataclasses.replace(load_sample("dgx-h100"), gaps=(Gap("nvmlDeviceGetP2PStatus", "NotSupported"),))
    combined = combine_hosts([one, one, load_sample("consumer-2gpu")], "merge")
    assert [host.hostname for host in combined.snapshot.hosts] == ["dgx-h100", "dgx-h100#2", "consumer-2gpu"]
    assert combined.duplicates == ("dgx-h100",)
    assert [gap.host for gap in combined.snapshot.gaps] == ["dgx-h100", "dgx-h100"]


def test_shared_decoding_never_takes_an_integer_for_a_boolean() -> None:
    assert from_jsonable(NvLinkPort, {"link": 0, "active": True}) == NvLinkPort(0, True)
    with pytest.raises(InputError, match=r"\$.active: expected bool"):
        from_jsonable(NvLinkPort, {"link": 0, "active": 1})


def test_estimate_on_a_cluster_prices_its_own_links(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from linkscope.cli import main

    results = {}
    for source in ("sample:gb200-nvl72", "sample:h100-cluster-mixed"):
        assert main(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "16", source, "--algo", "ring",
                     "--json"]) == 0
        results[source] = json.loads(capsys.readouterr().out)
    nvl, mixed = results["sample:gb200-nvl72"], results["sample:h100-cluster-mixed"]
    assert (nvl["nodes"], mixed["nodes"]) == (1, 4)  # one NVLink domain; 4 ranks on each of the 4 nodes
    assert nvl["busbw_gbps"] > 2 * mixed["busbw_gbps"]  # NVLink5 across trays against the H100 nodes' network
    assert main(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "16", "sample:dgx-h100", "--intra",
                 "1:300"]) == 2
    assert "drop them or drop SOURCE" in capsys.readouterr().err
    assert main(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "100", "sample:dgx-h100"]) == 2
    assert "--ranks 100 over 1 node(s) needs 100 GPUs per node; sample:dgx-h100 has 8" in capsys.readouterr().err


def test_show_starts_a_cluster_with_its_hosts_and_odd_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    from linkscope.cli import main

    assert main(["show", "sample:h100-cluster-mixed"]) == 0
    out = capsys.readouterr().out
    assert out.index("Hosts") < out.index("host-fewer-nvlinks  node02: GPU 3 has fewer active NVLinks")
    assert "node03: 7 NICs carry GPU traffic where most hosts have 8 (mlx5_5 missing)" in " ".join(out.split())
    assert main(["show", "sample:gb200-nvl72"]) == 0
    out = capsys.readouterr().out
    assert "No odd node out" in out and "17 more hosts not shown in full" in out
    assert out.count("NVL0") == 18


def _tray_rank_map(count: int) -> tuple[RankMapEntry, ...]:
    return tuple(RankMapEntry(rank, f"nvl72-tray{rank // 4 + 1:02d}", rank % 4) for rank in range(count))


def test_rank_map_on_nvl72_places_trays_of_one_domain_on_one_node() -> None:
    report = check_layout(NVL72, CheckRequest(sizes=(("tp", 8),), rank_map=_tray_rank_map(72)))
    assert not [finding for finding in report.findings if finding.code in ("tp-crosses-node", "layout-mismatch")]
    assert report.placement[:9] == tuple((0, position) for position in range(9))
    split = check_layout(_two_cliques(), CheckRequest(sizes=(("tp", 8),), rank_map=_tray_rank_map(72)))
    crossing = [finding for finding in split.findings if finding.code == "tp-crosses-node"]
    assert crossing and crossing[0].ranks == tuple(range(32, 40))
    swapped = (*_tray_rank_map(72)[:5], RankMapEntry(5, "nvl72-tray01", 0), *_tray_rank_map(72)[6:])
    mismatch = check_layout(NVL72, CheckRequest(sizes=(("tp", 8),), rank_map=swapped))
    assert [finding.code for finding in mismatch.findings] == ["layout-mismatch"]
    assert "ranks 0 and 5 are both mapped to GPU 0 of nvl72-tray01" in mismatch.findings[0].message
