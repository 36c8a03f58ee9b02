"""What a health rule sees and what it says: the context of one `doctor` run, and a finding.

A rule is a plain function `HealthContext -> Iterable[HealthFinding]`; the registry in
:mod:`topo.health.rules` lists them. Rules read only the context (snapshot, measurements,
recording, baseline, environment), never the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from linkscope.topo.common.frozen import frozen
from linkscope.topo.common.limits import MAX_EVIDENCE
from linkscope.topo.model.findings import Finding
from linkscope.topo.model.host import Gpu
from linkscope.topo.model.measurements import Measurements
from linkscope.topo.model.snapshot import Snapshot

if TYPE_CHECKING:  # NCCL's topology readers load only for a run that has NCCL's view
    from linkscope.topo.formats.nccl_topo_model import NcclTopology


@frozen
class HealthFinding(Finding):
    """One health problem: which GPUs, what is wrong, the facts that show it, and what to do."""

    host: str
    gpus: tuple[int, ...]
    """NVML indices of the GPUs concerned on `host` (empty: the host as a whole)."""
    message: str
    evidence: tuple[str, ...] = ()
    """The facts read (or measured) that show it, one per line."""
    fix: str = ""

    def gpu_labels(self, qualified: bool) -> list[int | str]:
        """`gpus` as the JSON contract spells them: indices, or `host:index` on a cluster snapshot."""
        return [f"{self.host}:{index}" for index in self.gpus] if qualified else list(self.gpus)

    def to_json(self, qualified: bool = False) -> dict[str, Any]:
        """The finding as `doctor --json` prints it (`gpus` qualified by host on a cluster snapshot)."""
        return {**super().to_json(), "gpus": self.gpu_labels(qualified)}


@frozen
class HealthContext:
    """Everything the rules may read about one doctor run."""

    snapshot: Snapshot
    measurements: Measurements | None = None
    """Measurements to judge (`--measurements`, else those the snapshot carries)."""
    baseline: Snapshot | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables that steer NCCL and CUDA (this process's or an `--env-file`)."""
    cuda_order: tuple[int, ...] | None = None
    """NVML indices of the GPUs in the order CUDA numbers them under `env` (None: every GPU, NVML order)."""
    cpu_binding: frozenset[int] | None = None
    """CPUs this process may run on; only set when doctoring this machine."""
    local_rank: int | None = None
    """`LOCAL_RANK` from `env`: which visible GPU this process would use."""
    nccl_topology: NcclTopology | None = None
    """NCCL's own view of the machine (`--nccl-topo`: its topology dump or file, or a debug log's tree)."""


Rule = Callable[[HealthContext], Iterable[HealthFinding]]
"""A health rule: reads the context, yields findings."""


def evidence_lines(lines: Iterable[str]) -> tuple[str, ...]:
    """At most MAX_EVIDENCE lines, the last one counting what was left out."""
    found = list(lines)
    if len(found) <= MAX_EVIDENCE:
        return tuple(found)
    return (*found[: MAX_EVIDENCE - 1], f"... and {len(found) - MAX_EVIDENCE + 1} more")


def gpu_label(gpu: Gpu) -> str:
    """`GPU3`, as nvidia-smi names a GPU by its NVML index."""
    return f"GPU{gpu.index}"


def index_list(indices: Iterable[int]) -> str:
    """`GPU 1, 3 and 5` for people."""
    names = [str(index) for index in sorted(set(indices))]
    if not names:
        return "no GPU"
    if len(names) == 1:
        return f"GPU {names[0]}"
    return f"GPUs {', '.join(names[:-1])} and {names[-1]}"
