"""`linkscope bench p2p`: the pure logic (pairs, bus ids, matrices, expected speed and ratio,
median, data verification) without a GPU; the copy paths themselves on a CUDA GPU when present."""

from __future__ import annotations

import json

import pytest

from linkscope.probes.bench.p2p_report import (
    all_pairs,
    bus_id_key,
    copy_findings,
    matrix,
    nodes_to_test,
    pair_cells,
    parse_pairs,
    positions_by_bus_id,
)
from linkscope.probes.bench.preflight import GpuState, problems, states_in_use
from linkscope.probes.bench.timing import median
from linkscope.topo.common.errors import InputError
from linkscope.topo.model.measurements import PeerCopy
from linkscope.topo.samples import load_sample
from support.bench import cli_main


def test_all_ordered_pairs() -> None:
    assert all_pairs(3) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert all_pairs(1) == []


def test_parse_pairs() -> None:
    assert parse_pairs("0-1, 2-3,0-1", 4) == [(0, 1), (2, 3)]
    assert parse_pairs(None, 2) == [(0, 1), (1, 0)]


@pytest.mark.parametrize(("text", "message"), [("0-4", "GPU 4 does not exist"), ("1-1", "to itself"), ("0:1", "not SRC-DST")])
def test_parse_pairs_rejects(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_pairs(text, 4)


@pytest.mark.parametrize(("bus_id", "key"), [
    ("00000000:1B:00.0", (0, 0x1B, 0)), ("0000:1b:00.0", (0, 0x1B, 0)), ("1b:00", (0, 0x1B, 0)),
    ("0001:c2:03.1", (1, 0xC2, 3)), ("nonsense", None),
])
def test_bus_id_key(bus_id: str, key: tuple[int, int, int] | None) -> None:
    assert bus_id_key(bus_id) == key


def test_positions_match_cuda_devices_to_snapshot_gpus_by_bus_id() -> None:
    host = load_sample("dgx-h100").host
    cuda_order = [host.gpus[3].pci_bus_id.lower(), host.gpus[0].pci_bus_id, "0000:ff:00.0", None]  # type: ignore[union-attr]
    assert positions_by_bus_id(host, cuda_order) == [3, 0, None, None]


def test_cells_carry_expected_speed_and_ratio() -> None:
    host = load_sample("consumer-2gpu").host  # two RTX 4090 on PCIe Gen4 through the host bridge
    copies = [PeerCopy(0, 1, unidir_gbps=20.0, bidir_gbps=30.0), PeerCopy(1, 0, unidir_gbps=None)]
    uni = pair_cells(copies, host, [0, 1])
    assert uni[0].link_token == "PHB"
    # PCIe Gen4 x16: 31.5 GB/s spec, 82% typical, 0.9 for a path through the host bridge -> 23.247 GB/s
    assert uni[0].expected is not None and uni[0].expected.typical_gbps == pytest.approx(23.247)
    assert uni[0].ratio == pytest.approx(20.0 / 23.247)
    assert uni[1].ratio is None
    bi = pair_cells(copies, host, [0, 1], bidir=True)
    assert bi[0].expected is not None and bi[0].expected.typical_gbps == pytest.approx(2 * 23.247)
    assert bi[0].ratio == pytest.approx(30.0 / 46.494)


def test_cells_without_a_snapshot_have_no_expectation() -> None:
    cell = pair_cells([PeerCopy(0, 1, unidir_gbps=5.0)], None, [])[0]
    assert (cell.expected, cell.ratio, cell.link_token) == (None, None, None)


def test_matrix() -> None:
    copies = [PeerCopy(0, 1, unidir_gbps=1.0, verified=True), PeerCopy(1, 0, unidir_gbps=2.0, verified=False)]
    assert matrix(2, {(c.src, c.dst): c.unidir_gbps for c in copies}) == [[None, 1.0], [2.0, None]]


def test_findings_name_corruption_missing_p2p_and_slow_links() -> None:
    """dgx-h100: NV18 pairs, 391.5 GB/s typical; the H100's PCIe Gen5 x16 link 51.66 GB/s typical."""
    host = load_sample("dgx-h100").host
    copies = [PeerCopy(0, 1, unidir_gbps=370.0, p2p_enabled=True, verified=True),   # fine
              PeerCopy(1, 0, unidir_gbps=370.0, p2p_enabled=True, verified=False),  # corrupted
              PeerCopy(0, 5, unidir_gbps=22.0, p2p_enabled=False, verified=True),   # no P2P on NVLink, and slow
              PeerCopy(2, 3, unidir_gbps=293.0, p2p_enabled=True, verified=True),   # 74.8%: slow
              PeerCopy(3, 2, unidir_gbps=294.0, p2p_enabled=True, verified=True)]   # 75.1%: fine
    host_rows = [
        {"gpu": 0, "direction": "h2d", "numa_node": 0, "local": True, "gbps": 40.0, "verified": True, "expected_gbps": 51.66},
        {"gpu": 0, "direction": "d2h", "numa_node": 0, "local": True, "gbps": 9.0, "verified": True, "expected_gbps": 51.66},
        {"gpu": 0, "direction": "h2d", "numa_node": 1, "local": False, "gbps": 9.0, "verified": False, "expected_gbps": 51.66},
    ]
    findings = copy_findings(pair_cells(copies, host, list(range(8))), copies, host_rows)
    assert [(f.code, f.severity, f.path) for f in findings] == [
        ("copy-corrupted", "error", "1->0"),
        ("p2p-unavailable", "warning", "0->5"),
        ("copy-slow", "warning", "0->5"),
        ("copy-slow", "warning", "2->3"),
        ("host-copy-slow", "warning", "GPU 0 d2h NUMA 0"),
        ("host-copy-corrupted", "error", "GPU 0 h2d NUMA 1"),
    ]
    assert findings[2].message == "0->5 (NV18): 22.0 GB/s is 6% of the 391.5 GB/s this link typically delivers"
    assert "17% of the 51.7 GB/s its PCIe link" in findings[4].message


def test_small_copies_are_not_judged_for_speed() -> None:
    host = load_sample("dgx-h100").host
    small = [PeerCopy(0, 1, size_bytes=4 << 20, unidir_gbps=100.0, p2p_enabled=True, verified=True)]
    large = [PeerCopy(0, 1, size_bytes=32 << 20, unidir_gbps=100.0, p2p_enabled=True, verified=True)]
    assert copy_findings(pair_cells(small, host, list(range(8))), small, []) == []
    assert [f.code for f in copy_findings(pair_cells(large, host, list(range(8))), large, [])] == ["copy-slow"]


def test_without_expected_speeds_only_data_is_judged() -> None:
    copies = [PeerCopy(0, 1, unidir_gbps=0.5, p2p_enabled=False, verified=True)]
    assert copy_findings(pair_cells(copies, None, []), copies, []) == []


def test_median() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


@pytest.mark.parametrize(("gpu_node", "expected"), [(1, [1, 0]), (0, [0, 2]), (None, [0, 1]), (7, [0, 1])])
def test_numa_nodes_to_test_own_then_farthest(gpu_node: int | None, expected: list[int]) -> None:
    nodes = {0: {0, 1}, 1: {2, 3}, 2: {4, 5}, 3: set()}
    distances: dict[int, tuple[int, ...]] = {0: (10, 21, 32, 32), 1: (21, 10, 21, 21), 2: (32, 21, 10, 21)}
    assert nodes_to_test(gpu_node, nodes, distances) == expected


def test_verification_detects_a_single_flipped_word(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from linkscope.probes.bench.cuda_copies import fill_pattern, verify

    data = fill_pattern(1000, 7, "cpu")
    assert verify(data, 7)
    from linkscope.probes.bench import cuda_copies

    whole = data.clone()
    monkeypatch.setattr(cuda_copies, "PATTERN_CHUNK_WORDS", 64)
    assert torch.equal(fill_pattern(1000, 7, "cpu"), whole) and verify(whole, 7)
    whole[999] ^= 1  # in the last, partial chunk
    assert not verify(whole, 7)
    assert not verify(data, 8)
    data[999] ^= 1
    assert not verify(data, 7)
    assert fill_pattern(4, 1, "cpu").dtype == torch.int32


def test_preflight_refuses_busy_or_full_gpus() -> None:
    states = [GpuState(0, "GPU-aaa", 70 * 1024**3, 80 * 1024**3, 0), GpuState(1, "GPU-bbb", 1024**3, 80 * 1024**3, 2)]
    assert problems(states[:1]) == []
    assert problems(states) == ["GPU 1 runs 2 other compute process(es)", "GPU 1 has only 1.0 GiB free"]
    assert states_in_use(states, 1, None, pci_order=True) == states[:1]
    assert states_in_use(states, 1, "GPU-bbb", pci_order=True) == states[1:]
    assert states_in_use(states, 1, "1", pci_order=True) == states[1:]
    assert states_in_use(states, 1, "1", pci_order=False) == states  # cannot map: check every GPU
    assert states_in_use(states, 1, "MIG-xyz", pci_order=True) == states


def test_without_a_gpu_the_command_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from linkscope.probes.bench.preflight import cuda_device_count

    if cuda_device_count():
        pytest.skip("this machine has a CUDA GPU")
    assert cli_main(["bench", "p2p"]) == 2
    err = capsys.readouterr().err
    assert err == "linkscope: error: bench p2p: no CUDA GPU is present on this machine (peer copies need CUDA GPUs)\n"


def _cuda() -> object:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@pytest.mark.gpu
def test_gpu_device_to_device_copy_is_measured_and_verified() -> None:
    _cuda()
    from linkscope.probes.bench.copies import measure_pair
    from linkscope.probes.bench.cuda_copies import TorchCuda

    row = measure_pair(TorchCuda(), 0, 0, 64 * 1024**2, copies=4, samples=3)
    print("d2d same GPU:", row)
    assert row["verified"] is True
    assert row["unidir_gbps"] > 50 and row["bidir_gbps"] > 50 and 0 < row["latency_us"] < 100


@pytest.mark.gpu
def test_gpu_host_copies_from_pinned_memory() -> None:
    _cuda()
    from linkscope.probes.bench.cuda_copies import TorchCuda
    from linkscope.probes.bench.hostcopy import measure_host_copies

    runtime = TorchCuda()
    rows, notes = measure_host_copies(runtime, [runtime.device_info(0)], 64 * 1024**2, copies=4, samples=3,
                                      progress=lambda *a: None)
    print("host copies:", rows, notes)
    assert {row["direction"] for row in rows} == {"h2d", "d2h"}
    assert all(row["verified"] and row["gbps"] > 1 for row in rows)


@pytest.mark.gpu
def test_gpu_bench_p2p_command_with_one_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    _cuda()
    code = cli_main(["bench", "p2p", "--bytes", "64M", "--samples", "3", "--json", "--force"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    data = json.loads(out)
    assert data["host"] and all(row["verified"] for row in data["host"])


@pytest.mark.gpu
def test_gpu_nccl_collectives_with_one_rank(capsys: pytest.CaptureFixture[str]) -> None:
    _cuda()
    code = cli_main(["bench", "collectives", "--backend", "nccl", "--nproc", "1", "--min-bytes", "1M", "--max-bytes", "64M",
                     "--factor", "8", "--json", "--force"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    rows = json.loads(out)["rows"]
    assert rows and all(row["wrong"] == 0 and row["backend"] == "nccl" for row in rows)


def _fake_result(verified: bool = True) -> dict[str, object]:
    """What the p2p worker returns, as recorded from a two-GPU PCIe box (values written by hand)."""
    return {
        "devices": [{"index": 0, "name": "GPU A", "pci_bus_id": "00000000:01:00.0", "free_bytes": 1},
                    {"index": 1, "name": "GPU B", "pci_bus_id": "00000000:02:00.0", "free_bytes": 1}],
        "peer": [
            {"src": 0, "dst": 1, "size_bytes": 1 << 28, "unidir_gbps": 20.0, "bidir_gbps": 30.0, "latency_us": 12.5,
             "p2p_enabled": False, "verified": True},
            {"src": 1, "dst": 0, "size_bytes": 1 << 28, "unidir_gbps": 10.0, "bidir_gbps": 30.0, "latency_us": 13.0,
             "p2p_enabled": False, "verified": verified},
        ],
        "host": [{"gpu": 0, "direction": "h2d", "numa_node": 0, "local": True, "size_bytes": 1024, "gbps": 24.0,
                  "verified": True}],
        "notes": [],
    }


def _report(result: dict[str, object], as_json: bool, fail_on: str = "warning") -> int:
    import argparse

    from linkscope.commands.bench_p2p import report_p2p
    from linkscope.topo.model.measurements import HostCopy, Measurements

    copies = tuple(PeerCopy(**row) for row in result["peer"])  # type: ignore[attr-defined]
    measurements = Measurements("linkscope bench p2p", peer_copies=copies,
                                host_copies=(HostCopy(0, "h2d", 0, 1024, 24.0),))
    args = argparse.Namespace(expect="sample:consumer-2gpu", json=as_json, output=None, fail_on=fail_on)
    return report_p2p(args, measurements, result)


def test_p2p_report_json_has_matrices_and_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(_fake_result(), as_json=True) == 1  # 1->0 at 10 GB/s is 43% of the PHB path's 23.2
    data = json.loads(capsys.readouterr().out)
    assert [(f["code"], f["path"]) for f in data["findings"]] == [("copy-slow", "1->0")]
    assert data["matrices"]["unidir_gbps"] == [[None, 20.0], [10.0, None]]
    assert data["matrices"]["latency_us"] == [[None, 12.5], [13.0, None]]
    first = data["peer"][0]
    assert first["link"] == "PHB" and first["expected_unidir_gbps"] == pytest.approx(23.247)
    assert first["ratio"] == pytest.approx(20.0 / 23.247)
    assert data["host"][0]["expected_gbps"] == pytest.approx(31.5 * 0.82)  # the 4090's own PCIe Gen4 x16 link


def test_p2p_report_table_and_corruption_is_a_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(_fake_result(verified=False), as_json=False) == 1
    captured = capsys.readouterr()
    assert "CORRUPTED" in captured.out and "unidirectional GB/s" in captured.out and "PHB" in captured.out
    assert "error: 1->0: copied data did not arrive intact" in captured.out
    assert captured.err == "linkscope: bench p2p found 2 problem(s): copy-corrupted 1->0, copy-slow 1->0\n"


def test_p2p_report_says_how_gpus_were_matched_what_was_judged_and_fails_on_its_verdicts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Both 256 MiB pairs are judged, the 1 KiB host copy is too small to be (JSON `judged`); the two CUDA devices
    are matched to the sample's GPUs by bus id (`placement`, and its line in text); a pair only `slow` (15 GB/s of
    the PHB path's ~23.2: ~65%) is a warning, so --fail-on error lets it pass, and far below (10 GB/s) does not."""
    assert _report(_fake_result(), as_json=True) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["judged"]["judged"], data["judged"]["not_judged"]) == (2, 1)
    assert (data["judged"]["ok"], data["judged"]["far below"]) == (1, 1)
    assert data["placement"] == ["2 GPU(s): 2 matched to sample:consumer-2gpu's GPUs by PCI bus id"]
    assert _report(_fake_result(), as_json=False, fail_on="error") == 1  # far below is an error
    text = " ".join(capsys.readouterr().out.split())
    assert "placed: 2 GPU(s): 2 matched to sample:consumer-2gpu's GPUs by PCI bus id" in text
    assert "3 row(s) judged" not in text and "2 row(s) judged: 1 ok, 1 far below; 1 not judged" in text
    slow = _fake_result()
    slow["peer"][1]["unidir_gbps"] = 15.0  # type: ignore[index]
    assert _report(slow, as_json=True, fail_on="error") == 0
    assert _report(slow, as_json=True, fail_on="warning") == 1
    capsys.readouterr()


def test_p2p_copies_too_small_to_judge_get_a_ratio_but_no_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """1 MiB copies (under the 32 MiB judged): the JSON rows keep their ratio, their verdict is null as `judged`
    counts them, and the 43% pair raises nothing."""
    small = _fake_result()
    for row in small["peer"]:  # type: ignore[attr-defined]
        row["size_bytes"] = 1 << 20
    assert _report(small, as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["verdict"] for row in data["peer"]] == [None, None] and data["peer"][1]["ratio"] is not None
    assert data["judged"]["judged"] == 0 and data["findings"] == []


class _FakeNvml:
    """Just enough of pynvml for the preflight: GPU 0 idle, GPU 1 busy with 2 processes and 1 GiB free."""

    class NVMLError(Exception):
        pass

    class _Memory:
        def __init__(self, free: int, total: int) -> None:
            self.free, self.total = free, total

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return f"GPU-{handle}aaa".encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> object:
        return self._Memory(70 * 1024**3 if handle == 0 else 1024**3, 80 * 1024**3)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[object]:
        return [] if handle == 0 else [object(), object()]


@pytest.mark.parametrize(("visible", "count", "refused"),
                         [(None, 1, False), (None, 2, True), ("GPU-1", 1, True), ("0", 1, False)])
def test_preflight_reads_nvml_and_refuses_unless_forced(monkeypatch: pytest.MonkeyPatch, visible: str | None, count: int,
                                                        refused: bool) -> None:
    from linkscope.probes.bench import preflight

    monkeypatch.setattr(preflight, "load_pynvml", lambda: _FakeNvml())
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if refused:
        with pytest.raises(preflight.GpuBusy, match="GPU 1 runs 2 other compute process"):
            preflight.gpu_preflight(count, force=False)
        assert preflight.gpu_preflight(count, force=True) == [
            "--force: GPU 1 runs 2 other compute process(es)", "--force: GPU 1 has only 1.0 GiB free"]
    else:
        assert preflight.gpu_preflight(count, force=False) == []


def test_preflight_without_nvml_says_it_could_not_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from linkscope.probes.bench import preflight

    monkeypatch.setattr(preflight, "load_pynvml", lambda: None)
    assert preflight.gpu_preflight(2, force=False) == ["could not check the GPUs for other processes (NVML not available)"]
