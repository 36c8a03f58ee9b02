"""`linkscope show` and `linkscope samples`: the JSON contract, the console view, and bad input."""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from linkscope.cli import main
from linkscope.render.tables import index_ranges
from linkscope.topo.common.errors import InputError
from linkscope.topo.model.codec import snapshot_to_json
from linkscope.topo.model.host import Gap, Gpu, Host, Link, LinkKind, Nic
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample, sample_names
from support.samples import REAL_TOPO_DIR, fixture_gpu_rows

SGR = re.compile(r"\x1b\[([0-9;]*)m")


def run_show(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["show", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def show_json(capsys: pytest.CaptureFixture[str], source: str) -> dict[str, Any]:
    status, out, err = run_show(capsys, source, "--json")
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


@pytest.fixture(autouse=True)
def _plain_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-terminal stdout of 80 columns, whatever the environment running the tests says."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "50")


CONSUMER_GPU = {
    "name": "NVIDIA GeForce RTX 4090",
    "numa_node": 0,
    "cpu_affinity": "0-47",
    "numa_affinity": "0",
    "memory_total_bytes": 24564 * 1024 * 1024,
    "compute_capability": "8.9",
    "nvlink_active": 0,
    "nvlink_total": 0,
    "pcie_gen_current": 4,
    "pcie_gen_max": 4,
    "pcie_width_current": 16,
    "pcie_width_max": 16,
}
CONSUMER_HOST = {
    "hostname": "consumer-2gpu",
    "gpus": [
        {"index": 0, "uuid": "GPU-c9d89246-d5e4-a759-2b4e-61b44691398f", "pci_bus_id": "00000000:01:00.0", **CONSUMER_GPU},
        {"index": 1, "uuid": "GPU-1c6dcaa1-5940-8b25-db36-ab9a81dd7ca5", "pci_bus_id": "00000000:02:00.0", **CONSUMER_GPU},
    ],
    "matrix": [["X", "PHB"], ["PHB", "X"]],
    "nics": ["enp6s0"],
    "gpu_nic": [["PHB"], ["PHB"]],
    "cpu_affinity": ["0-47", "0-47"],
    "numa_affinity": ["0", "0"],
}


def test_json_golden_consumer_2gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert show_json(capsys, "sample:consumer-2gpu") == {
        **CONSUMER_HOST,
        "source": "sample:consumer-2gpu",
        "gaps": [],
        "hosts": [CONSUMER_HOST],
    }


def test_json_golden_dgx_a100(capsys: pytest.CaptureFixture[str]) -> None:
    data = show_json(capsys, "sample:dgx-a100")
    assert data["matrix"] == [["X" if a == b else "NV12" for b in range(8)] for a in range(8)]
    assert data["nics"] == [f"mlx5_{n}" for n in range(10)]
    s, x = "SYS", "PXB"
    assert data["gpu_nic"] == [
        [x, x, s, s, s, s, s, s, s, s],
        [x, x, s, s, s, s, s, s, s, s],
        [s, s, x, x, s, s, s, s, s, s],
        [s, s, x, x, s, s, s, s, s, s],
        [s, s, s, s, s, s, x, x, s, s],
        [s, s, s, s, s, s, x, x, s, s],
        [s, s, s, s, s, s, s, s, x, x],
        [s, s, s, s, s, s, s, s, x, x],
    ]
    assert data["numa_affinity"] == ["3", "3", "1", "1", "7", "7", "5", "5"]
    assert data["cpu_affinity"][:2] == ["48-63,176-191"] * 2
    assert data["cpu_affinity"][6:] == ["80-95,208-223"] * 2
    assert [gpu["pci_bus_id"][9:11] for gpu in data["gpus"]] == ["07", "0F", "47", "4E", "87", "90", "B7", "BD"]


@pytest.mark.parametrize("name", sample_names())
def test_json_contract_for_every_sample(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = show_json(capsys, f"sample:{name}")
    host = load_sample(name).host
    assert [gpu["index"] for gpu in data["gpus"]] == list(range(len(host.gpus)))
    assert all({"index", "name", "uuid", "pci_bus_id", "numa_node"} <= set(gpu) for gpu in data["gpus"])
    assert data["matrix"] == host.matrix_tokens()
    assert data["nics"] == [nic.name for nic in host.nics]
    assert data["gpu_nic"] == [list(row) for row in host.gpu_nic]
    assert data["cpu_affinity"] == [gpu.cpu_affinity for gpu in host.gpus]
    assert data["numa_affinity"] == [gpu.numa_affinity for gpu in host.gpus]
    assert (data["hostname"], data["source"], data["gaps"]) == (host.hostname, f"sample:{name}", [])
    snapshot = load_sample(name)
    assert [item["hostname"] for item in data["hosts"]] == [item.hostname for item in snapshot.hosts]
    assert data["hosts"][0]["matrix"] == data["matrix"]


def test_dgx1_v100_matrix_equals_the_real_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    real_matrix, real_gpu_nic = fixture_gpu_rows("v100-sxm2-8gpu-hybrid-cube-mesh-mlx5.txt")
    data = show_json(capsys, "sample:dgx1-v100")
    assert data["matrix"] == real_matrix
    assert len(real_gpu_nic[0]) == 1  # the real box had one NIC; its column is where our mlx5_1 sits
    assert [row[1] for row in data["gpu_nic"][:4]] == ["PHB", "PHB", "PIX", "PIX"]


def test_show_reads_real_nvsmi_text(capsys: pytest.CaptureFixture[str]) -> None:
    data = show_json(capsys, str(REAL_TOPO_DIR / "a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt"))
    assert data["matrix"] == fixture_gpu_rows("a100-pcie-4gpu-azure-nc96ads-nv12-pairs-4numa.txt")[0]
    assert data["cpu_affinity"] == ["0-23", "24-47", "48-71", "72-95"]


@pytest.mark.parametrize("name", sample_names())
def test_text_output_has_every_token_and_fits_80_columns(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_show(capsys, f"sample:{name}")
    assert (status, err) == (0, "")
    host = load_sample(name).host
    assert "\x1b[" not in out, "plain output when stdout is not a terminal"
    assert max(len(line) for line in out.splitlines()) <= 80
    words = set(out.split())
    tokens = {token for row in host.matrix_tokens() for token in row} | {token for row in host.gpu_nic for token in row}
    assert tokens <= words
    assert {nic.name for nic in host.nics} <= words
    assert host.hostname in out and f"sample:{name}" in out and host.gpus[0].name in out
    assert host.gpus[0].cpu_affinity is not None and host.gpus[0].cpu_affinity in out
    assert "Legend" in out and "No gaps recorded" in out


def test_degraded_gpu_is_visible_in_text(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_show(capsys, "sample:dgx-h100-degraded")
    gpu3 = next(line for line in out.splitlines() if line.startswith("GPU3 ") and "00000000:" in line)
    assert "16/18" in gpu3 and "x8 of x16" in gpu3
    assert "NV16" in out and "a bonded set of 16 NVLinks" in out


def test_legend_gives_expected_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_show(capsys, "sample:dgx-h100")
    nv18 = next(line for line in out.splitlines() if line.split()[:1] == ["NV18"])
    assert "~392 GB/s" in nv18 and "spec 450" in nv18
    assert "~46 GB/s" in out  # a 400 Gb/s NIC through NCCL


def test_colour_on_a_terminal_and_none_with_no_color(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    _, coloured, _ = run_show(capsys, "sample:dgx1-v100")
    params = [param for sequence in SGR.findall(coloured) for param in sequence.split(";") if param]
    assert "32" in params and "31" in params  # NVLink green, SYS red
    monkeypatch.setenv("NO_COLOR", "1")
    _, plain, _ = run_show(capsys, "sample:dgx1-v100")
    colour_params = [p for seq in SGR.findall(plain) for p in seq.split(";") if p and 30 <= int(p) <= 49]
    assert colour_params == []
    assert SGR.sub("", plain) == SGR.sub("", coloured)


def _gpu(index: int, numa: int) -> Gpu:
    return Gpu(index=index, name="NVIDIA H100 80GB HBM3", pci_bus_id=f"00000000:{index:02X}:00.0", numa_node=numa)


def _cluster_host(hostname: str, gpu_count: int) -> Host:
    """A host with `gpu_count` GPUs, NV18 inside groups of 8 and SYS between groups."""
    gpus = tuple(_gpu(index, index // 8) for index in range(gpu_count))
    links = tuple(
        Link(a, b, LinkKind.NVLINK, 18, 4) if a // 8 == b // 8 else Link(a, b, LinkKind.SYS)
        for a in range(gpu_count)
        for b in range(a + 1, gpu_count)
    )
    nics = (Nic("mlx5_0"), Nic("mlx5_1"))
    gpu_nic = tuple(("PIX", "SYS") if index % 2 == 0 else ("SYS", "PIX") for index in range(gpu_count))
    return Host(hostname, gpus, links, nics, gpu_nic)


def _write(tmp_path: Path, snapshot: Snapshot, name: str = "snap.json") -> str:
    path = tmp_path / name
    path.write_text(snapshot_to_json(snapshot))
    return str(path)


def test_72_gpus_wrap_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path, Snapshot(hosts=(_cluster_host("big-box", 72),), source="test"))
    status, out, err = run_show(capsys, source)
    assert (status, err) == (0, "")
    assert max(len(line) for line in out.splitlines()) <= 80
    header_words = [word for line in out.splitlines() if line.startswith(" ") for word in line.split()]
    assert {f"GPU{i}" for i in range(72)} <= set(header_words)
    assert {"NIC0", "NIC1", "NV18", "SYS", "PIX"} <= set(out.split())
    data = show_json(capsys, source)
    assert len(data["matrix"]) == 72 and data["matrix"][0][8] == "SYS" and data["matrix"][71][64] == "NV18"


def test_multi_host_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = Snapshot(hosts=(_cluster_host("node-a", 8), _cluster_host("node-b", 4)), source="cluster")
    source = _write(tmp_path, snapshot)
    data = show_json(capsys, source)
    assert data["hostname"] == "node-a" and len(data["matrix"]) == 8
    assert [host["hostname"] for host in data["hosts"]] == ["node-a", "node-b"]
    assert len(data["hosts"][1]["matrix"]) == 4
    _, out, _ = run_show(capsys, source)
    assert "node-a" in out and "node-b" in out


def test_untrusted_text_is_not_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = replace(_cluster_host("[bold red]evil[/]", 2), nics=(Nic("[link=x]nic[/link]"), Nic("mlx5_1")))
    snapshot = Snapshot(hosts=(host,), gaps=(Gap("[i]subject[/i]", "NotSupported"),))
    _, out, _ = run_show(capsys, _write(tmp_path, snapshot))
    assert "[bold red]evil[/]" in out and "[link=x]nic[/link]" in out and "[i]subject[/i]" in out


def test_incomplete_snapshot_shows_unknown_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = _cluster_host("partial", 3)
    host = replace(host, links=host.links[:1], gpu_nic=host.gpu_nic[:1])
    snapshot = Snapshot(hosts=(host,), gaps=(Gap("nvmlDeviceGetTopologyCommonAncestor(gpu 2)", "GpuIsLost"),))
    source = _write(tmp_path, snapshot)
    data = show_json(capsys, source)
    assert data["matrix"] == [["X", "NV18", "?"], ["NV18", "X", "?"], ["?", "?", "X"]]
    assert data["gpu_nic"] == [["PIX", "SYS"], ["?", "?"], ["?", "?"]]
    assert data["gaps"] == [{"subject": "nvmlDeviceGetTopologyCommonAncestor(gpu 2)", "reason": "GpuIsLost"}]
    status, out, _ = run_show(capsys, source)
    assert status == 0 and "GpuIsLost" in out and "not recorded" in out


def test_host_without_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = Snapshot(
        hosts=(Host("cpu-only", nics=(Nic("eth0", link_layer="Ethernet"),)),), gaps=(Gap("nvmlInit", "LibraryNotFound"),)
    )
    source = _write(tmp_path, snapshot)
    data = show_json(capsys, source)
    assert (data["gpus"], data["matrix"], data["gpu_nic"], data["nics"]) == ([], [], [], ["eth0"])
    status, out, _ = run_show(capsys, source)
    assert status == 0 and "No GPUs recorded" in out and "eth0" in out and "LibraryNotFound" in out


def test_single_gpu_grace_hopper_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_show(capsys, str(REAL_TOPO_DIR / "gh200-1gpu-bluefield3-4nic.txt"))
    assert status == 0
    gpu_row = next(line for line in out.splitlines() if line.startswith("GPU0 ") and "NODE" in line)
    assert gpu_row.split() == ["GPU0", "X", "NODE", "NODE", "NODE", "NODE"]
    assert "0-71" in out


def _bad_inputs(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    undecodable = tmp_path / "latin1.txt"
    undecodable.write_bytes(b"GPU0 \xff\xfe X")
    other_schema = tmp_path / "other.json"
    other_schema.write_text(json.dumps({"name": "not a snapshot", "items": [1, 2]}))
    wrong_field = tmp_path / "wrong.json"
    wrong_field.write_text(json.dumps({"schema": 1, "hosts": [{"hostname": 7}]}))
    no_hosts = tmp_path / "nohosts.json"
    no_hosts.write_text(json.dumps({"schema": 1, "hosts": []}))
    oversized = tmp_path / "huge.json"
    with oversized.open("wb") as handle:
        handle.truncate(65 * 1024 * 1024)
    return {
        "missing": str(tmp_path / "no-such-file.json"),
        "empty": str(empty),
        "binary": str(garbage),
        "not utf-8": str(undecodable),
        "other schema": str(other_schema),
        "wrong field type": str(wrong_field),
        "no hosts": str(no_hosts),
        "oversized": str(oversized),
        "unknown sample": "sample:dgx-z900",
        "directory": str(tmp_path),
    }


BAD_CASES = (
    "missing",
    "empty",
    "binary",
    "not utf-8",
    "other schema",
    "wrong field type",
    "no hosts",
    "oversized",
    "unknown sample",
    "directory",
)


@pytest.mark.parametrize("case", BAD_CASES)
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_input_is_one_line_exit_2(case: str, as_json: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _bad_inputs(tmp_path)[case]
    status, out, err = run_show(capsys, source, *(["--json"] if as_json else []))
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("linkscope: error: ")
    assert "Traceback" not in err


def test_unknown_sample_lists_the_available_ones(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run_show(capsys, "sample:dgx-z900")
    assert "unknown sample 'dgx-z900'" in err and "dgx-h100" in err and "consumer-2gpu" in err


def test_samples_lists_every_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["samples"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [f"sample:{name}" for name in sample_names()]
    assert all(len(line.split()) > 5 for line in lines)


def test_samples_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["samples", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == sample_names()
    assert all(row["source"] == f"sample:{row['name']}" and row["description"] for row in rows)
    assert "NV18" in rows[0]["description"]


@pytest.mark.parametrize(
    ("indices", "text"),
    [([], ""), ([5], "5"), ([0, 1, 2, 3], "0-3"), ([0, 2, 3, 6], "0,2-3,6"), ([4, 5, 7], "4-5,7")],
)
def test_index_ranges(indices: list[int], text: str) -> None:
    assert index_ranges(indices) == text


def _matrix_as_text_lines(host: Host, width: int) -> list[Text]:
    """The link matrix built the plain way, a bold `Text` per line with each token's style on it: what the
    matrix's own segments must print."""
    from linkscope.render import token_style
    from linkscope.render.matrix import GROUP_GAP, LinkMatrix

    matrix = LinkMatrix(host)
    labels = [f"GPU{gpu.index}" for gpu in host.gpus]
    label_width = max(len(label) for label in labels)
    lines: list[Text] = []
    for number, block in enumerate(matrix._blocks(matrix._columns(), label_width, width)):
        if number:
            lines.append(Text(""))
        header = Text(" " * label_width, style="bold")
        for column in block:
            header.append(" " * ((GROUP_GAP if column.starts_group else 0) + 1))
            header.append(column.label.center(column.width), style="bold")
        lines.append(header)
        for row, label in enumerate(labels):
            line = Text(label.ljust(label_width), style="bold")
            for column in block:
                line.append(" " * ((GROUP_GAP if column.starts_group else 0) + 1))
                line.append(column.cells[row].center(column.width), style=token_style(column.cells[row]))
            lines.append(line)
    return lines


_REAL_MATRICES = sorted(path.name for path in REAL_TOPO_DIR.iterdir() if not path.name.endswith(".facts.json"))


@pytest.mark.parametrize("name", [*(f"sample:{name}" for name in sample_names()), *_REAL_MATRICES])
def test_link_matrix_prints_as_styled_text_lines(name: str) -> None:
    """The matrix writes its segments itself (about a third of the cost of a `Text` per line): in colour and without,
    at any width, every sample's and every real `nvidia-smi topo -m` file's matrix prints byte for byte as the
    `Text` lines would."""
    from linkscope.render.console import console
    from linkscope.render.matrix import link_matrix
    from linkscope.topo.formats.source import load_source

    try:
        snapshot = load_source(name if name.startswith("sample:") else str(REAL_TOPO_DIR / name))
    except InputError:  # a `topo -p2p` file alone: refused, as the readers' tests check
        pytest.skip("not a link matrix")
    for host, width, colour in itertools.product([host for host in snapshot.hosts[:2] if host.gpus], (40, 80, 200),
                                                 (True, False)):
        printed = []
        for renderable in (link_matrix(host), *_matrix_as_text_lines(host, width)):
            out = console(file=io.StringIO(), width=width, force_terminal=colour,
                          color_system="truecolor" if colour else None)
            out.print(renderable)
            printed.append(out.file.getvalue())  # type: ignore[attr-defined]
        assert printed[0] == "".join(printed[1:]), (host.hostname, width, colour)
        assert ("\x1b[" in printed[0]) is colour
