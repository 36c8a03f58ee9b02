"""`bench p2p`'s copy engine (probes.bench.copies, probes.bench.p2p, probes.bench.hostcopy) run against simulated
boxes whose pair rates are real recordings (tests/support/fakes/fake_cuda.py): the numbers it reports,
the data check, the warm-up, the gate that keeps host enqueue cost out, memory sizing and
release, the NUMA choice for host copies, and the command from arguments to JSON."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from linkscope.probes.bench.copies import measure_pair
from linkscope.probes.bench.p2p import run_p2p
from linkscope.topo.formats.p2p_matrices import read_nvbandwidth, read_p2p_bandwidth_latency_test
from linkscope.topo.model.measurements import Measurements, PeerCopy
from linkscope.topo.samples import load_sample
from support.bench import cli_main
from support.fakes import build_sysfs
from support.fakes.fake_cuda import FakeBox, FakeCuda, box_from_recording
from support.paths import FIXTURES

P2P_FIXTURES = FIXTURES / "real" / "p2p"
MiB = 1024**2


def _recording(name: str) -> Measurements:
    text = (P2P_FIXTURES / name).read_text()
    reader = read_nvbandwidth if "nvbandwidth" in name else read_p2p_bandwidth_latency_test
    return reader(text, name)


def _h100_pcie_bridge(**changes: Any) -> FakeBox:
    """Two H100 PCIe joined by NVLink bridges, as p2pBandwidthLatencyTest measured them (P2P on)."""
    host = load_sample("a100-pcie-nvbridge-4").host  # stands in for the two GPUs' names and bus ids only
    box = box_from_recording(host, _recording("h100-pcie-2gpu-nvlink-bridge-p2pBandwidthLatencyTest.txt"))
    box.names, box.bus_ids, box.free_bytes = box.names[:2], box.bus_ids[:2], box.free_bytes[:2]
    for name, value in changes.items():
        setattr(box, name, value)
    return box


def _spec(pairs: list[tuple[int, int]], size_bytes: int = 256 * MiB, host: bool = False, samples: int = 5) -> dict[str, Any]:
    return {"pairs": pairs, "size_bytes": size_bytes, "samples": samples, "copies": 4, "host": host}


def _through(size_bytes: int, gbps: float, latency_us: float) -> float:
    """GB/s of back-to-back copies that each wait `latency_us` and then move `size_bytes` at `gbps`."""
    return size_bytes / (size_bytes / (gbps * 1e3) + latency_us) / 1e3


def _recorded(recording: Measurements, src: int, dst: int, p2p: bool = True) -> PeerCopy:
    return next(row for row in recording.peer_copies if (row.src, row.dst) == (src, dst) and row.p2p_enabled in (p2p, None))


def test_pairs_reproduce_the_recorded_nvlink_bridge_box() -> None:
    recording = _recording("h100-pcie-2gpu-nvlink-bridge-p2pBandwidthLatencyTest.txt")
    result = run_p2p(_spec([(0, 1), (1, 0)]), lambda *step: None, FakeCuda(_h100_pcie_bridge()))
    assert [(row["src"], row["dst"]) for row in result["peer"]] == [(0, 1), (1, 0)]
    for row in result["peer"]:
        want = _recorded(recording, row["src"], row["dst"])
        assert want.unidir_gbps is not None and want.latency_us is not None
        # each 256 MiB copy pays the pair's 2.5 us latency once: 0.25% under the recorded rate
        assert row["unidir_gbps"] == pytest.approx(_through(256 * MiB, want.unidir_gbps, want.latency_us), rel=1e-6)
        assert row["unidir_gbps"] == pytest.approx(want.unidir_gbps, rel=5e-3)
        assert row["bidir_gbps"] == pytest.approx(want.bidir_gbps, rel=5e-3)
        assert row["latency_us"] == pytest.approx(want.latency_us, rel=1e-2)
        assert row["p2p_enabled"] is True and row["verified"] is True and row["size_bytes"] == 256 * MiB
    assert result["notes"] == [] and result["host"] == []


def test_a_box_without_peer_access_reports_the_staged_copy_rates() -> None:
    recording = _recording("rtx2080ti-2gpu-p2pBandwidthLatencyTest-no-p2p.txt")
    host = load_sample("consumer-2gpu").host
    box = box_from_recording(host, recording, peer_access=set())
    result = run_p2p(_spec([(0, 1)], size_bytes=64 * MiB), lambda *step: None, FakeCuda(box))
    row = result["peer"][0]
    want = _recorded(recording, 0, 1, p2p=False)
    assert row["p2p_enabled"] is False
    assert row["unidir_gbps"] == pytest.approx(want.unidir_gbps, rel=5e-3)
    assert row["latency_us"] == pytest.approx(want.latency_us, rel=1e-2)


def test_eight_gpu_nvswitch_box_every_pair_matches_nvbandwidth() -> None:
    recording = _recording("h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt")
    box = box_from_recording(load_sample("dgx-h100").host, recording)
    pairs = [(src, dst) for src in range(8) for dst in range(8) if src != dst]
    result = run_p2p(_spec(pairs, size_bytes=64 * MiB, samples=3), lambda *step: None, FakeCuda(box))
    measured = {(row["src"], row["dst"]): row["unidir_gbps"] for row in result["peer"]}
    assert len(measured) == 56
    for (src, dst), gbps in measured.items():
        recorded = _recorded(recording, src, dst).unidir_gbps
        assert recorded is not None and gbps == pytest.approx(_through(64 * MiB, recorded, 2.0), rel=1e-6)


def test_the_gate_keeps_host_enqueue_cost_out_of_the_latency() -> None:
    """Each enqueue costs the host 20 us, far more than the 2.5 us a copy takes: only a batch
    that starts after the host has enqueued all of it measures the copy, not the host."""
    runtime = FakeCuda(_h100_pcie_bridge(enqueue_us=20.0))
    row = measure_pair(runtime, 0, 1, 4 * MiB, copies=4, samples=3)
    assert row["latency_us"] == pytest.approx(2.56, rel=1e-2)


def test_the_warm_up_keeps_first_copy_set_up_out_of_the_numbers() -> None:
    slow_start = FakeCuda(_h100_pcie_bridge(first_copy_extra_us=50_000.0))
    plain = FakeCuda(_h100_pcie_bridge())
    # two samples: their median is their mean, so a first sample that paid the set-up would show
    rows = [measure_pair(runtime, 0, 1, 64 * MiB, copies=4, samples=2) for runtime in (slow_start, plain)]
    for key in ("unidir_gbps", "bidir_gbps", "latency_us"):
        assert rows[0][key] == pytest.approx(rows[1][key], rel=1e-9)


def test_a_pair_that_corrupts_data_is_reported_unverified() -> None:
    """1->0 corrupts: the rows of both 1->0 and 0->1 (whose bidirectional run copies 1->0 too) say so."""
    box = box_from_recording(load_sample("dgx-h100").host, _recording("h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"))
    box.corrupt = {(1, 0)}
    result = run_p2p(_spec([(0, 1), (1, 0), (2, 3)], size_bytes=16 * MiB), lambda *step: None, FakeCuda(box))
    assert [row["verified"] for row in result["peer"]] == [False, False, True]


def test_copy_size_follows_free_memory_and_every_buffer_is_released() -> None:
    runtime = FakeCuda(_h100_pcie_bridge(free_bytes=[1024 * MiB, 512 * MiB]))
    result = run_p2p(_spec([(0, 1)]), lambda *step: None, runtime)
    assert result["notes"] == [f"copy size lowered from {256 * MiB} to {64 * MiB} B to fit free GPU memory"]
    assert result["peer"][0]["size_bytes"] == 64 * MiB
    gc.collect()
    assert runtime.free_bytes == [1024 * MiB, 512 * MiB]
    assert runtime.calls["empty_cache"] == 1


def test_the_fake_refuses_what_cuda_would_refuse() -> None:
    runtime = FakeCuda(_h100_pcie_bridge(free_bytes=[MiB, MiB]))
    with pytest.raises(RuntimeError, match="out of memory"):
        runtime.zeros(0, MiB)
    small, large = runtime.zeros(0, 4), runtime.zeros(1, 8)
    with pytest.raises(RuntimeError, match="4 and 8 words"):
        runtime.copy(large, small, runtime.stream(0), 1)


def _numa_box(tmp_path: Path, allowed: set[int] | None = None) -> tuple[FakeCuda, str]:
    """The DGX H100 sample: GPUs 0-3 on NUMA node 0, 4-7 on node 1; host copies 53 GB/s from the
    GPU's own node, 41 GB/s from the other (rates written by hand)."""
    host = load_sample("dgx-h100").host
    box = box_from_recording(host, _recording("h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"))
    box.host_gbps = {(gpu.index, node.id, direction): (53.0 if node.id == gpu.numa_node else 41.0)
                     for gpu in host.gpus for node in host.numa_nodes for direction in ("h2d", "d2h")}
    box.allowed_cpus = allowed
    return FakeCuda(box), str(build_sysfs(tmp_path, host))


