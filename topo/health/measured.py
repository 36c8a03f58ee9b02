"""The doctor rules over measurements: rows below what their links should deliver, rows far above the model (the
model or the assumed placement is wrong), and measurements of which nothing could be judged."""

from __future__ import annotations

import re
from collections.abc import Iterator

from linkscope.topo.common.units import format_gbps
from linkscope.topo.cost.expect import (
    ABOVE_MODEL_FRACTION,
    FAR_BELOW_FRACTION,
    SLOW_FRACTION,
    Expected,
    RowExpectations,
    judged_counts,
    row_expectations,
    summary,
    worst_rows,
)
from linkscope.topo.health.finding import HealthContext, HealthFinding, evidence_lines

_GPU = re.compile(r"GPU(\d+)")

_FIX_BY_LIMIT: dict[str, str] = {
    "network": "the group spans hosts: look at the network path - the NICs and rails NCCL uses (NCCL_IB_HCA, "
               "NCCL_SOCKET_IFNAME), GPUDirect RDMA (NCCL_NET_GDR_LEVEL, nvidia_peermem), the GPU<->NIC PCIe path "
               "and, inside VMs, ACS and the topology NCCL sees (NCCL_TOPO_FILE)",
    "shm": "NCCL stages through host memory: P2P is off between these GPUs (NCCL_P2P_DISABLE/NCCL_P2P_LEVEL, ACS/IOMMU, "
           "a VM or consumer GPUs)",
    "host-memory": "copies staged through host memory: peer access is off between these GPUs",
    "pcie": "look at the PCIe path named: a narrow or down-trained link (doctor's pcie findings), P2P off, ACS/IOMMU",
    "nvlink": "look at the NVLinks named: links down (doctor's nvlink findings), NVLink errors, or NCCL settings",
}


def _rows(context: HealthContext) -> RowExpectations | None:
    if context.measurements is None or not context.snapshot.hosts:
        return None
    return row_expectations(context.measurements, context.snapshot)


def _asked(expected: RowExpectations) -> list[Expected | None]:
    return [*expected.collectives, *expected.peer_copies, *expected.host_copies]


def measured_below_expected(context: HealthContext) -> Iterator[HealthFinding]:
    """`measured-below-expected`: judged rows under SLOW_FRACTION of the model (error under FAR_BELOW_FRACTION);
    `measured-above-model`: rows above ABOVE_MODEL_FRACTION of it (a warning naming the assumed placement);
    `measurements-not-judged`: measurements given of which no row could be judged (a warning: never clean)."""
    expected = _rows(context)
    if expected is None:
        return
    every = expected.all()
    host = context.snapshot.host.hostname
    asked = _asked(expected)
    if asked and not judged_counts(asked)["judged"]:
        yield HealthFinding(
            code="measurements-not-judged", severity="warning", host=host, gpus=(),
            message=f"the measurements were not judged: {summary(asked)}",
            evidence=evidence_lines(dict.fromkeys(row.placement or row.note for row in every if row.placement or row.note)),
            fix="give a SOURCE the measurements ran on (a snapshot or `nvidia-smi topo -m` of that machine, or a "
                "cluster) so the ranks can be placed")
    below = [row for row in every if row.verdict in ("slow", "far below")]
    if below:
        worst = worst_rows(below, 1)[0]
        far = [row for row in below if row.verdict == "far below"]
        gpus = tuple(sorted({int(number) for row in below if row.kind != "collective"
                             for number in _GPU.findall(row.subject)}))
        yield HealthFinding(
            code="measured-below-expected",
            severity="error" if far else "warning",
            host=host,
            gpus=gpus,
            message=(f"{len(below)} measurement(s) below {SLOW_FRACTION:.0%} of what their links should deliver "
                     f"({len(far)} below {FAR_BELOW_FRACTION:.0%}); decisive: {_decisive(worst)}"),
            evidence=evidence_lines(_line(row) for row in worst_rows(below, len(below))),
            fix=_FIX_BY_LIMIT.get(worst.limited_by, _FIX_BY_LIMIT["nvlink"])
            + "; re-measure with linkscope bench after fixing",
        )
    above = [row for row in every if row.verdict == "faster than model"]
    if above:
        worst = worst_rows(above, 1)[0]
        yield HealthFinding(
            code="measured-above-model", severity="warning", host=host, gpus=(),
            message=(f"{len(above)} measurement(s) above {ABOVE_MODEL_FRACTION:.0%} of the model: the model or the "
                     f"assumed placement is wrong; decisive: {_decisive(worst)}"),
            evidence=evidence_lines(_line(row) for row in worst_rows(above, len(above))),
            fix="judge against the machine the run used: its snapshot or cluster (an NVLink domain, the right GPUs "
                "per host), so the ranks are placed where they ran")


def _line(row: Expected) -> str:
    ratio = f"{row.ratio:.0%}" if row.ratio is not None else "?"
    expected = f"{row.expected_gbps:.1f}" if row.expected_gbps is not None else "?"
    where = f"limited by {row.limited_by} ({' -> '.join(row.path)})" if row.path else f"over {row.link}"
    return f"{row.subject}: {row.metric} {format_gbps(row.measured_gbps, '.1f')}, expected {expected} ({ratio}), {where}"


def _decisive(row: Expected) -> str:
    """The decisive row with what the model assumed and, across nodes, whether it is about one NIC's worth."""
    nic = next((part for part in row.note.split("; ") if part.startswith("about one NIC")), "")
    placed = f" [{row.placement}]" if row.placement else ""
    return _line(row) + placed + (f"; {nic}" if nic else "")
