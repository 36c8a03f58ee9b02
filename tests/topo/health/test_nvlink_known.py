"""NVLink rules that know what they cannot know: a lone GPU without a bridge is a layout, and GPUs of unknown model
are not compared as identical peers."""

from __future__ import annotations

import dataclasses

from linkscope.topo.formats.source import load_source
from linkscope.topo.health.finding import HealthContext
from linkscope.topo.health.rules import run_health
from support.paths import REAL

THREE_GPU = REAL / "topo" / "rtx-a6000-3gpu-nv4-pair-phb-2nic.txt"


def test_a_topology_text_with_one_bridged_pair_raises_no_hardware_fault() -> None:
    """GPU0-GPU1 NV4, GPU2 NODE to both (read by hand), no GPU model in the text: no error, an info saying the
    fewer-links rule could not judge, with the counts."""
    findings = run_health(HealthContext(load_source(str(THREE_GPU))))
    assert not [finding for finding in findings if finding.severity == "error"]
    not_judged = [finding for finding in findings if finding.code == "nvlink-not-judged"]
    assert len(not_judged) == 1 and not_judged[0].severity == "info"
    assert "GPU 2: 0 NVLink(s)" in not_judged[0].evidence


def test_a_lone_unbridged_gpu_of_a_known_model_is_a_layout_not_a_fault() -> None:
    """The same box with its model known (as NVML would name it): GPU2 has no NVLink and none is listed down, so
    `nvlink-unbridged` (info), never `nvlink-fewer-links`."""
    snapshot = load_source(str(THREE_GPU))
    host = snapshot.host
    named = dataclasses.replace(host, gpus=tuple(dataclasses.replace(gpu, name="NVIDIA RTX A6000") for gpu in host.gpus))
    findings = run_health(HealthContext(dataclasses.replace(snapshot, hosts=(named,))))
    codes = {finding.code: finding for finding in findings}
    assert "nvlink-fewer-links" not in codes
    assert codes["nvlink-unbridged"].severity == "info" and codes["nvlink-unbridged"].gpus == (2,)