def test_host_copies_from_the_gpus_own_node_and_the_far_one(tmp_path: Path) -> None:
    runtime, root = _numa_box(tmp_path)
    done: list[tuple[Any, ...]] = []
    result = run_p2p(_spec([], size_bytes=32 * MiB, host=True), lambda *step: done.append(step), runtime, root)
    rows = {(row["gpu"], row["numa_node"], row["direction"]): row for row in result["host"]}
    assert len(rows) == 8 * 2 * 2 and done == [("host", index) for index in range(8)]
    for (gpu, node, _direction), row in rows.items():
        own = 0 if gpu < 4 else 1
        assert row["local"] is (node == own)
        assert row["gbps"] == pytest.approx(53.0 if node == own else 41.0, rel=1e-2)
        assert row["verified"] is True and row["size_bytes"] == 32 * MiB
    assert result["notes"] == []


def test_host_copies_inside_a_cpuset_of_one_node_say_what_they_could_not_compare(tmp_path: Path) -> None:
    runtime, root = _numa_box(tmp_path, allowed=set(range(0, 56)))
    result = run_p2p(_spec([], size_bytes=4 * MiB, host=True), lambda *step: None, runtime, root)
    assert {row["numa_node"] for row in result["host"]} == {0}
    assert [row["local"] for row in result["host"] if row["gpu"] == 4] == [False, False]
    assert result["notes"] == [
        *(f"GPU {index}: no other NUMA node with CPUs to compare with" for index in range(4)),
        *(f"GPU {index}: its own NUMA node 1 has no CPUs this process may use; host copies measured from other nodes only"
          for index in range(4, 8))]


