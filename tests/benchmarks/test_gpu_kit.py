"""benchmarks/gpu/verify: its dry run on this machine (no GPU), and its checks fed with what a real H200 recorded.

The kit's GPU steps cannot run here; their judging halves (copies against a plain torch loop, PCIe counters
against a known load, the trace reader against the trace's own counts, the probe against nvidia-smi) are run
on the outputs the kit recorded on a real machine (tests/fixtures/real/gpu/h200-580.159.04/).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from support.paths import ROOT

KIT = ROOT / "benchmarks" / "gpu"
H200 = ROOT / "tests" / "fixtures" / "real" / "gpu" / "h200-580.159.04"
sys.path.insert(0, str(KIT))

import ddp_step  # noqa: E402
import verify_steps  # noqa: E402
from driver_view import parse_nvlink_status, parse_query_xml, parse_topo_matrix  # noqa: E402


def _kit(tmp_path: Path) -> verify_steps.Kit:
    raw = tmp_path / "raw"
    raw.mkdir(parents=True)
    return verify_steps.Kit(repo=ROOT, work=tmp_path, raw=raw, deadline_s=float("inf"))


def _verdicts(kit: verify_steps.Kit) -> dict[str, str]:
    return {row.check: row.verdict for row in kit.rows}


def test_the_driver_view_reads_the_h200s_nvidia_smi_as_stated() -> None:
    """Facts read by hand from the machine's nvidia-smi -q: one H200 at 00000000:00:06.0, PCIe gen5 x16
    (current and max), 143771 MiB, driver 580.159.04, CUDA 13.0."""
    view = parse_query_xml((H200 / "nvidia-smi-q-x.xml").read_text())
    assert (view.driver_version, view.cuda_version, len(view.gpus)) == ("580.159.04", "13.0", 1)
    gpu = view.gpus[0]
    assert (gpu.bus_id, gpu.uuid, gpu.name) == ("00000000:00:06.0", "GPU-48667122-401e-af61-5391-f2179faae6d0", "NVIDIA H200")
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert gpu.memory_total_mib == 143771 and gpu.pcie_gen_host_max is None
    matrix = parse_topo_matrix((H200 / "nvidia-smi-topo-m.txt").read_text())
    assert matrix.columns == ["GPU0"] and matrix.rows["GPU0"]["GPU0"] == "X" and matrix.numa_affinity == {"GPU0": "0"}
    assert parse_nvlink_status("") == {}
    assert parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n") == {
        0: {0: True, 1: False}}


def test_the_probe_on_the_h200_agrees_with_its_driver(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    kit.driver = parse_query_xml((H200 / "nvidia-smi-q-x.xml").read_text())
    kit.matrix = parse_topo_matrix((H200 / "nvidia-smi-topo-m.txt").read_text())
    kit.nvlink = {0: {}}
    kit.cuda_bus_ids = ["00000000:00:06.0"]
    probe = json.loads((H200 / "probe.json").read_text())
    (kit.raw / "probe-snapshot.json").write_text(json.dumps(probe["snapshot"]))
    verify_steps._probe_against_driver(kit, probe)
    verdicts = _verdicts(kit)
    assert {verdict for verdict in verdicts.values()} <= {"pass", "info"}, kit.rows
    for check in ("GPU 0 bus id", "GPU 0 UUID", "GPU 0 PCIe gen max", "GPU 0 PCIe width current", "GPU 0 NVLinks active",
                  "identity: NVML 0 is cuda:0 (bus id)", "link matrix tokens vs topo -m", "GPU 0 memory (MiB)"):
        assert verdicts[check] == "pass", check


def test_a_probe_that_disagrees_with_the_driver_fails_the_check(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    kit.driver = parse_query_xml((H200 / "nvidia-smi-q-x.xml").read_text())
    probe = json.loads((H200 / "probe.json").read_text())
    probe["snapshot"]["hosts"][0]["gpus"][0]["pcie_width_current"] = 8
    verify_steps._probe_against_driver(kit, probe)
    assert _verdicts(kit)["GPU 0 PCIe width current"] == "FAIL"


def test_the_h200_copies_are_within_five_percent_of_a_plain_torch_loop(tmp_path: Path) -> None:
    """bench p2p on the H200 against the plain loop (both recorded there): pinned h2d 55.37 against 54.65
    GB/s, local 2106.8 against 2070.6, pageable above the loop; a harness 10% slower would fail."""
    kit = _kit(tmp_path)
    ours = json.loads((H200 / "bench-p2p.json").read_text())
    reference = json.loads((H200 / "reference-copies.json").read_text())["gbps"]
    verify_steps.judge_copies(kit, ours, reference)
    verdicts = _verdicts(kit)
    assert [verdicts[f"{kind} GB/s (GPU 0) vs plain torch loop"] for kind in
            ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h", "local_d2d")] == ["pass"] * 5
    slower = _kit(tmp_path / "slower")
    verify_steps.judge_copies(slower, ours, {kind: gbps * 1.1 for kind, gbps in reference.items()})
    assert _verdicts(slower)["pinned_h2d GB/s (GPU 0) vs plain torch loop"] == "FAIL"


def test_the_h200s_pcie_counters_saw_the_known_load(tmp_path: Path) -> None:
    """The load moved 55.0 GB/s host->GPU, then 54.9 back; NVML's receive and transmit counters read about that."""
    kit = _kit(tmp_path)
    phases = json.loads((H200 / "copy-load.json").read_text())["phases"]
    recording = json.loads((H200 / "record.json").read_text())["recording"]
    verify_steps.judge_record(kit, phases, recording)
    verdicts = _verdicts(kit)
    assert verdicts == {"PCIe rx GB/s during h2d load": "pass", "PCIe tx GB/s during d2h load": "pass"}
    swapped = _kit(tmp_path / "swapped")  # counters read the wrong way round would not match the load's direction
    for sample in recording["samples"]:
        for gpu in sample["gpus"]:
            gpu["pcie_rx_gbps"], gpu["pcie_tx_gbps"] = 0.0, 0.0
    verify_steps.judge_record(swapped, phases, recording)
    assert set(_verdicts(swapped).values()) == {"FAIL"}


