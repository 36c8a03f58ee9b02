"""Measured ranks placed once (topo.layout.measured): from the rank lines when they cover every rank, else assumed
and said so; one NVLink domain of the SOURCE holds a run that fits it."""

from __future__ import annotations

import dataclasses

from linkscope.topo.formats.results import read_measurements
from linkscope.topo.layout.measured import place_measured
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.paths import REAL

H200_2NODE = REAL / "nccl_tests" / "h200-2node-16gpu-baremetal-all_reduce.txt"
GB200_72 = REAL / "nccl_tests" / "gb200-nvl72-full-rack-72rank-tail-only-last-rank-line-all_reduce.txt"


def test_two_hosts_of_eight_from_the_rank_lines() -> None:
    """16 `# Rank` lines, 8 on fs-207 and 8 on fs-208 (read by hand): 2 hosts x 8 GPUs, not assumed."""
    measured = read_measurements(H200_2NODE.read_text(), str(H200_2NODE))
    assert measured.identity is not None
    placed = place_measured(16, load_sample("dgx-h100"), measured.identity.hosts, measured.identity.gpu_count)
    assert placed.placement is not None and not placed.assumed
    assert (placed.nodes, placed.gpus_per_node) == (2, 8)
    assert placed.line == "16 ranks: 2 hosts x 8 GPUs from the rank lines"
    assert set(placed.placement.node_of_rank[:8]) == {0} and set(placed.placement.node_of_rank[8:]) == {1}


def test_a_tail_with_one_rank_line_of_72_is_one_nvlink_domain_assumed() -> None:
    """Only `# Rank 71` survives of a 72-rank NVL72 run: the rank lines do not cover the ranks, so the run is
    assumed to fill the SOURCE's one NVLink domain of 72 GPUs, never 72 one-GPU hosts."""
    measured = read_measurements(GB200_72.read_text(), str(GB200_72))
    assert measured.identity is not None
    placed = place_measured(72, load_sample("gb200-nvl72"), measured.identity.hosts, measured.identity.gpu_count)
    assert placed.placement is not None and placed.assumed
    assert (placed.nodes, placed.gpus_per_node) == (1, 72)
    assert "NVLink domain" in placed.line and "assumed" in placed.line


def test_full_rank_lines_inside_one_nvlink_domain_are_one_node() -> None:
    """18 hosts x 4 GPUs that all fit the SOURCE's NVL72 domain price as one domain, as estimate prices them."""
    hosts = tuple(f"tray{number:02d}" for number in range(18))
    placed = place_measured(72, load_sample("gb200-nvl72"), hosts, 4)
    assert placed.placement is not None and not placed.assumed and placed.nodes == 1


def test_ranks_that_fill_no_whole_host_are_not_placed_and_say_why() -> None:
    placed = place_measured(12, load_sample("dgx-h100"))
    assert placed.placement is None and "not placed" in placed.line and "8-GPU" in placed.line


def _cluster_of(names: tuple[str, ...], degraded: str) -> Snapshot:
    healthy, odd = load_sample("dgx-h100").host, load_sample("dgx-h100-degraded").host
    return Snapshot(hosts=tuple(dataclasses.replace(odd if name == degraded else healthy, hostname=name)
                                for name in names))


def test_rank_lines_naming_hosts_of_a_cluster_source_are_placed_on_those_hosts() -> None:
    """A run on node03 and node04 of a 4-host cluster is priced on node03 and node04 (node03 the odd one),
    not on the first two hosts of the file."""
    cluster = _cluster_of(("node01", "node02", "node03", "node04"), degraded="node03")
    placed = place_measured(16, cluster, ("node03", "node04"), 8)
    assert placed.placement is not None and not placed.assumed
    assert [host.hostname for host in placed.placement.hosts] == ["node03", "node04"]
    assert placed.placement.host_class[0] != placed.placement.host_class[1]  # the degraded host prices apart
    assert placed.line == "16 ranks: 2 hosts x 8 GPUs from the rank lines, on the SOURCE's hosts of those names"


def test_rank_lines_naming_hosts_the_cluster_lacks_say_whose_links_priced_them() -> None:
    cluster = _cluster_of(("node01", "node02", "node03", "node04"), degraded="node03")
    placed = place_measured(16, cluster, ("gpu-a", "gpu-b"), 8)
    assert placed.placement is not None
    assert placed.line.endswith("from the rank lines; priced on hosts like the SOURCE's first, node01")
