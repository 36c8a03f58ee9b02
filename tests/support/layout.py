"""Helpers for the layout / cost / check tests: small hosts built from the model, and CLI runs."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest

from linkscope.cli import main
from linkscope.topo.model.host import Gpu, Host, Link, Nic, parse_link_token
from linkscope.topo.model.snapshot import Snapshot


def host_from_matrix(rows: Sequence[str], name: str = "box", gpu_name: str = "NVIDIA A100-SXM4-80GB",
                     nic_tokens: Sequence[str] | None = None, nic_gbit: float = 200.0) -> Host:
    """A host whose GPU x GPU links are the given `nvidia-smi topo -m` rows (`X NV12 SYS ...`).

    `nic_tokens` gives one NIC per GPU-row token list column: for each GPU a space-separated row
    of GPU -> NIC tokens.
    """
    matrix = [row.split() for row in rows]
    count = len(matrix)
    links = []
    for a, b in itertools.combinations(range(count), 2):
        kind, nvlinks = parse_link_token(matrix[a][b])
        links.append(Link(a, b, kind, nvlinks))
    gpus = tuple(Gpu(index, gpu_name) for index in range(count))
    nics: tuple[Nic, ...] = ()
    gpu_nic: tuple[tuple[str, ...], ...] = ()
    if nic_tokens is not None:
        table = [row.split() for row in nic_tokens]
        nics = tuple(Nic(f"mlx5_{column}", rate_gbit_per_s=nic_gbit, state="ACTIVE") for column in range(len(table[0])))
        gpu_nic = tuple(tuple(row) for row in table)
    return Host(name, gpus, tuple(links), nics, gpu_nic)


def snapshot_of(*hosts: Host) -> Snapshot:
    """A snapshot of the given hosts."""
    return Snapshot(hosts=tuple(hosts), source="test")


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `linkscope ARGV` in-process; return (exit status, stdout, stderr)."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    """Bad input: exit 2, exactly one line on stderr naming the problem, no traceback."""
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("linkscope: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


NVLINK_PAIRS_4 = ("X NV12 SYS SYS", "NV12 X SYS SYS", "SYS SYS X NV12", "SYS SYS NV12 X")
"""Four GPUs with NVLink bridges in pairs (0-1, 2-3), every other pair across sockets."""


def reference_groups(order: list[str], sizes: dict[str, int], along: set[str]) -> list[list[int]]:
    """Group every rank by its coordinates outside `along` (first order dimension fastest)."""
    world = math.prod(sizes[dim] for dim in order)
    stride, strides = 1, {}
    for dim in order:
        strides[dim] = stride
        stride *= sizes[dim]
    buckets: dict[tuple[int, ...], list[int]] = {}
    for rank in range(world):
        key = tuple((rank // strides[dim]) % sizes[dim] for dim in order if dim not in along)
        buckets.setdefault(key, []).append(rank)
    return sorted((sorted(group) for group in buckets.values()), key=lambda group: group[0])