def test_the_trace_reader_counts_the_h200s_ncc_calls_without_kernels(tmp_path: Path) -> None:
    """At world size 1 NCCL launched no kernel; the 12 nccl:all_reduce calls are still counted."""
    trace = tmp_path / "trace.pt.trace.json"
    trace.write_bytes(gzip.decompress((H200 / "ddp-step-nccl-1rank.pt.trace.json.gz").read_bytes()))
    counted = {"backend": "nccl", **ddp_step.count_trace(str(trace))}
    assert counted == {"backend": "nccl", "profiler_steps": 6, "gpu_kernels": 126, "nccl_kernels": 0,
                       "collective_cpu_ops": 12}
    done = subprocess.run([sys.executable, "-m", "linkscope", "trace", str(trace), "--json"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    kit = _kit(tmp_path)
    verify_steps.judge_trace(kit, counted, json.loads(done.stdout))
    verdicts = _verdicts(kit)
    assert verdicts["profiler steps read"] == "pass" and verdicts["collective calls read (timed on the GPU)"] == "pass"


def test_the_world_size_one_collectives_are_said_not_judged(tmp_path: Path) -> None:
    kit = _kit(tmp_path)
    data = json.loads((H200 / "bench-collectives.json").read_text())
    verify_steps.judge_collectives(kit, data)  # recorded before the one-rank note existed: the check says so
    assert _verdicts(kit)["world size 1: nothing judged, and said"] == "FAIL"
    data["notes"].append("one rank: nothing crosses a link")
    again = _kit(tmp_path / "again")
    verify_steps.judge_collectives(again, data)
    assert _verdicts(again)["world size 1: nothing judged, and said"] == "pass"


@pytest.mark.skipif(sys.platform != "linux", reason="the kit is for Linux GPU machines")
def test_the_kit_runs_green_without_a_gpu_and_says_what_it_skipped(tmp_path: Path) -> None:
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: the dry run is for machines without one")
    except ImportError:
        pass
    outdir = tmp_path / "out"
    env = {key: value for key, value in os.environ.items() if key != "LINKSCOPE_NVML_RECORD"}
    done = subprocess.run([sys.executable, str(KIT / "verify"), str(outdir), "--budget", "240"], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    files = sorted(path.name for path in outdir.iterdir())
    assert files == ["raw.tar.gz", "summary.json", "summary.md", "verify.log"]
    summary = json.loads((outdir / "summary.json").read_text())
    verdicts = {row["check"]: row["verdict"] for row in summary["rows"]}
    assert "FAIL" not in verdicts.values()
    assert verdicts["bench-copies"] == verdicts["record"] == verdicts["gpu-tests"] == "skipped"
    assert any(note.startswith("bench-copies: skipped: ") for note in summary["notes"])
    assert verdicts["linkscope probe --json"] == "pass" and verdicts["linkscope show (the probe's snapshot)"] == "pass"
    with tarfile.open(outdir / "raw.tar.gz") as archive:
        names = set(archive.getnames())
    assert {"raw/probe.out", "raw/environment.out", "raw/sysfs.json"} <= names
