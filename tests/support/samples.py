"""Test helpers for the sample machines: read the GPU rows of a real `nvidia-smi topo -m` fixture.

Deliberately tiny and independent of the project's own reader, so the samples are checked
against the fixture text and not against code under test.
"""

from __future__ import annotations

from support.paths import FIXTURES

REAL_TOPO_DIR = FIXTURES / "real" / "topo"


def fixture_gpu_rows(file_name: str) -> tuple[list[list[str]], list[list[str]]]:
    """(GPU x GPU tokens, GPU x NIC tokens) of a real topo fixture whose matrix is whitespace-separated."""
    lines = [line for line in (REAL_TOPO_DIR / file_name).read_text().splitlines() if not line.startswith("#")]
    header_at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"])
    header = lines[header_at].split()
    gpu_count = sum(1 for name in header if name.startswith("GPU") and name[3:].isdigit())
    nic_count = sum(1 for name in header if name.startswith(("NIC", "mlx5")))
    gpu_matrix: list[list[str]] = []
    gpu_nic: list[list[str]] = []
    for line in lines[header_at + 1 :]:
        fields = line.split()
        if fields and fields[0].startswith("GPU") and fields[0][3:].isdigit() and len(fields) > gpu_count:
            gpu_matrix.append(fields[1 : 1 + gpu_count])
            gpu_nic.append(fields[1 + gpu_count : 1 + gpu_count + nic_count])
    return gpu_matrix, gpu_nic
