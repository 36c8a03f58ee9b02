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
from pathlib import Path

from linkscope.topo.common.frozen import frozen
from linkscope.topo.cost.calibrate import calibrate
from linkscope.topo.cost.collectives import Cost, collective_cost
from linkscope.topo.cost.groups import GroupPricer
from linkscope.topo.cost.params import CostModel
from linkscope.topo.formats.results import read_measurements
from linkscope.topo.formats.source import load_source, read_text_file
from linkscope.topo.layout.placement import Placement
from linkscope.topo.machine.cluster import domain_hosts
from linkscope.topo.model.host import Host, LinkKind, Nic, P2PStatus
from linkscope.topo.model.snapshot import Snapshot

TOLERANCE = 0.20
"""Predicted busbw within this share of the published figure."""

GIB = 1 << 30


@frozen
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
    """What the source states that differs from the topology: `nvlinks=8`, `gpu=NAME`, `no-p2p`, `fabric=RoCE`
    (`InfiniBand`, `RoCE`, `gIB`, `EFA`: the fabric of its NICs)."""
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
              "(NVIDIA/nccl-tests #256)", "all_reduce", 9663676416, 16, 2, 488.81, "sample:dgx-h100",
              changes=("fabric=RoCE",)),
    Published("4x 8 H100, 8x 400G RoCE each", "NVIDIA/nccl #1221 (busbw ~320 from 3 nodes up, NVLS on or off)",
              "all_reduce", 8 * GIB, 32, 4, 320.0, "sample:dgx-h100", changes=("fabric=RoCE",)),
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
    Published("4x H100 SXM, NVSwitch, NCCL_ALGO=NVLS (no gain below 5 GPUs)", "NVIDIA/nccl #1455 (NVLS busbw 365-370 "
              "from 2 to 4 GPUs, as rings)", "all_reduce", 4 * GIB, 4, 1, 368.0, "sample:dgx-h100", algo="nvls"),
    Published("5x H100 SXM, NVSwitch, NCCL_ALGO=NVLS", "NVIDIA/nccl #1455 (NVLS busbw 420 at 5 GPUs, 440, 460, 480 at 6-8)",
              "all_reduce", 4 * GIB, 5, 1, 420.0, "sample:dgx-h100", algo="nvls"),
    Published("8x H100 SXM, NVSwitch, all_gather", "corpus nccl_tests/h100-1node-8rank-five-collectives-one-file.txt "
              "(xxrjun/nccl-tests-cluster)", "all_gather", 16 * GIB, 8, 1, 366.03, "sample:dgx-h100"),
    Published("8x H100 SXM, NVSwitch, all_to_all", "corpus nccl_tests/h100-1node-8rank-five-collectives-one-file.txt "
              "(xxrjun/nccl-tests-cluster)", "all_to_all", 16 * GIB, 8, 1, 348.03, "sample:dgx-h100"),
    Published("8x B300 SXM, NVLink 5 NVSwitch (NVLS, default)", "NVIDIA/nccl #2140 (busbw 845 with NVLS, NCCL 2.30.4)",
              "all_reduce", 8 * GIB, 8, 1, 845.0, "sample:b200-hgx", changes=("gpu=NVIDIA B300 SXM6 AC",)),
    Published("8x B300 SXM, NVLink 5 NVSwitch, NVLS off", "NVIDIA/nccl #2140 (busbw 695 without NVLS)",
              "all_reduce", 8 * GIB, 8, 1, 695.0, "sample:b200-hgx", algo="ring", changes=("gpu=NVIDIA B300 SXM6 AC",)),
    Published("2x B200 in one GKE pod (NVIDIA DRA), NVLink 5", "corpus nccl_tests/b200-gke-nvidia-dra-1pod-2rank-all_gather-"
              "elided-small-sizes-no-footer-algbw-over-1000.txt (google/dranet)", "all_gather", 8 * GIB, 2, 1, 564.14,
              "sample:b200-hgx",
              outlier=("below its plateau: busbw still climbs at the largest size run (8 GiB in-place 564, out-of-place "
                       "483), 2 of a node's 8 GPUs in a pod; the model prices NCCL's 18 x 40.1 GB/s ring, which 8x B300 "
                       "reach within 4% (695, NVIDIA/nccl #2140)")),
    Published("2x 8 B200, 8x 400G InfiniBand each (Lambda)", "corpus nccl_tests/b200-lambda-2node-16rank-dstack-hash-less-"
              "all_reduce.txt (dstackai/dstack)", "all_reduce", 2 * GIB, 16, 2, 702.91, "sample:b200-hgx"),
    Published("2x 8 B200, 8x 400G gIB each (GCP A4)", "corpus nccl_tests/b200-gcp-a4-2node-16rank-dstack-hash-less-header-"
              "all_reduce.txt (dstackai/dstack)", "all_reduce", 8 * GIB, 16, 2, 683.52, "sample:b200-hgx",
              changes=("fabric=gIB",)),
    Published("2x 8 B200, 8x 400G gIB each (GCP A4, GKE)", "corpus nccl_tests/b200-gcp-a4-gke-dranet-kubectl-exec-run-nccl-"
              "tests-t-all_gather-16rank-ssh-banner-version-after-ranks.txt (google/dranet)", "all_gather", 2 * GIB, 16, 2,
              268.59, "sample:b200-hgx", changes=("fabric=gIB",)),
    Published("2 pods x 1 B200 + one 400G gIB NIC (GCP A4)", "corpus nccl_tests/b200-gke-dranet-2pod-2rank-1gpu-each-"
              "kubectl-exec-all_gather-size-0-rows-blank-line-after-command.txt (google/dranet)", "all_gather", GIB, 2, 2,
              45.14, "sample:b200-hgx", changes=("fabric=gIB",)),
    Published("2 pods x 1 H200 + one 400G gIB NIC (GCP A3 Ultra)", "corpus nccl_tests/h200-gke-mpi-operator-dranet-2rank-"
              "kubectl-logs-set-x-mpirun-bash-c-openmpi-openib-warnings-all_reduce.txt (google/dranet)", "all_reduce",
              8 * GIB, 2, 2, 31.89, "sample:dgx-h100", changes=("fabric=gIB",)),
    Published("2x 8 H200, 8x 400G gIB each (GCP A3 Ultra, SkyPilot)", "shared fixture nccl_tests/h200-gcp-a3ultra-2node-"
              "16gpu-skypilot-mpirun-double-prefix-all_gather.txt (skypilot-org/skypilot)", "all_gather", 8 * GIB, 16, 2,
              332.58, "sample:dgx-h100", changes=("fabric=gIB",)),
    Published("2x p5.48xlarge (8 H100, 3200 Gb/s EFA each)", "corpus nccl_tests/p5-h100-1node-2node-all_reduce-openmpi-"
              "tagged.txt (aws-samples/aws-do-eks)", "all_reduce", 2 * GIB, 16, 2, 438.85, "sample:dgx-h100",
              changes=("fabric=EFA",)),
    Published("16x p5en.48xlarge (8 H200, 3200 Gb/s EFA each)", "corpus nccl_tests/h200-p5en-128rank-all_reduce-elided-"
              "middle-rows-17gib.txt (aws-samples/awsome-distributed-training)", "all_reduce", 17179869184, 128, 16,
              369.86, "sample:dgx-h100", changes=("fabric=EFA",)),
    Published("2x 8 H100, InfiniBand (Nebius)", "corpus nccl_tests/nebius-2node-16rank-dstack-nccl-debug-env-hash-less-"
              "all_reduce.txt (dstackai/dstack)", "all_reduce", 8 * GIB, 16, 2, 468.46, "sample:dgx-h100"),
    Published("12x 8 H100, InfiniBand with SHARP (CoreWeave)", "corpus nccl_tests/h100-coreweave-mpijob-kubectl-logs-"
              "96rank-sharp-all_reduce-elided.txt (coreweave/nccl-tests)", "all_reduce", 8 * GIB, 96, 12, 386.56,
              "sample:dgx-h100"),
    Published("GB200 NVL72 rack, 72 GPUs on NVLink 5 (CoreWeave)", "shared fixture nccl_tests/gb200-nvl72-full-rack-72rank-"
              "tail-only-last-rank-line-all_reduce.txt (coreweave/nccl-tests #43)", "all_reduce", 8 * GIB, 72, 1, 846.82,
              "sample:gb200-nvl72"),
    Published("GB200 NVL72, 2 trays (8 GPUs) over multi-node NVLink (OCI)", "shared fixture nccl_tests/gb200-nvl72-2node-"
              "8gpu-mnnvl-all_reduce-tail.txt (oracle-quickstart/oci-hpc-oke)", "all_reduce", 32 * GIB, 8, 1, 847.42,
              "sample:gb200-nvl72"),
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
    if key == "fabric":
        nics = tuple(_on_fabric(nic, position, value) for position, nic in enumerate(host.nics))
        return dataclasses.replace(host, nics=nics)
    if key == "no-p2p":
        none = P2PStatus(read="NS", write="NS")
        links = tuple(link if link.kind is LinkKind.NVLINK else dataclasses.replace(link, p2p=none) for link in host.links)
        return dataclasses.replace(host, links=links)
    raise ValueError(f"unknown change {change!r}")


