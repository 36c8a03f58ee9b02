"""The health rules `linkscope doctor` runs (and `check` reuses for the GPUs a layout places ranks on).

| code | severity | when |
|---|---|---|
| `nvlink-fewer-links` | error | a GPU has fewer NVLinks up than the identical GPUs beside it (NV16 among NV18) |
| `nvlink-unbridged` | info | a GPU with no NVLink (none listed down) beside bridged GPUs of its model: a layout |
| `nvlink-not-judged` | info / warning | NVLink counts differ but the GPU model is unknown (topology text) |
| `nvlink-links-down` | warning | NVLink ports down on a GPU that uses NVLink (not already the above) |
| `nvlink-errors-growing` | warning | NVLink CRC / replay / recovery counters grew during a recording |
| `nvlink-fabric-incomplete` | error | the NVSwitch fabric manager has not registered the GPUs |
| `pcie-width-reduced` | warning | a PCIe link narrower than its maximum (x8 of x16) |
| `pcie-gen-low-under-load` | warning | a PCIe generation below the maximum while moving data (recording; idle Gen1 is normal) |
| `nic-numa-mismatch` | warning | a GPU's nearest NIC sits on another NUMA node |
| `cpu-binding-far` | warning | this process is bound to CPUs away from its GPU (this machine only) |
| `p2p-off` | error / warning | GPU pairs that could copy peer to peer do not (NVLink pairs: error) |
| `iommu-translates-p2p` | warning | a translating IOMMU with PCIe peer traffic or RDMA NICs |
| `mig-enabled` | warning | MIG mode on a GPU |
| `peermem-missing` | warning | RDMA NICs without the nvidia_peermem module |
| `env-*` | warning / info | NCCL_* or CUDA_VISIBLE_DEVICES settings that change NCCL's paths |
| `worse-than-baseline` | warning | a fact worse than in the `--baseline` snapshot |
| `measured-below-expected` | warning / error | measurements below 75% of what their links should deliver (under 50%: error) |
| `measured-above-model` | warning | measurements above 125% of the model: the model or the assumed placement is wrong |
| `measurements-not-judged` | warning | measurements given, none could be placed and priced on the SOURCE |
| `host-*` | error / warning / info | on a cluster, the odd node out (:mod:`topo.health.cluster`) |
| `nccl-pcie-path-slow` | warning | NCCL prices a GPU's PCIe path far below its link (`PCI[0.2]`: an emulated x1 port) |
| `nccl-pcie-speed-unknown` | warning | NCCL sees PCIe ports above GPUs without a link speed it knows (assumes Gen3) |
| `nccl-pcie-width-unknown` | info / warning | NCCL sees ports without link width (assumes x16; warning where NVML reads less) |
| `nccl-nvlink-not-seen` / `nccl-nvswitch-not-seen` | error / warning | NVLinks or NVSwitches NVML has and NCCL does not |
| `nccl-affinity-differs` | warning | NCCL puts a GPU or NIC under another CPU than NVML/sysfs |
| `nccl-nic-no-gdr` | warning | NCCL marks RDMA NICs without GPUDirect RDMA |

A new rule is one function `HealthContext -> Iterable[HealthFinding]` added to RULES.
"""

from __future__ import annotations

from linkscope.topo.health.affinity import cpu_binding_far, nic_numa_mismatch
from linkscope.topo.health.baseline import worse_than_baseline
from linkscope.topo.health.cluster import cross_host
from linkscope.topo.health.environment import cuda_visible_reordered, nccl_environment
from linkscope.topo.health.finding import HealthContext, HealthFinding, Rule
from linkscope.topo.health.measured import measured_below_expected
from linkscope.topo.health.nccl_view import nccl_view_differs
from linkscope.topo.health.nvlink import nvlink_errors_growing, nvlink_fabric_incomplete, nvlink_fewer_links, nvlink_links_down
from linkscope.topo.health.pcie import pcie_gen_low_under_load, pcie_width_reduced
from linkscope.topo.health.platform import iommu_translates_p2p, mig_enabled, p2p_off, peermem_missing
from linkscope.topo.model.findings import SEVERITIES

RULES: tuple[Rule, ...] = (
    nvlink_fewer_links,
    nvlink_links_down,
    nvlink_errors_growing,
    nvlink_fabric_incomplete,
    pcie_width_reduced,
    pcie_gen_low_under_load,
    nic_numa_mismatch,
    cpu_binding_far,
    p2p_off,
    iommu_translates_p2p,
    mig_enabled,
    peermem_missing,
    nccl_environment,
    cuda_visible_reordered,
    worse_than_baseline,
    measured_below_expected,
    cross_host,
    nccl_view_differs,
)
"""Every health rule, in the order their findings are listed (before sorting by severity)."""


def run_health(context: HealthContext, rules: tuple[Rule, ...] = RULES) -> tuple[HealthFinding, ...]:
    """Run `rules` over `context`; findings most severe first, in rule order within a severity."""
    findings = [finding for rule in rules for finding in rule(context)]
    findings.sort(key=lambda finding: -SEVERITIES.index(finding.severity))
    return tuple(findings)
