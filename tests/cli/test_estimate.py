"""`linkscope estimate`: the DOMAIN worked example through the command line, sizes, bad input."""

from __future__ import annotations

import json

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.sizes import parse_size_bytes
from support.layout import assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("text", "size"),
    [("1073741824", 1 << 30), ("64K", 65536), ("1M", 1 << 20), ("1G", 1 << 30), ("1GiB", 1 << 30), ("1GB", 10**9),
     ("2MiB", 2 << 20), ("512", 512), ("1.5K", 1536), ("4k", 4096)],
)
def test_sizes_read_like_nccl_tests(text: str, size: int) -> None:
    assert parse_size_bytes(text) == size


@pytest.mark.parametrize("text", ["", "1X", "-1", "1.3", "G", "1 G B"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(InputError):
        parse_size_bytes(text, "--bytes")


@pytest.mark.parametrize(
    ("argv", "expected_ms"),
    [
        (["--ranks", "8", "--intra", "1:300"], 6.28),
        (["--ranks", "8", "--nodes", "8", "--inter", "5:12.5"], 150.4),
        (["--ranks", "32", "--nodes", "32", "--inter", "5:12.5"], 166.7),
    ],
)
def test_worked_example_json(argv: list[str], expected_ms: float, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "1G", "--algo", "ring", *argv, "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["algo"] == "ring"
    assert round(data["time_s"] * 1e3, 2 if expected_ms < 10 else 1) == expected_ms
    assert data["algbw_gbps"] == pytest.approx((1 << 30) / data["time_s"] / 1e9)
    ranks = int(argv[1])
    assert data["busbw_gbps"] == pytest.approx(data["algbw_gbps"] * 2 * (ranks - 1) / ranks)


def test_nvlink_is_24_times_the_network(capsys: pytest.CaptureFixture[str]) -> None:
    """DOMAIN.md: the same 8-rank 1 GiB ring is 24x slower over a 12.5 GB/s network than over NVLink."""
    _, nvlink, _ = run_cli(["estimate", "all_reduce", "--bytes", "1GiB", "--ranks", "8", "--algo", "ring", "--json"], capsys)
    _, network, _ = run_cli(["estimate", "allreduce", "--bytes", "1GiB", "--ranks", "8", "--nodes", "8", "--algo", "ring",
                             "--json"], capsys)
    assert round(json.loads(network)["time_s"] / json.loads(nvlink)["time_s"]) == 24


def test_auto_reports_the_cheapest_and_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "4K", "--ranks", "64", "--nodes", "8"], capsys)
    assert code == 0
    assert "ring" in out and "tree" in out and "hierarchical" in out and "busbw" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["all_sum", "--bytes", "1G", "--ranks", "8"], "unknown operation"),
        (["all_reduce", "--bytes", "1Q", "--ranks", "8"], "--bytes"),
        (["all_reduce", "--bytes", "1G", "--ranks", "0"], "--ranks"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "--nodes", "3"], "does not spread evenly"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "--intra", "300"], "ALPHA_US:GBPS"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "--inter", "5:-1"], "--inter"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "--algo", "hierarchical"], "not available"),
        (["all_reduce", "--ranks", "8"], "--bytes"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["estimate", *argv], capsys)
    assert_one_line_error(code, err, fragment)


def test_all_to_all_inside_a_node_is_bounded_by_each_gpus_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    """Each of 8 ranks sends 7/8 of 1 GiB through its own 300 GB/s port: 1 us + 7/8 * 2^30 B / 300 GB/s."""
    code, out, _ = run_cli(["estimate", "all_to_all", "--bytes", "1G", "--ranks", "8", "--intra", "1:300", "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["time_s"] == pytest.approx(1e-6 + 7 / 8 * 2**30 / 300e9)


def test_on_a_machine_the_json_names_algorithm_channels_and_links(capsys: pytest.CaptureFixture[str]) -> None:
    """8 ranks on the DGX H100 sample: NVLS at 8 GiB (busbw ~480), a ring when forced (~370)."""
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "8G", "--ranks", "8", "sample:dgx-h100", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["algo"] == "nvls" and data["busbw_gbps"] == pytest.approx(480, rel=0.02)
    assert data["links"] == ["NVSwitch (NVLink SHARP)"] and data["channels"] == 1
    assert {"ring", "tree", "nvls"} <= set(data["algorithms"])
    _, ring, _ = run_cli(["estimate", "all_reduce", "sample:dgx-h100", "--bytes", "8G", "--ranks", "8", "--algo", "ring",
                          "--json"], capsys)
    # 18 x 20.6 GB/s less NCCL's Simple ring start (8.4 + 14 x 3.4 us, tuning.cc) over 8 GiB
    assert json.loads(ring)["busbw_gbps"] == pytest.approx(370.8 * (1 - 0.0012), rel=5e-4)


def test_on_a_cube_mesh_the_rings_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "8", "sample:dgx1-v100", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["algo"] == "ring" and data["channels"] == 6
    assert set(data["links"]) == {"NV1", "NV2"} and data["busbw_gbps"] == pytest.approx(120, rel=0.01)


def test_two_nodes_ride_every_rail(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "9G", "--ranks", "16", "--nodes", "2", "sample:dgx-h100",
                            "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["algo"] == "nvls_tree"
    assert sum(1 for label in data["links"] if label.startswith("mlx5_")) == 8


def test_the_table_names_where_the_ranks_sit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["estimate", "all_reduce", "--bytes", "1G", "--ranks", "4", "sample:a100-pcie-nvbridge-4"], capsys)
    assert code == 0 and "sample:a100-pcie-nvbridge-4" in out and "SYS" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["all_reduce", "--bytes", "1G", "--ranks", "12", "sample:dgx-h100"], "needs 12 GPUs per node"),
        (["all_reduce", "--bytes", "1G", "--ranks", "9", "--nodes", "2", "sample:dgx-h100"], "spread evenly"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "sample:dgx-h100", "--intra", "1:300"], "--intra/--inter"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "sample:dgx-a100", "--algo", "nvls"], "not available"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "sample:nope"], "unknown sample"),
        (["all_reduce", "--bytes", "1G", "--ranks", "8", "/nonexistent/topo.txt"], "/nonexistent/topo.txt"),
    ],
)
def test_bad_input_on_a_machine_is_one_line(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["estimate", *argv], capsys)
    assert_one_line_error(code, err, fragment)
