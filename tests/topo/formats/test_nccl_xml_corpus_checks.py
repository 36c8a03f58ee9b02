"""The corpus checks of NCCL's topology and graph XML are not vacuous: a fact changed in a sidecar fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from support.corpus import RealFile, real_files, run

FILES = {real.id: real for real in real_files() if real.kind in ("nccl_topo_xml", "nccl_graph_xml")}
NDV4 = "nccl_topo_xml/azure-ndv4-a100-8gpu-vendor-topo-4numa-virtual-switches-ffff-busids.xml"
H100 = "nccl_topo_xml/h100-oci-bm-gpu-h100-8-dump-nvswitch-4-targets-5-5-4-4-switch-links-5gts-16-rdma-ports.xml"
RTX3090_GRAPH = "nccl_graph_xml/rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml"


def _changed(real_id: str, change: Any) -> RealFile:
    real = FILES[real_id]
    facts = copy.deepcopy(real.facts)
    change(facts["read"])
    return RealFile(real.path, facts)


def test_all_twenty_xml_files_hold_their_facts() -> None:
    assert len(FILES) == 20
    for real in FILES.values():
        outcome = run(real)
        assert not outcome.failed and len(outcome.held) >= 10, (real.id, outcome.failed)


@pytest.mark.parametrize(("real_id", "change"), [
    (NDV4, lambda read: read.__setitem__("gpus", 7)),
    (NDV4, lambda read: read["nics"].reverse()),
    (NDV4, lambda read: read["cpus_numa"][0].__setitem__("switch", "ffff:ff:02.0")),
    (NDV4, lambda read: read["cpus_numa"][1]["gpus"].__setitem__(0, "0003")),
    (NDV4, lambda read: read.__setitem__("pci_link_speeds", ["8 GT/s x16 everywhere"])),
    (H100, lambda read: read.__setitem__("nic_speed", 200000)),
    (H100, lambda read: read.__setitem__("nvlinks", read["nvlinks"].replace("5+5+4+4 = 18", "5+5+4+3 = 17"))),
    (H100, lambda read: read["cpus_numa"][0].__setitem__("affinity", "ff")),
    (RTX3090_GRAPH, lambda read: read["graphs"][0].__setitem__("speedintra", 5)),
    (RTX3090_GRAPH, lambda read: read["graphs"][0]["channels"][0].__setitem__(1, 1)),
    (RTX3090_GRAPH, lambda read: read["graphs"][2].__setitem__("pattern", 5)),
])
def test_a_wrong_fact_fails(real_id: str, change: Any) -> None:
    assert run(_changed(real_id, change)).failed


def test_an_unknown_fact_or_wording_is_no_silent_pass() -> None:
    assert run(_changed(NDV4, lambda read: read.__setitem__("made_up", 1))).failed
    with pytest.raises(AssertionError, match="no rule reads this wording"):
        run(_changed(H100, lambda read: read.__setitem__("nic_pci", "eight NICs")))
