"""The real pynvml over a C stand-in for libnvidia-ml.so.1: the probe, the live sampler and the
benchmark preflight, end to end, for every sample and every driver behaviour the fakes can switch.

The stand-in is compiled once per session with the system C compiler; every scenario runs in one
subprocess per library build (pynvml loads the library once per process, through LD_LIBRARY_PATH)
and its JSON result must equal what the same scenario gives over the Python fake, in this process.
Without a C compiler these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from linkscope.probes.identity import identity_table
from linkscope.topo.machine.links import link_speed
from linkscope.topo.model.codec import from_jsonable
from linkscope.topo.model.host import LinkKind
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import sample_names
from support.fakes.fake_nvml import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
)
from support.fakes.nvml_standin import build, compiler
from support.fakes.nvml_standin.scenario import Scenario, run
from support.paths import ROOT, TESTS

NO_COMPILER = ("no C compiler (cc or gcc) on PATH: the libnvidia-ml.so.1 stand-in cannot be built, so the real "
               "pynvml is not tested against it (.ci/run installs gcc)")

SAMPLES = sample_names()
NEWER_FUNCTIONS = ("nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetGpuFabricInfoV")
"""What the stand-in built as an old driver lacks."""

SCENARIOS: dict[str, Scenario] = {
    **{f"{name}-{kind}": Scenario(name, run=kind) for name in SAMPLES for kind in ("probe", "live", "preflight")},
    "h100-reported-numbering": Scenario("dgx-h100", quirks={"nvlink_version_numbering": "reported"}),
    "a100-reported-numbering": Scenario("dgx-a100", quirks={"nvlink_version_numbering": "reported"}),
    "a100-links-report-total": Scenario("dgx-a100", run="live", quirks={"per_link_counters_report_total": True}),
    "a100-links-report-total-no-aggregate": Scenario(
        "dgx-a100", run="live", quirks={"per_link_counters_report_total": True, "aggregate_throughput": False}),
    "a100-no-aggregate": Scenario("dgx-a100", run="live", quirks={"aggregate_throughput": False}),
    "hopper-errors": Scenario("dgx-h100", run="live", quirks={"legacy_error_fields": False}),
    "blackwell-errors": Scenario("dgx-h100", run="live", variant="links36", quirks={
        "legacy_error_fields": False, "per_link_error_fields": False, "nvlink5_error_fields": True}),
    "legacy-errors": Scenario("dgx-a100", run="live", quirks={"per_link_error_fields": False}),
    "no-error-fields": Scenario("dgx-h100", run="live", quirks={"legacy_error_fields": False, "per_link_error_fields": False}),
    "switch-sentinel": Scenario("dgx-h100", quirks={"switch_remote_sentinel": True}),
    "switch-sentinel-degraded": Scenario("dgx-h100-degraded", quirks={"switch_remote_sentinel": True}),
    "switch-no-count-field": Scenario("dgx-h100-degraded", quirks={"switch_link_count_field": False}),
    "switch-type-unknown": Scenario("dgx-h100-degraded", quirks={"switch_remote_sentinel": True},
                                    fail=(("nvmlDeviceGetNvLinkRemoteDeviceType", NVML_ERROR_NOT_SUPPORTED, None),)),
    "switch-partitioned": Scenario("dgx-h100", variant="partitioned", quirks={"switch_remote_sentinel": True}),
    "fabric-padding": Scenario("dgx-h100", quirks={"fabric_state_padding": True}),
    "idle-pcie": Scenario("pcie-l40s-8", quirks={"idle_pcie_gen": 1}),
    "idle-pcie-live": Scenario("pcie-l40s-8", run="live", quirks={"idle_pcie_gen": 1}),
    "links36": Scenario("dgx-h100", variant="links36"),
    "links36-live": Scenario("dgx-h100", run="live", variant="links36"),
    "mig": Scenario("dgx-a100", variant="mig"),
    "faults": Scenario("dgx-h100", fail=(("nvmlDeviceGetName", NVML_ERROR_NO_PERMISSION, 2),
                                         ("nvmlDeviceGetP2PStatus", NVML_ERROR_NO_PERMISSION, 6)), lost=(5,)),
    "faults-live": Scenario("dgx-h100", run="live", lost=(5,)),
    "lost-mid-read": Scenario("dgx-a100", fail=(("nvmlDeviceGetNvLinkRemotePciInfo", NVML_ERROR_GPU_IS_LOST, 3),)),
    "version-mismatch": Scenario("dgx-a100", init_error=NVML_ERROR_LIB_RM_VERSION_MISMATCH),
    "busy-gpus": Scenario("dgx-h100", run="preflight", processes=((1, 2),), memory_used_bytes=((3, 85_000_000_000),)),
}
TIMED: dict[str, Scenario] = {
    "hung-p2p": Scenario("dgx-a100", hang=(("nvmlDeviceGetP2PStatus", None),), budget_s=1.0),
    "slow-start": Scenario("consumer-2gpu", slow_init_s=1.2),
    "slow-first-touch": Scenario("dgx-h100", first_touch_s=0.4, budget_s=1.0),
}
"""Scenarios that take wall-clock time: run in their own subprocess, compared by what they report."""
OLD_DRIVER = Scenario("dgx-h100", fail=tuple((name, NVML_ERROR_FUNCTION_NOT_FOUND, None) for name in NEWER_FUNCTIONS))


def _drive(library: Path, scenarios: list[Scenario], workdir: Path) -> list[Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    listing = workdir / "scenarios.json"
    listing.write_text(json.dumps([scenario.to_json() for scenario in scenarios]))
    env = dict(os.environ, LD_LIBRARY_PATH=str(library), PYTHONPATH=str(TESTS))
    done = subprocess.run([sys.executable, "-m", "support.fakes.nvml_standin.drive", str(listing), str(workdir)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[Any] = json.loads(done.stdout)
    return results


@pytest.fixture(scope="session")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stand-in built twice: as a current driver and as an older one (fewer symbols)."""
    if compiler() is None:
        pytest.skip(NO_COMPILER)
    base = tmp_path_factory.mktemp("nvml-standin")
    return {"current": build(base / "current"), "old": build(base / "old", old_driver=True)}