def _engine_on(runtime: FakeCuda, sysfs_root: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Make `probes.bench.api` run its p2p worker in this process on the simulated box (the
    result goes through JSON as it does from a worker process); returns the (kind, nproc) calls."""
    from linkscope.probes.bench import api, preflight

    calls: list[tuple[str, int]] = []

    def in_process(kind: str, spec: dict[str, Any], nproc: int, timeout_s: float, on_progress: Any = None,
                   cancel: Any = None) -> dict[str, Any]:
        calls.append((kind, nproc))
        done: list[tuple[Any, ...]] = []

        def progress(*step: Any) -> None:
            done.append(step)
            if on_progress is not None:
                on_progress(len(done))

        return json.loads(json.dumps(run_p2p(json.loads(json.dumps(spec)), progress, runtime, sysfs_root)))

    monkeypatch.setattr(api, "run_workers", in_process)
    monkeypatch.setattr(preflight, "cuda_device_count", lambda: runtime.device_count())
    monkeypatch.setattr(preflight, "load_pynvml", lambda: None)
    return calls


def test_the_bench_p2p_command_end_to_end_on_the_simulated_dgx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`linkscope bench p2p --json` with the worker on the simulated box: arguments, preflight,
    matrices, expected speeds from the sample, the output file and the exit status."""
    pytest.importorskip("torch")
    runtime, root = _numa_box(tmp_path)
    runtime.box.corrupt = {(3, 2)}
    calls = _engine_on(runtime, root, monkeypatch)
    out_file = tmp_path / "p2p.json"
    code = cli_main(["bench", "p2p", "--pairs", "0-1,3-2,0-4", "--bytes", "16M", "--samples", "3", "--json",
                     "--expect", "sample:dgx-h100", "-o", str(out_file)])
    captured = capsys.readouterr()
    assert code == 1 and calls == [("p2p", 1)]
    assert captured.err == "linkscope: bench p2p found 1 problem(s): copy-corrupted 3->2\n"
    data = json.loads(captured.out)
    first = data["peer"][0]
    assert (first["src"], first["dst"], first["link"]) == (0, 1, "NV18")
    assert first["unidir_gbps"] == pytest.approx(_through(16 * MiB, 370.90, 2.0), rel=1e-6)
    assert first["ratio"] == pytest.approx(first["unidir_gbps"] / first["expected_unidir_gbps"])
    assert data["matrices"]["unidir_gbps"][0][4] == pytest.approx(_through(16 * MiB, 370.38, 2.0), rel=1e-6)
    assert len(data["host"]) == 32
    remote = [row for row in data["host"] if not row["local"]]
    assert len(remote) == 16 and all(row["vs_local"] == pytest.approx(41.0 / 53.0, rel=1e-2) for row in remote)
    assert all(row["vs_local"] is None for row in data["host"] if row["local"])
    assert data["findings"] == [{"code": "copy-corrupted", "severity": "error", "path": "3->2",
                                 "message": "3->2: copied data did not arrive intact; do not trust P2P on this path"}]
    saved = json.loads(out_file.read_text())["measurements"]
    assert [row["verified"] for row in saved["peer_copies"]] == [True, False, True] and len(saved["host_copies"]) == 32


def test_the_bench_tabs_peer_copies_on_the_simulated_dgx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The app's Bench tab path: every ordered pair at each size, progress and partial results per size."""
    import threading

    from linkscope.tui.bench_adapter import run_request
    from linkscope.tui.services import BENCH_KINDS, BenchPlan, BenchProgress, BenchRequest

    runtime, root = _numa_box(tmp_path)
    calls = _engine_on(runtime, root, monkeypatch)
    steps: list[BenchProgress] = []
    request = BenchRequest(kind="p2p", sizes_bytes=(MiB, 8 * MiB))
    plan = BenchPlan(kinds=BENCH_KINDS, backend="nccl", processes=8, where="NCCL on this machine's 8 GPUs")
    measurements = run_request(plan, request, steps.append, threading.Event())
    assert calls == [("p2p", 1), ("p2p", 1)]
    assert [copy.size_bytes for copy in measurements.peer_copies] == [MiB] * 56 + [8 * MiB] * 56
    assert all(copy.verified and copy.p2p_enabled for copy in measurements.peer_copies)
    partial = [step.partial for step in steps if step.partial is not None]
    assert [len(p.peer_copies) for p in partial] == [56, 112]
    assert steps[-1].fraction == pytest.approx(1.0)
    fractions = [step.fraction for step in steps]
    assert fractions == sorted(fractions)


def test_p2p_that_falls_back_through_the_host_is_a_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """GPUs 0 and 5 share NVLink, but the driver gives no peer access (as with a broken fabric
    manager): copies are staged through host memory at PCIe speed and the command says so."""
    pytest.importorskip("torch")
    runtime, root = _numa_box(tmp_path)
    runtime.box.peer_access -= {(0, 5), (5, 0)}
    for pair in ((0, 5), (5, 0)):
        runtime.box.unidir_gbps[pair], runtime.box.bidir_gbps[pair], runtime.box.latency_us[pair] = 22.0, 30.0, 16.0
    _engine_on(runtime, root, monkeypatch)
    code = cli_main(["bench", "p2p", "--pairs", "0-1,0-5", "--bytes", "64M", "--samples", "3", "--no-host", "--json",
                     "--expect", "sample:dgx-h100"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [(f["code"], f["path"]) for f in data["findings"]] == [("p2p-unavailable", "0->5"), ("copy-slow", "0->5")]
    assert data["peer"][1]["p2p_enabled"] is False and data["peer"][1]["latency_us"] == pytest.approx(16.0, rel=1e-2)


def test_both_directions_start_together_although_the_gpus_spin_at_different_clocks() -> None:
    """RTX 2080 Ti pair staged through the host: 5.7 GB/s one way, 6.1 GB/s both ways together.
    GPU 1 spins 30% longer than GPU 0; were each direction released by its own GPU's spin, the
    windows would barely overlap and the sum would read near 11 GB/s instead of 6.1."""
    recording = _recording("rtx2080ti-2gpu-p2pBandwidthLatencyTest-no-p2p.txt")
    rows = []
    for scale in ({}, {1: 1.3}):
        box = box_from_recording(load_sample("consumer-2gpu").host, recording, peer_access=set())
        box.gate_scale = scale
        rows.append(measure_pair(FakeCuda(box), 0, 1, 16 * MiB, copies=4, samples=3))
    assert rows[1]["bidir_gbps"] == pytest.approx(rows[0]["bidir_gbps"], rel=1e-3)
    assert rows[1]["bidir_gbps"] == pytest.approx(_recorded(recording, 0, 1, p2p=False).bidir_gbps, rel=1e-2)


def test_a_pair_cuda_refuses_is_a_note_and_the_other_pairs_are_measured() -> None:
    box = box_from_recording(load_sample("dgx-h100").host, _recording("h100-azure-nd96isr-v5-nvbandwidth-d2d-read-ce.txt"))
    box.refuse = {(0, 2)}
    runtime = FakeCuda(box)
    result = run_p2p(_spec([(0, 1), (0, 2), (0, 3)], size_bytes=16 * MiB), lambda *step: None, runtime)
    assert [(row["src"], row["dst"]) for row in result["peer"]] == [(0, 1), (0, 3)]
    assert result["refused"] == [{"src": 0, "dst": 2, "reason": "CUDA error: peer mapping resources exhausted"}]
    gc.collect()
    assert runtime.free_bytes == box.free_bytes  # the refused pair's buffers went back too


@pytest.mark.parametrize(("argv", "message"), [
    (["--copies", "65"], "--copies: 1 to 64"),
    (["--samples", "0"], "--samples: at least 1"),
    (["--bytes", "2"], "--bytes: at least 4 bytes"),
    (["--pairs", "0-8"], "GPU 8 does not exist"),
])
def test_bad_p2p_options_are_one_line_exit_2(argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    runtime, root = _numa_box(tmp_path)
    calls = _engine_on(runtime, root, monkeypatch)
    assert cli_main(["bench", "p2p", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and calls == []


def test_a_memory_policy_that_moves_the_pinned_buffer_is_said_and_labelled(tmp_path: Path) -> None:
    """Under numactl --membind=0 the buffer meant for node 1 lands on node 0: the rows say node 0."""
    runtime, root = _numa_box(tmp_path)
    runtime.box.membind = 0
    result = run_p2p(_spec([], size_bytes=4 * MiB, host=True), lambda *step: None, runtime, root)
    assert result["notes"] == ["the pinned buffer meant for NUMA node 1 sits on node 0 (a memory policy such as "
                               "numactl --membind overrides first touch); its rows say node 0"]
    assert {row["numa_node"] for row in result["host"]} == {0}
    assert [row["local"] for row in result["host"] if row["gpu"] == 4] == [False] * 4


def test_page_nodes_reads_this_machines_own_pages() -> None:
    """The real move_pages(2) query on this machine: touched pages sit on a node that exists; untouched ones say nothing."""
    import ctypes
    import mmap

    from linkscope.probes.pages import page_nodes

    touched = bytearray(b"x" * (1 << 20))
    address = ctypes.addressof((ctypes.c_char * len(touched)).from_buffer(touched))
    nodes = page_nodes(address, len(touched))
    existing = {int(path.name[4:]) for path in Path("/sys/devices/system/node").glob("node[0-9]*")}
    assert nodes is not None and nodes <= existing
    untouched = mmap.mmap(-1, 1 << 20)
    assert page_nodes(ctypes.addressof(ctypes.c_char.from_buffer(untouched)), 1 << 20) is None


def test_an_interrupted_p2p_run_reports_the_pairs_it_measured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C after two of three pairs: the worker had kept the devices and two rows; the command
    prints them, writes -o, and exits 130."""
    pytest.importorskip("torch")
    from linkscope.probes.bench import api, preflight
    from linkscope.probes.bench.runner import BenchInterrupted

    runtime, root = _numa_box(tmp_path)

    def interrupted(kind: str, spec: dict[str, Any], nproc: int, timeout_s: float, on_progress: Any = None,
                    cancel: Any = None) -> dict[str, Any]:
        kept: list[tuple[str, Any]] = []
        run_p2p(json.loads(json.dumps(spec)), lambda *step: None, runtime, root, lambda k, v: kept.append((k, v)))
        error = BenchInterrupted("interrupted")
        error.kept = json.loads(json.dumps(kept[:3]))  # devices and the first two pairs
        raise error

    monkeypatch.setattr(api, "run_workers", interrupted)
    monkeypatch.setattr(preflight, "cuda_device_count", lambda: 8)
    monkeypatch.setattr(preflight, "load_pynvml", lambda: None)
    out_file = tmp_path / "partial.json"
    code = cli_main(["bench", "p2p", "--pairs", "0-1,0-2,0-3", "--bytes", "1M", "--no-host", "--json",
                     "--expect", "sample:dgx-h100", "-o", str(out_file)])
    captured = capsys.readouterr()
    assert code == 130
    assert captured.err == "linkscope: bench interrupted; workers ended; what it measured before is shown above\n"
    data = json.loads(captured.out)
    assert [(row["src"], row["dst"]) for row in data["peer"]] == [(0, 1), (0, 2)]
    assert data["notes"][-1] == "run cut short (interrupted): 2 pair(s), 0 host row(s) measured"
    assert len(json.loads(out_file.read_text())["measurements"]["peer_copies"]) == 2


@pytest.mark.parametrize(("refuse", "code", "err"), [
    ({(0, 2)}, 1, "linkscope: bench p2p found 1 problem(s): pair-not-measured 0->2\n"),
    ({(0, 1), (0, 2)}, 2, "linkscope: error: bench p2p: nothing could be measured (see the findings)\n"),
])
def test_refused_pairs_are_findings_and_nothing_measured_is_a_failure(refuse: set[tuple[int, int]], code: int, err: str,
                                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    runtime, root = _numa_box(tmp_path)
    runtime.box.refuse = refuse
    _engine_on(runtime, root, monkeypatch)
    assert cli_main(["bench", "p2p", "--pairs", "0-1,0-2", "--bytes", "64M", "--no-host", "--json",
                     "--expect", "sample:dgx-h100"]) == code
    captured = capsys.readouterr()
    assert captured.err == err
    data = json.loads(captured.out)
    assert {f["path"] for f in data["findings"] if f["code"] == "pair-not-measured"} == {f"{a}->{b}" for a, b in refuse}


H200_VM = FIXTURES / "real" / "gpu" / "h200-580.159.04"


def _h200_vm(tmp_path: Path) -> tuple[FakeCuda, str, Path]:
    """The recorded H200 VM: one GPU whose NUMA node the kernel does not state (-1), one NUMA node of 16 CPUs,
    pinned copies at the rates bench p2p measured there (55.37 / 55.32 GB/s), pageable at the measured share
    of them (8.5 / 55.37), copies within the GPU at 2106.8 GB/s."""
    from linkscope.topo.model.codec import from_jsonable
    from linkscope.topo.model.snapshot import Snapshot

    snapshot_file = tmp_path / "h200.json"
    snapshot = json.loads((H200_VM / "probe.json").read_text())["snapshot"]
    snapshot_file.write_text(json.dumps(snapshot))
    host = from_jsonable(Snapshot, snapshot).host
    box = FakeBox(names=["NVIDIA H200"], bus_ids=["00000000:00:06.0"], free_bytes=[140 * 1024**3], unidir_gbps={},
                  bidir_gbps={}, latency_us={}, peer_access=set(),
                  host_gbps={(0, 0, "h2d"): 55.37, (0, 0, "d2h"): 55.32}, node_cpus={0: set(range(16))},
                  local_gbps=2106.8, pageable_share=8.5 / 55.37)
    return FakeCuda(box), str(build_sysfs(tmp_path / "sysfs", host)), snapshot_file


def test_a_vm_of_one_numa_node_judges_its_host_copies_and_says_why(tmp_path: Path) -> None:
    """On the H200 VM the GPU has no NUMA node in sysfs; with one node on the machine its copies are local (and
    so judged), which the first real run showed they were not."""
    runtime, root, _ = _h200_vm(tmp_path)
    result = run_p2p({**_spec([], size_bytes=64 * MiB, host=True), "pageable": True, "local": True}, lambda *step: None,
                     runtime, root)
    assert [(row["direction"], row["numa_node"], row["local"]) for row in result["host"]] == [("h2d", 0, True),
                                                                                                ("d2h", 0, True)]
    assert result["host"][0]["gbps"] == pytest.approx(_through(64 * MiB, 55.37, 2.0), rel=1e-6)
    assert [(row["direction"], row["memory"], row["numa_node"]) for row in result["pageable"]] == [
        ("h2d", "pageable", 0), ("d2h", "pageable", 0)]
    assert result["pageable"][0]["gbps"] == pytest.approx(_through(64 * MiB, 8.5, 2.0), rel=1e-6)
    (local,) = result["local_copies"]
    assert local["gbps"] == pytest.approx(_through(64 * MiB, 2106.8, 2.0), rel=1e-6) and local["verified"] is True
    assert result["notes"] == ["GPU 0: the kernel states no NUMA node for it; the machine has one NUMA node (0), so its "
                               "host copies count as local"]


def test_bench_p2p_local_and_pageable_end_to_end_on_the_h200_vm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    runtime, root, snapshot_file = _h200_vm(tmp_path)
    _engine_on(runtime, root, monkeypatch)
    code = cli_main(["bench", "p2p", "--local", "--pageable", "--bytes", "256M", "--json", "--expect", str(snapshot_file)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(row["direction"], row["verdict"], row["expected_gbps"]) for row in data["host"]] == [
        ("h2d", "ok", 51.66), ("d2h", "ok", 51.66)]
    assert [(row["direction"], row["verdict"]) for row in data["pageable"]] == [("h2d", None), ("d2h", None)]
    assert data["pageable"][0]["ratio"] == pytest.approx(data["pageable"][0]["gbps"] / 51.66)
    assert [row["gpu"] for row in data["local_copies"]] == [0]
    code = cli_main(["bench", "p2p", "--local", "--pageable", "--bytes", "64M", "--expect", str(snapshot_file)])
    text = capsys.readouterr().out
    assert code == 0 and "pageable memory (not judged)" in text and "within one GPU" in text


def test_one_gpu_and_no_host_copies_needs_local_or_pageable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="bench checks for torch before it counts the GPUs")
    runtime, root, _ = _h200_vm(tmp_path)
    _engine_on(runtime, root, monkeypatch)
    assert cli_main(["bench", "p2p", "--no-host"]) == 2
    assert capsys.readouterr().err == ("linkscope: error: bench p2p: one GPU and --no-host leave nothing to measure "
                                       "(add --local or --pageable)\n")
