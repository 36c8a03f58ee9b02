"""PCIe generation where the source does not say it: a topology text names no GPU model, but its NVLinks tell
the GPU generation (NVLink2: V100, Gen3; NVLink3: A100, Gen4; NVLink4: H100, Gen5)."""

from __future__ import annotations

import pytest

from linkscope.topo.formats.source import load_source
from linkscope.topo.machine.links import gpu_pcie_speed, link_speed
from linkscope.topo.model.host import LinkKind
from linkscope.topo.samples import load_sample
from support.paths import FIXTURES

TOPO = FIXTURES / "real" / "topo"


@pytest.mark.parametrize("name, generation", [
    ("v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt", 3),
    ("a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt", 4),
    ("h100-8gpu-nv18-13nic-named-ib-eth.txt", 5),
])
def test_generation_from_the_nvlinks_of_a_topology_text(name: str, generation: int) -> None:
    host = load_source(str(TOPO / name)).host
    assert all(gpu_pcie_speed(host, position).basis.startswith(f"PCIe Gen{generation} ") for position in range(len(host.gpus)))


def test_topology_text_and_probed_sample_of_one_machine_agree() -> None:
    """The DGX-1 V100 text and the dgx1-v100 sample (which names its GPUs) price SYS alike."""
    text = load_source(str(TOPO / "v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt")).host
    sample = load_sample("dgx1-v100").host
    sys_text = next(link for link in text.links if link.kind is LinkKind.SYS)
    sys_sample = next(link for link in sample.links if link.kind is LinkKind.SYS)
    assert link_speed(text, sys_text).spec_gbps == pytest.approx(link_speed(sample, sys_sample).spec_gbps)