@pytest.fixture(scope="session")
def real(libraries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every scenario's result over the real pynvml and the C stand-in, by scenario name."""
    work = tmp_path_factory.mktemp("nvml-standin-runs")
    results = dict(zip(SCENARIOS, _drive(libraries["current"], list(SCENARIOS.values()), work / "plain"), strict=True))
    results.update(zip(TIMED, _drive(libraries["current"], list(TIMED.values()), work / "timed"), strict=True))
    results["old-driver"] = _drive(libraries["old"], [Scenario("dgx-h100")], work / "old")[0]
    return results


@pytest.fixture(scope="session")
def python_fake(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Scenario], Any]:
    """Runs a scenario over the Python fake, in this process."""
    workdir = tmp_path_factory.mktemp("python-fake-runs")
    return lambda scenario: run_over_python_fake(scenario, workdir)


def run_over_python_fake(scenario: Scenario, workdir: Path) -> Any:
    """The same scenario over the Python fake, in this process."""
    fake = scenario.fake()
    try:
        return run(scenario, fake, fake, lambda _: None, workdir)
    finally:
        fake.release_all()


def snapshot_of(result: Any) -> Snapshot:
    return from_jsonable(Snapshot, {**result, "created": None})


def gap_reasons(result: Any, subject_start: str) -> list[str]:
    return [gap["reason"] for gap in result["gaps"] if gap["subject"].startswith(subject_start)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_real_pynvml_over_the_stand_in_equals_the_python_fake(
    real: dict[str, Any], python_fake: Callable[[Scenario], Any], name: str
) -> None:
    assert real[name] == python_fake(SCENARIOS[name])


def test_every_sample_probes_to_its_own_matrix(real: dict[str, Any]) -> None:
    from linkscope.topo.samples import load_sample

    for name in SAMPLES:
        probed = snapshot_of(real[f"{name}-probe"]).host
        assert probed.matrix_tokens() == load_sample(name).host.matrix_tokens(), name


def test_an_older_driver_lacking_symbols_answers_function_not_found_like_the_python_fake(
    real: dict[str, Any], python_fake: Callable[[Scenario], Any]
) -> None:
    assert real["old-driver"] == python_fake(OLD_DRIVER)
    assert real["old-driver"]["hosts"][0]["versions"]["cuda_driver"] == "12.2"
    assert real["old-driver"]["hosts"][0]["capabilities"]["nvlink_fabric"] is None
    assert not [gap for gap in real["old-driver"]["gaps"] if "FunctionNotFound" in gap["reason"]]


def test_h100_reported_as_nvlink_version_7_is_judged_as_nvlink4_with_a_gap(real: dict[str, Any]) -> None:
    host = snapshot_of(real["h100-reported-numbering"]).host
    assert {link.nvlink_gen for link in host.links} == {4}
    assert link_speed(host, host.link(0, 1)).spec_gbps == 450.0
    gaps = [gap for gap in real["h100-reported-numbering"]["gaps"] if gap["subject"].startswith("nvmlDeviceGetNvLinkVersion")]
    assert len(gaps) == 1 and "(8x" in gaps[0]["subject"], gaps
    assert "answers version 7" in gaps[0]["reason"] and "NVLink 4" in gaps[0]["reason"]
    assert not gap_reasons(real["dgx-h100-probe"], "nvmlDeviceGetNvLinkVersion")
    assert not gap_reasons(real["a100-reported-numbering"], "nvmlDeviceGetNvLinkVersion")


def _second(result: Any, gpu: int = 0) -> Any:
    return result[1]["gpus"][gpu]


def test_totals_come_from_the_aggregate_counter_and_equal_links_are_not_summed(real: dict[str, Any]) -> None:
    # 12 A100 links at 10 GB/s each: 120 GB/s per direction, whatever the per-link counters say
    for name in ("dgx-a100-live", "a100-links-report-total"):
        gpu = _second(real[name])
        assert gpu["nvlink_tx_gbps"] == pytest.approx(120.0, rel=1e-6), name
        assert gpu["nvlink_rx_gbps"] == pytest.approx(120.0, rel=1e-6), name
    assert [link["tx_gbps"] for link in _second(real["dgx-a100-live"])["links"]] == pytest.approx([10.0] * 12, rel=1e-6)
    for name in ("a100-links-report-total", "a100-links-report-total-no-aggregate", "a100-no-aggregate"):
        assert {link["tx_gbps"] for link in _second(real[name])["links"]} == {None}, name
        assert any("every link reports the same counter" in gap["reason"] for reading in real[name] for gap in reading["gaps"])
    # without the aggregate, equal per-link counters cannot tell the total: unknown, not 12x or 1/12 of it
    for name in ("a100-links-report-total-no-aggregate", "a100-no-aggregate"):
        assert _second(real[name])["nvlink_tx_gbps"] is None, name
    assert not any("same counter" in gap["reason"] for reading in real["dgx-a100-live"] for gap in reading["gaps"])


def test_error_counters_prefer_newer_fields_and_never_read_empty_as_zero(real: dict[str, Any]) -> None:
    assert dict(map(tuple, _second(real["hopper-errors"])["nvlink_error_deltas"])) == {"replay": 54, "recovery": 54, "crc": 54}
    blackwell = dict(map(tuple, _second(real["blackwell-errors"])["nvlink_error_deltas"]))
    assert set(blackwell) == {"rcv_errors", "xmit_discards", "recovery_failed", "effective_errors", "symbol_errors"}
    assert set(blackwell.values()) == {3 * 36}
    legacy = dict(map(tuple, _second(real["legacy-errors"])["nvlink_error_deltas"]))
    assert legacy == {"crc_flit": 36, "crc_data": 36, "replay": 36, "recovery": 36}
    none = real["no-error-fields"]
    assert _second(none)["nvlink_errors"] == [] and _second(none)["nvlink_error_deltas"] == []
    assert any("errors unknown, not zero" in gap["reason"] for gap in none[0]["gaps"])


def test_nvswitch_pairs_come_from_the_switch_link_count_not_remote_bus_ids(real: dict[str, Any]) -> None:
    sentinel = snapshot_of(real["switch-sentinel"]).host
    assert {token for row in sentinel.matrix_tokens() for token in row} == {"X", "NV18"}
    assert {port.remote_pci_bus_id for gpu in sentinel.gpus for port in gpu.nvlinks} == {None}
    degraded = snapshot_of(real["switch-sentinel-degraded"]).host
    assert degraded.link(3, 0).token == "NV16" and degraded.link(0, 1).token == "NV18"
    assert snapshot_of(real["switch-no-count-field"]).host.link(3, 0).token == "NV16"
    # remote device type unreadable and every remote bus id the sentinel: the switch link count still tells
    unknown = snapshot_of(real["switch-type-unknown"])
    assert unknown.host.link(3, 0).token == "NV16" and unknown.host.link(0, 7).token == "NV18"
    assert {port.remote_type for gpu in unknown.host.gpus for port in gpu.nvlinks} == {None}
    assert any(gap.subject.startswith("nvmlDeviceGetNvLinkRemoteDeviceType") for gap in unknown.gaps)
    split = snapshot_of(real["switch-partitioned"]).host
    assert split.link(0, 3).token == "NV18" and split.link(4, 7).token == "NV18"
    assert split.link(0, 4).kind is not LinkKind.NVLINK and split.link(3, 7).kind is not LinkKind.NVLINK


def test_fabric_state_is_masked_to_its_one_byte(real: dict[str, Any]) -> None:
    assert real["fabric-padding"]["hosts"][0]["capabilities"]["nvlink_fabric"] == "Completed"


def test_an_idle_gpu_training_pcie_down_is_not_a_fault(real: dict[str, Any]) -> None:
    from linkscope.topo.checks.check import check_layout
    from linkscope.topo.checks.request import CheckRequest

    idle, busy = snapshot_of(real["idle-pcie"]), snapshot_of(real["pcie-l40s-8-probe"])
    assert {gpu.pcie_gen_current for gpu in idle.host.gpus} == {1}
    assert idle.gaps == busy.gaps
    assert [link_speed(idle.host, link) for link in idle.host.links] == [link_speed(busy.host, link) for link in busy.host.links]
    request = CheckRequest(sizes=(("tp", 8),))
    assert check_layout(idle, request).findings == check_layout(busy, request).findings
    assert all(gpu["pcie_gen_current"] == 1 for gpu in real["idle-pcie-live"][1]["gpus"])
    from linkscope.probes.live import GpuLive

    assert not any(from_jsonable(GpuLive, gpu).pcie_downgraded for gpu in real["idle-pcie-live"][1]["gpus"])


def test_36_nvlinks_per_gpu(real: dict[str, Any]) -> None:
    host = snapshot_of(real["links36"]).host
    assert all(len(gpu.nvlinks) == 36 for gpu in host.gpus) and host.link(0, 7).token == "NV36"
    assert host.link(0, 7).nvlink_gen == 5
    assert _second(real["links36-live"])["nvlink_tx_gbps"] == pytest.approx(360.0, rel=1e-6)


def test_mig_devices_appear_in_the_identity_table(real: dict[str, Any]) -> None:
    host = snapshot_of(real["mig"]).host
    rows = identity_table(host, env={}).rows
    assert host.gpus[0].mig_enabled and [mig.gpu_instance_id for mig in rows[0].mig_devices] == [1, 2]
    assert all((mig.uuid or "").startswith("MIG-") for mig in rows[0].mig_devices)
    assert rows[1].mig_devices == ()


def test_faults_through_the_c_library(real: dict[str, Any]) -> None:
    faults = snapshot_of(real["faults"])
    assert [gpu.index for gpu in faults.host.gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert faults.host.gpus[2].name == "" and "NoPermission" in gap_reasons(real["faults"], "nvmlDeviceGetName")
    assert [gpu["index"] for gpu in real["faults-live"][1]["gpus"]] == [0, 1, 2, 3, 4, 6, 7]
    mismatch = snapshot_of(real["version-mismatch"])
    assert any("differ in version" in value for key, value in mismatch.meta if key == "note")


def test_preflight_sees_busy_gpus_through_the_c_library(real: dict[str, Any]) -> None:
    from linkscope.probes.bench.preflight import GpuState, problems

    states = [from_jsonable(GpuState, state) for state in real["busy-gpus"]]
    assert [state.processes for state in states] == [0, 2, 0, 0, 0, 0, 0, 0]
    found = problems(states)
    assert found == ["GPU 1 runs 2 other compute process(es)", "GPU 3 has only 0.5 GiB free"]


def test_a_hung_call_ends_within_the_budget(real: dict[str, Any]) -> None:
    result = real["hung-p2p"]
    assert any("timed out after 1 s" in gap["reason"] for gap in result["gaps"])
    assert len(result["hosts"][0]["gpus"]) == 8


def test_a_slow_nvml_start_is_reported_not_silent(real: dict[str, Any], python_fake: Callable[[Scenario], Any]) -> None:
    for result in (real["slow-start"], python_fake(TIMED["slow-start"])):
        notes = [value for key, value in result["meta"] if key == "note"]
        assert any("slow to start" in note and "persistence daemon" in note for note in notes), notes
    for result in (real["slow-first-touch"], python_fake(TIMED["slow-first-touch"])):
        notes = [value for key, value in result["meta"] if key == "note"]
        assert any(note.startswith("partial snapshot") and "--budget" in note for note in notes), notes
        assert len(result["hosts"][0]["gpus"]) < 8


def _resolved_symbol(function: str) -> str:
    """The C symbol the installed pynvml resolves for `function`, read from its source (one delegation deep)."""
    import inspect
    import re

    import pynvml

    source = inspect.getsource(getattr(pynvml, function))
    found = re.search(r'_nvmlGetFunctionPointer\("(\w+)"\)', source)
    if found:
        return found.group(1)
    delegate = re.search(r"(?:return\s+)?(nvml\w+)\(", source.split(":", 1)[1])
    assert delegate, function
    return _resolved_symbol(delegate.group(1))


def test_the_stand_in_is_keyed_by_the_symbols_the_installed_pynvml_calls() -> None:
    from support.fakes.fake_nvml import FakeNvml
    from support.fakes.nvml_standin import SOURCE
    from support.fakes.nvml_standin.describe import c_symbol

    exported = SOURCE.read_text()
    for function in sorted(name for name in dir(FakeNvml) if name.startswith("nvml")):
        symbol = _resolved_symbol(function)
        assert c_symbol(function) == symbol, function
        assert f"{symbol}(" in exported or f"UINT_GETTER({symbol})" in exported, symbol


def test_linkscope_probe_budget_flag_over_the_stand_in(libraries: dict[str, Path], tmp_path: Path) -> None:
    """`linkscope probe --budget` over the real pynvml: a box without the persistence daemon is reported partial."""
    from support.fakes.nvml_standin.describe import write_description

    fake = Scenario("dgx-h100", first_touch_s=0.4).fake()
    description = write_description(fake, tmp_path / "machine.txt")
    env = dict(os.environ, LD_LIBRARY_PATH=str(libraries["current"]), LINKSCOPE_NVML_DESCRIPTION=str(description),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "linkscope", "probe", "--budget", "1", "--json"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(done.stdout)["snapshot"]
    notes = [value for key, value in snapshot["meta"] if key == "note"]
    assert any(note.startswith("partial snapshot: NVML did not finish within the 1 s budget") for note in notes), notes
    assert 0 < len(snapshot["hosts"][0]["gpus"]) < 8
    assert snapshot["hosts"][0]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
