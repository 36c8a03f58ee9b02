"""Published nccl-tests results and the machines they ran on: the evidence the cost model is checked against.

Each row is a large-message result someone published (a GitHub issue of NVIDIA/nccl or
NVIDIA/nccl-tests, the shared real fixtures), the topology it is priced on (a built-in sample or a
saved `nvidia-smi topo -m`), and the changes the source itself states (fewer NVLinks, another GPU
model). :func:`price` runs the one pricing function on it; a test holds every row within
TOLERANCE unless the row says why it is an outlier (a misconfigured or constrained box), and the
README's table is this module's table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.collectives import Cost, collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import load_source, read_text_file
from linkscope.topo.layout.placement import Placement
from linkscope.topo.model.host import Host, LinkKind, P2PStatus

TOLERANCE = 0.20
"""Predicted busbw within this share of the published figure."""

GIB = 1 << 30


@dataclass(frozen=True)
class Published:
    """One published nccl-tests result and where to price it."""

    machine: str
    source: str
    op: str
    size_bytes: int
    ranks: int
    nodes: int
    busbw_gbps: float
    topology: str
    """A SOURCE (`sample:NAME`, or a saved topology path relative to the repository root)."""
    algo: str = "auto"
    """`auto`, or the NCCL_ALGO the run forced."""
    changes: tuple[str, ...] = ()
    """What the source states that differs from the topology: `nvlinks=8`, `gpu=NAME`, `no-p2p`."""
    measurements: str = ""
    """A measurement file of the same machine (repository-relative) to calibrate the model with."""
    outlier: str = ""
    """Why this row is not held to TOLERANCE: a misconfigured or constrained box, or a limit of the model
    said plainly (never a refit); empty for the rows the model must meet."""


PUBLISHED: tuple[Published, ...] = (
    Published("8x H100 SXM, NVSwitch (NVLS, default)", "NVIDIA/nccl-tests #212 (NCCL maintainer: peak busbw ~480)",
              "all_reduce", 8 * GIB, 8, 1, 480.0, "sample:dgx-h100"),
    Published("8x H100 SXM, NVSwitch, NCCL_ALGO=RING", "NVIDIA/nccl-tests #212 (NCCL maintainer: ~370 with rings)",
              "all_reduce", 8 * GIB, 8, 1, 370.0, "sample:dgx-h100", algo="ring"),
    Published("8x H200, NVSwitch (NVLS)", "NVIDIA/nccl-tests #272 (peak busbw 475, NCCL 2.20.3)",
              "all_reduce", 4 * GIB, 8, 1, 475.0, "sample:dgx-h100"),
    Published("8x H800 (8 NVLinks), NVSwitch (NVLS)", "NVIDIA/nccl #1374 (busbw 215)",
              "all_reduce", 8 * GIB, 8, 1, 215.0, "sample:dgx-h100", changes=("nvlinks=8",)),
    Published("8x A100 SXM4 80GB, NVSwitch (HPE Apollo 6500)", "NVIDIA/nccl-tests #149 (busbw ~200 at 1 GiB, 8 threads)",
              "all_reduce", 1 * GIB, 8, 1, 200.0, "sample:dgx-a100"),
    Published("2x A100 PCIe, NVLink bridge (NV12)", "NVIDIA/nccl-tests #178 (busbw 208, the bridged pair)",
              "all_reduce", 12 * GIB, 2, 1, 208.0, "sample:a100-pcie-nvbridge-4"),
    Published("8x A100 SXM, NVSwitch, sendrecv ring", "shared fixture nccl_tests/a100-8gpu-nvswitch-sendrecv-truncated.txt",
              "send_recv", 1 * GIB, 8, 1, 195.1, "sample:dgx-a100",
              outlier=("a limit of the model: point-to-point runs fewer channels than collectives; "
                       "the model prices one full NVLink hop")),
    Published("4x DGX-1 (V100 hybrid cube mesh), 4x EDR each", "NVIDIA/nccl-tests #29 (NVIDIA's GTC 2017 NCCL talk: ~40)",
              "all_reduce", 512 << 20, 32, 4, 40.0, "sample:dgx1-v100"),
    Published("4x 8 V100, 2 NVLinks, 4x EDR (not a DGX-1)", "NVIDIA/nccl-tests #29 (the reporter's own run: ~6)",
              "all_reduce", 512 << 20, 32, 4, 6.0, "sample:dgx1-v100",
              outlier=("misconfigured: the reporter's cluster, not a DGX-1, at a fifth of what NCCL reaches "
                       "on DGX-1s with the same 4 EDR")),
    Published("2x 8 H200, 8x 400G RoCE each, bare metal", "shared fixture nccl_tests/h200-2node-16gpu-baremetal-all_reduce.txt "
              "(NVIDIA/nccl-tests #256)", "all_reduce", 9663676416, 16, 2, 488.81, "sample:dgx-h100"),
    Published("4x 8 H100, 8x 400G RoCE each", "NVIDIA/nccl #1221 (busbw ~320 from 3 nodes up, NVLS on or off)",
              "all_reduce", 8 * GIB, 32, 4, 320.0, "sample:dgx-h100"),
    Published("4x RTX 5090, PCIe Gen5, no P2P (2x Xeon 8480+)", "NVIDIA/nccl #1639 (busbw 35; sets HOST_PATH_FRACTION)",
              "all_reduce", 8 * GIB, 4, 1, 35.0, "sample:pcie-l40s-8", changes=("gpu=NVIDIA GeForce RTX 5090", "no-p2p")),
    Published("8x RTX 5090, PCIe Gen5, no P2P (2x Xeon 8480+)", "NVIDIA/nccl #1639 (busbw 28; sets HOST_MEMORY_GBPS)",
              "all_reduce", 8 * GIB, 8, 1, 28.0, "sample:pcie-l40s-8", changes=("gpu=NVIDIA GeForce RTX 5090", "no-p2p")),
    Published("2x RTX 2080 Ti, PCIe Gen3 switch, no P2P (cloud container)",
              "shared fixture nccl_tests/rtx2080ti-2gpu-pcie-no-p2p-5-collectives.txt", "all_reduce", GIB, 2, 1, 4.0,
              "tests/fixtures/real/topo/rtx2080ti-2gpu-pix-p2p-not-supported.txt", changes=("gpu=NVIDIA GeForce RTX 2080 Ti",),
              outlier="constrained host: its own staged copies run at 5.7 GB/s (p2p fixture), under half of Gen3 x16"),
    Published("2x RTX 2080 Ti, as above, calibrated with its measured copies",
              "shared fixtures nccl_tests/ and p2p/rtx2080ti-2gpu-p2pBandwidthLatencyTest-no-p2p.txt", "all_reduce", GIB, 2, 1,
              4.0, "tests/fixtures/real/topo/rtx2080ti-2gpu-pix-p2p-not-supported.txt",
              changes=("gpu=NVIDIA GeForce RTX 2080 Ti",),
              measurements="tests/fixtures/real/p2p/rtx2080ti-2gpu-p2pBandwidthLatencyTest-no-p2p.txt"),
)
"""The evidence table, in the order the README shows it."""


def _change(host: Host, change: str) -> Host:
    """Apply one stated difference to a host (see Published.changes)."""
    key, _, value = change.partition("=")
    if key == "nvlinks":
        links = tuple(dataclasses.replace(link, nvlink_count=int(value)) if link.kind is LinkKind.NVLINK else link
                      for link in host.links)
        return dataclasses.replace(host, links=links)
    if key == "gpu":
        gpus = tuple(dataclasses.replace(gpu, name=value, pcie_gen_max=None, pcie_gen_current=None) for gpu in host.gpus)
        return dataclasses.replace(host, gpus=gpus)
    if key == "no-p2p":
        none = P2PStatus(read="NS", write="NS")
        links = tuple(link if link.kind is LinkKind.NVLINK else dataclasses.replace(link, p2p=none) for link in host.links)
        return dataclasses.replace(host, links=links)
    raise ValueError(f"unknown change {change!r}")


def price(row: Published, root: Path) -> Cost:
    """The model's prediction for `row`, block placement of its ranks on its topology (paths under `root`)."""
    spec = row.topology if row.topology.startswith("sample:") else str(root / row.topology)
    host = load_source(spec).host
    for change in row.changes:
        host = _change(host, change)
    model = CostModel()
    if row.measurements:
        path = root / row.measurements
        model = calibrate(model, read_measurements(read_text_file(str(path)), path.name), host)
    per_node = row.ranks // row.nodes
    placement = Placement((host,) * row.nodes, (0,) * row.nodes, tuple(r // per_node for r in range(row.ranks)),
                          tuple(r % per_node for r in range(row.ranks)), "block")
    links = GroupPricer(placement, model).links(range(row.ranks))
    return collective_cost(row.op, links, row.size_bytes, row.algo)


def markdown_table(root: Path) -> str:
    """The evidence table as the README shows it: published busbw, predicted, ratio, and the algorithm priced."""
    lines = ["| machine | op, size | published busbw | predicted | ratio | algorithm | source |",
             "|---|---|---:|---:|---:|---|---|"]
    for row in PUBLISHED:
        cost = price(row, root)
        ratio = cost.busbw_gbps / row.busbw_gbps
        note = f" (not held to {TOLERANCE:.0%}, {row.outlier})" if row.outlier else ""
        size = f"{row.size_bytes / GIB:g} GiB" if row.size_bytes >= GIB else f"{row.size_bytes >> 20} MiB"
        lines.append(f"| {row.machine}{note} | {row.op} {size}, {row.ranks} ranks | {row.busbw_gbps:g} | "
                     f"{cost.busbw_gbps:.0f} | {ratio:.2f} | {cost.algo} | {row.source} |")
    return "\n".join(lines)
