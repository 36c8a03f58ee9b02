"""Rank-map files: CSV, JSON, DeepSpeed hostfiles, Slurm hostlists and task counts."""

from __future__ import annotations

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.formats.rankmap import expand_hostlist, parse_tasks_per_node, read_rank_map
from linkscope.topo.layout.placement import RankMapEntry


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("gpu[001-004,010]", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]),
        ("a,b[1-2]", ["a", "b1", "b2"]),
        ("r[1-2]-n[08-09]", ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]),
        ("node7", ["node7"]),
    ],
)
def test_hostlists_expand(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(("text", "fragment"), [("gpu[1-", "unbalanced"), ("gpu[4-2]", "backwards"), ("gpu[a]", "not a number")])
def test_bad_hostlists(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        expand_hostlist(text)


def test_tasks_per_node_repeat_syntax() -> None:
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(InputError, match="COUNT"):
        parse_tasks_per_node("2(3)")


def test_csv_with_header_and_comments() -> None:
    text = "rank,host,gpu\n# first node\n0,n1,0\n1,n1,1\n2,n2,0\n"
    assert read_rank_map(text, "map.csv", 8) == (RankMapEntry(0, "n1", 0), RankMapEntry(1, "n1", 1), RankMapEntry(2, "n2", 0))


def test_json_list_and_object_forms() -> None:
    entries = (RankMapEntry(0, "a", 3), RankMapEntry(1, "b", 2))
    assert read_rank_map('[{"rank":0,"host":"a","gpu":3},{"rank":1,"host":"b","gpu":2}]', "m.json", 8) == entries
    assert read_rank_map('{"ranks":[{"rank":0,"host":"a","gpu":3},{"rank":1,"host":"b","gpu":2}]}', "m.json", 8) == entries


def test_deepspeed_hostfile_fills_hosts_in_order() -> None:
    entries = read_rank_map("worker-1 slots=2\nworker-2 slots=2\n", "hostfile", 8)
    expected = [(0, "worker-1", 0), (1, "worker-1", 1), (2, "worker-2", 0), (3, "worker-2", 1)]
    assert [(e.rank, e.host, e.gpu) for e in entries] == expected


def test_slurm_variables_cyclic() -> None:
    text = "SLURM_JOB_NODELIST=gpu[1-2]\nSLURM_TASKS_PER_NODE=2(x2)\nSLURM_DISTRIBUTION=cyclic\n"
    entries = read_rank_map(text, "slurm.env", 8)
    assert [(e.rank, e.host, e.gpu) for e in entries] == [(0, "gpu1", 0), (1, "gpu2", 0), (2, "gpu1", 1), (3, "gpu2", 1)]


def test_bare_hostlist_uses_the_default_slots() -> None:
    entries = read_rank_map("gpu[01-02]\n", "hosts", 2)
    assert [(e.host, e.gpu) for e in entries] == [("gpu01", 0), ("gpu01", 1), ("gpu02", 0), ("gpu02", 1)]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0,n1,0\n1,n1\n", "line 2: expected 3 fields"),
        ("0,n1,0\nx,n1,1\n", "line 2: expected rank,host,gpu"),
        ("0,n1,0\n0,n2,1\n", "rank 0 appears twice"),
        ('[{"rank":0,"host":"a"}]', r"\$\[0\]\.gpu"),
        ('[{"rank":0,', "not valid JSON"),
        ("SLURM_TASKS_PER_NODE=2\n", "no SLURM_JOB_NODELIST"),
        ("SLURM_JOB_NODELIST=a[1-2]\nSLURM_TASKS_PER_NODE=2(x3)\n", "covers 3 nodes"),
        ("", "empty rank map"),
        ("w1 slots=2\nhello world\n", "line 2"),
    ],
)
def test_bad_rank_maps_name_the_line(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        read_rank_map(text, "map", 8)
