"""What a real GPU machine recorded (tests/fixtures/real/gpu/, written by benchmarks/gpu/verify), replayed.

The NVML recording of the probe is replayed through the Python fake and, over the real pynvml,
through the C stand-in: both must give exactly the facts the probe read on the machine. The facts
the tests assert about the machine (bus id, UUID, PCIe gen5 x16, 143771 MiB, driver 580.159.04, no
NVLink, one NUMA node) were read by hand from its `nvidia-smi -q` output, not from linkscope.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from linkscope.probes.host import probe_host
from linkscope.probes.nvml import NvmlFacts, collect
from linkscope.probes.nvml_query import NvmlQuery
from linkscope.probes.nvml_recording import NvmlRecorder, nvml_facts_json, read_recording, sessions
from linkscope.topo.model.codec import from_jsonable
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.samples import load_sample
from support.fakes import build_sysfs
from support.fakes.fake_nvml import FakeNvml
from support.fakes.nvml_replay import ReplayNvml
from support.fakes.nvml_standin import build, compiler
from support.paths import ROOT, TESTS

H200 = ROOT / "tests" / "fixtures" / "real" / "gpu" / "h200-580.159.04"
RECORDING = (H200 / "nvml-recording.jsonl").read_text()


def _session(argv_start: list[str]) -> int:
    """Position of the first recorded session whose command line starts with `argv_start`."""
    headers = [header for header, _ in sessions(read_recording(RECORDING))]
    return next(number for number, header in enumerate(headers) if header["argv"][:len(argv_start)] == argv_start)


def _facts_over(module: Any) -> dict[str, Any]:
    """What the probe's NVML reader makes of `module`, as the JSON the machine wrote (tuples as lists)."""
    facts = NvmlFacts()
    query = NvmlQuery(module)
    collect(query, facts)
    return json.loads(json.dumps(nvml_facts_json(facts, query.gaps), default=str))


def test_the_recording_holds_every_session_the_kit_ran() -> None:
    headers = [header["argv"][:1] for header, _ in sessions(read_recording(RECORDING))]
    assert headers == [["probe"], [], ["doctor"], ["bench"], ["bench"], ["bench"], ["bench"], ["record"], ["record"],
                       ["record"]]


def test_the_python_replay_gives_the_facts_read_on_the_machine() -> None:
    recorded = json.loads((H200 / "nvml-facts.json").read_text())
    replayed = _facts_over(ReplayNvml.from_text(RECORDING, session=_session([])))
    assert replayed == recorded
    gpu = replayed["facts"]["gpus"][0]  # as nvidia-smi -q states it (read by hand)
    assert (gpu["name"], gpu["pci_bus_id"], gpu["uuid"]) == (
        "NVIDIA H200", "00000000:00:06.0", "GPU-48667122-401e-af61-5391-f2179faae6d0")
    assert (gpu["pcie_gen_max"], gpu["pcie_width_max"], gpu["memory_total_bytes"] // 2**20) == (5, 16, 143771)
    assert gpu["nvlinks"] == [] and replayed["facts"]["driver"] == "580.159.04"


def test_the_probe_over_the_replay_equals_the_probe_on_the_machine(tmp_path: Path) -> None:
    """probe_host over the replayed NVML and a sysfs tree of the same machine gives the recorded snapshot's host."""
    recorded = json.loads((H200 / "probe.json").read_text())["snapshot"]
    machine = from_jsonable(Snapshot, recorded).host
    root = build_sysfs(tmp_path, machine)
    replayed = probe_host(nvml=ReplayNvml.from_text(RECORDING, session=_session(["probe"])), sysfs_root=str(root),
                          hostname=machine.hostname)
    mine, theirs = replayed.host, machine
    assert mine.gpus == theirs.gpus
    assert (mine.links, mine.numa_nodes, mine.gpu_nic) == (theirs.links, theirs.numa_nodes, theirs.gpu_nic)
    assert (mine.versions.driver, mine.versions.cuda_driver, mine.versions.nvml) == ("580.159.04", "13.0", "13.580.159.04")
    assert [gap for gap in replayed.gaps if "NotRecorded" in gap.reason] == []


def test_a_call_the_machine_was_never_asked_is_a_gap_not_an_invented_answer() -> None:
    replay = ReplayNvml.from_text(RECORDING, session=_session(["probe"]))
    query = NvmlQuery(replay)
    assert query("nvmlDeviceGetPowerUsage", "handle") is None
    assert query.gaps[-1].reason.startswith("NotRecorded")


def test_the_c_standin_replays_the_recorded_driver_over_the_real_pynvml(tmp_path: Path) -> None:
    if compiler() is None:
        pytest.skip("no C compiler (cc or gcc) on PATH: the libnvidia-ml.so.1 stand-in cannot be built")
    library = build(tmp_path / "lib")
    recording = tmp_path / "recording.jsonl"
    recording.write_text(RECORDING)
    env = dict(os.environ, LD_LIBRARY_PATH=str(library), PYTHONPATH=str(TESTS))
    env.pop("LINKSCOPE_NVML_RECORD", None)
    done = subprocess.run([sys.executable, "-m", "support.fakes.nvml_standin.replay", str(recording), str(_session([])),
                           str(tmp_path / "machine.txt")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == json.loads((H200 / "nvml-facts.json").read_text())


def test_recording_then_replaying_a_fake_machine_round_trips(tmp_path: Path) -> None:
    """Every sample through the recorder and back: the replay answers what the fake answered, MIG, NVSwitch
    and P2P included."""
    for name in ("dgx-h100", "dgx-a100", "pcie-l40s-8", "consumer-2gpu"):
        path = tmp_path / f"{name}.jsonl"
        fake = FakeNvml.from_snapshot(load_sample(name))
        facts = NvmlFacts()
        query = NvmlQuery(fake, NvmlRecorder(str(path), fake))
        collect(query, facts)
        written = json.loads(json.dumps(nvml_facts_json(facts, query.gaps), default=str))
        assert _facts_over(ReplayNvml.from_text(path.read_text())) == written, name


def test_the_environment_variable_records_every_call_of_a_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rec.jsonl"
    monkeypatch.setenv("LINKSCOPE_NVML_RECORD", str(path))
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    query = NvmlQuery(fake)
    collect(query, NvmlFacts())
    ((header, calls),) = sessions(read_recording(path.read_text()))
    assert header["format"] == "linkscope-nvml-recording" and len(calls) == query.calls
    assert calls[0]["function"] == "nvmlInit" and calls[-1]["function"] == "nvmlShutdown"
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_an_unwritable_recording_is_one_note_and_the_probe_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LINKSCOPE_NVML_RECORD", str(tmp_path / "missing" / "rec.jsonl"))
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    facts = NvmlFacts()
    collect(NvmlQuery(fake), facts)
    assert len(facts.gpus) == 8
    assert capsys.readouterr().err.startswith("linkscope: note: cannot write the NVML recording")