def with_changes(snapshot: Snapshot, changes: tuple[str, ...]) -> Snapshot:
    """`snapshot` with the differences a source states (see Published.changes) applied to every host."""
    hosts = []
    for host in snapshot.hosts:
        for change in changes:
            host = _change(host, change)
        hosts.append(host)
    return dataclasses.replace(snapshot, hosts=tuple(hosts))


def _on_fabric(nic: Nic, position: int, fabric: str) -> Nic:
    """A NIC as the snapshot of a machine on `fabric` would show it (what :func:`topo.cost.params.nic_fabric` reads)."""
    if fabric == "InfiniBand":
        return dataclasses.replace(nic, link_layer="InfiniBand")
    if fabric == "RoCE":
        return dataclasses.replace(nic, link_layer="Ethernet")
    if fabric == "gIB":
        return dataclasses.replace(nic, link_layer="Ethernet", netdev=f"gpu{position}rdma0")
    if fabric == "EFA":
        return dataclasses.replace(nic, name=f"rdmap{16 + position}s0", link_layer=None, netdev=None)
    raise ValueError(f"unknown fabric {fabric!r}")


def price(row: Published, root: Path) -> Cost:
    """The model's prediction for `row`, block placement of its ranks on its topology (paths under `root`)."""
    spec = row.topology if row.topology.startswith("sample:") else str(root / row.topology)
    domains = domain_hosts(load_source(spec))  # a multi-node NVLink domain (GB200 NVL72) prices as one node
    host = domains[0]
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
