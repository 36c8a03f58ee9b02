"""Builders of synthetic `nvidia-smi topo -m` text for the reader's tests and benchmark.

A machine is described by its device labels and a symmetric token matrix; `render_topo`
prints it the way nvidia-smi does (or with any other separator), so a test can compare what
the reader returns against the matrix it was built from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass(frozen=True)
class SyntheticTopo:
    """A generated machine: labels, the full device matrix, GPU affinity values and NIC names."""

    labels: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    """Device x device, in `labels` order."""
    gpu_values: tuple[tuple[str, ...], ...]
    """Per GPU row, one value per affinity column."""
    nic_names: tuple[str, ...]

    @property
    def gpu_count(self) -> int:
        """Number of GPU labels."""
        return sum(1 for label in self.labels if label.startswith("GPU"))

    def gpu_matrix(self) -> list[list[str]]:
        """The GPU x GPU part of the matrix."""
        count = self.gpu_count
        return [list(row[:count]) for row in self.tokens[:count]]

    def gpu_nic(self) -> list[list[str]]:
        """The GPU x NIC part of the matrix."""
        count = self.gpu_count
        return [list(row[count:]) for row in self.tokens[:count]]


def dgx_like(gpu_count: int, nic_count: int, gpu_token: str = "NV18") -> SyntheticTopo:
    """A two-socket box: GPUs joined by `gpu_token`, NIC k next to GPU k mod gpu_count (PIX), NODE/SYS otherwise."""
    labels = tuple([f"GPU{i}" for i in range(gpu_count)] + [f"NIC{k}" for k in range(nic_count)])
    half = max(gpu_count // 2, 1)

    def socket(label: str) -> int:
        number = int(label[3:])
        return (number if label.startswith("GPU") else number % gpu_count) // half

    def token(a: str, b: str) -> str:
        if a == b:
            return "X"
        if a.startswith("GPU") and b.startswith("GPU"):
            return gpu_token
        near_a = int(a[3:]) % gpu_count if a.startswith("NIC") else int(a[3:])
        near_b = int(b[3:]) % gpu_count if b.startswith("NIC") else int(b[3:])
        if near_a == near_b:
            return "PIX"
        return "NODE" if socket(a) == socket(b) else "SYS"

    tokens = tuple(tuple(token(a, b) for b in labels) for a in labels)
    values = tuple(("0-55,112-167", "0", "N/A") if i < half else ("56-111,168-223", "1", "N/A") for i in range(gpu_count))
    return SyntheticTopo(labels, tokens, values, tuple(f"mlx5_{k}" for k in range(nic_count)))


def render_topo(
    topo: SyntheticTopo,
    separator: Callable[[int, int], str] | str = "\t",
    value_columns: Sequence[str] = AFFINITY_COLUMNS,
    legend: bool = True,
) -> str:
    """Print `topo` like `nvidia-smi topo -m`; `separator(row, column)` may vary the gap per cell."""

    def gap(row: int, column: int) -> str:
        return separator(row, column) if callable(separator) else separator

    header = "".join(gap(-1, c) + label for c, label in enumerate([*topo.labels, *value_columns]))
    lines = [header]
    for r, label in enumerate(topo.labels):
        cells = [" X " if token == "X" else token for token in topo.tokens[r]]
        if r < topo.gpu_count:
            cells.extend(topo.gpu_values[r][: len(value_columns)])
        lines.append(label + "".join(gap(r, c) + cell for c, cell in enumerate(cells)))
    if legend and len(topo.labels) > topo.gpu_count:
        lines += ["", "NIC Legend:", ""]
        lines += [f"  NIC{k}: {name}" for k, name in enumerate(topo.nic_names)]
    return "\n".join(lines) + "\n"
