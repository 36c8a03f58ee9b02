"""Semantic mutants of snapshots and measurements: each impossible fact is refused with one line naming
the file given and the JSON path, by every command that reads it (and by the app's `open`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.fuzz import SAMPLES, assert_clean_outcome, run_cli

Mutant = Callable[[dict[str, Any]], None]


def _host(data: dict[str, Any]) -> dict[str, Any]:
    host: dict[str, Any] = data["hosts"][0]
    return host


def _nv_link(data: dict[str, Any]) -> dict[str, Any]:
    link: dict[str, Any] = next(link for link in _host(data)["links"] if link["kind"] == "NV")
    return link


def _set(getter: Callable[[dict[str, Any]], dict[str, Any]], field: str, value: Any) -> Mutant:
    def mutate(data: dict[str, Any]) -> None:
        getter(data)[field] = value

    return mutate


def _append_disagreeing_link(data: dict[str, Any]) -> None:
    twin = dict(_host(data)["links"][0], kind="SYS", nvlink_count=0)
    _host(data)["links"].append(twin)


SNAPSHOT_MUTANTS: dict[str, tuple[Mutant, str]] = {
    "link-to-missing-gpu": (_set(lambda d: _host(d)["links"][0], "b", 99), "$.hosts[0].links[0].b"),
    "self-link": (lambda d: _host(d)["links"][0].update(b=_host(d)["links"][0]["a"]), "$.hosts[0].links[0]"),
    "reversed-link": (lambda d: _host(d)["links"][0].update(a=1, b=0), "$.hosts[0].links[0]"),
    "duplicate-gpu-index": (lambda d: _host(d)["gpus"][1].update(index=_host(d)["gpus"][0]["index"]),
                            "$.hosts[0].gpus[1].index"),
    "negative-gpu-index": (_set(lambda d: _host(d)["gpus"][0], "index", -1), "$.hosts[0].gpus[0].index"),
    "nvlink-count-zero": (_set(_nv_link, "nvlink_count", 0), "nvlink_count"),
    "nvlink-count-negative": (_set(_nv_link, "nvlink_count", -4), "nvlink_count"),
    "kind-outside-vocabulary": (_set(lambda d: _host(d)["links"][0], "kind", "NVX"), "$.hosts[0].links[0].kind"),
    "duplicate-links-disagree": (_append_disagreeing_link, "$.hosts[0].links["),
    "pcie-width-zero": (_set(lambda d: _host(d)["gpus"][0], "pcie_width_current", 0), "pcie_width_current"),
    "negative-nic-rate": (_set(lambda d: _host(d)["nics"][0], "rate_gbit_per_s", -50.0), "rate_gbit_per_s"),
    "no-hosts": (lambda d: d.update(hosts=[]), "$.hosts"),
    "host-without-gpus": (lambda d: d["hosts"].append({"hostname": "empty"}), "$.hosts[1].gpus"),
    "p2p-token": (_set(lambda d: _host(d)["links"][0], "p2p", {"read": "MAYBE"}), "p2p.read"),
    "gpu-nic-token": (lambda d: _host(d)["gpu_nic"][0].__setitem__(0, "FAST"), "$.hosts[0].gpu_nic[0][0]"),
    "duplicate-nic": (lambda d: _host(d)["nics"].append(dict(_host(d)["nics"][0])), "$.hosts[0].nics["),
    "nvlink-gen": (_set(_nv_link, "nvlink_gen", 0), "nvlink_gen"),
}
"""Name -> (mutation of a sample snapshot, the JSON path its error must name)."""

TEXT_MUTANTS: dict[str, tuple[Callable[[str], str], str]] = {
    "nan-bandwidth": (lambda text: text.replace('"rate_gbit_per_s": 400.0', '"rate_gbit_per_s": NaN', 1), "NaN"),
    "infinite-memory": (lambda text: text.replace('"index": 0,', '"index": 1e999,', 1), "out of range"),
    "integer-past-4300-digits": (lambda text: text.replace('"index": 0,', '"index": ' + "9" * 5000 + ",", 1), "digits"),
    "deep-nesting": (lambda text: text.replace('"meta": [', '"meta": [' + "[" * 100_000 + "]" * 100_000 + ",", 1),
                     "nested deeper"),
}
"""Name -> (mutation of the snapshot text, a fragment of its error): what a JSON decoder trips on."""


def _sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SAMPLES / "dgx-h100.json").read_text())
    return data


def _commands(path: Path) -> list[list[str]]:
    return [["show", str(path)], ["show", str(path), "--json"], ["check", str(path), "--tp", "8"],
            ["plan", str(path), "--gpus", "8"], ["open", str(path)]]


def _refused_everywhere(path: Path, fragment: str) -> None:
    lines = set()
    for argv in _commands(path):
        outcome = run_cli(argv)
        lines.add(outcome.err)
        assert_clean_outcome(outcome, " ".join(argv))
        assert outcome.status == 2, f"{argv}: accepted ({outcome.out[:200]})"
        assert outcome.err.startswith(f"linkscope: error: {path}: "), outcome.err  # the file given, not `source`
        assert fragment in outcome.err, outcome.err
    assert len(lines) == 1, f"the commands and the app say different things: {lines}"


def test_the_unmutated_sample_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(_sample()))
    assert run_cli(["show", str(path)]).status == 0
    assert run_cli(["check", str(path), "--tp", "8"]).status == 0


@pytest.mark.parametrize("name", list(SNAPSHOT_MUTANTS))
def test_each_snapshot_mutant_is_refused(name: str, tmp_path: Path) -> None:
    mutate, fragment = SNAPSHOT_MUTANTS[name]
    data = copy.deepcopy(_sample())
    data["source"] = "the-internal-source-name"
    mutate(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    _refused_everywhere(path, fragment)
    assert "the-internal-source-name" not in run_cli(["show", str(path)]).err


@pytest.mark.parametrize("name", list(TEXT_MUTANTS))
def test_each_decoder_limit_is_an_input_error(name: str, tmp_path: Path) -> None:
    mutate, fragment = TEXT_MUTANTS[name]
    text = json.dumps(_sample(), indent=1)
    mutated = mutate(text)
    assert mutated != text, "the mutation found nothing to change"
    path = tmp_path / f"{name}.json"
    path.write_text(mutated)
    _refused_everywhere(path, fragment)


def _measurements() -> dict[str, Any]:
    return {
        "source": "nccl-tests",
        "collectives": [{"op": "all_reduce", "size_bytes": 1 << 20, "dtype": "float", "time_us": 20.0,
                         "algbw_gbps": 52.4, "busbw_gbps": 91.7, "nranks": 8, "ranks": list(range(8))}],
        "peer_copies": [{"src": 0, "dst": 1, "size_bytes": 1 << 28, "unidir_gbps": 390.0, "latency_us": 2.5}],
        "host_copies": [{"gpu": 0, "direction": "h2d", "numa_node": 0, "size_bytes": 1 << 28, "gbps": 25.0}],
    }


def _collective(data: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = data["collectives"][0]
    return row


MEASUREMENT_MUTANTS: dict[str, tuple[Mutant, str]] = {
    "negative-busbw": (_set(_collective, "busbw_gbps", -50.0), "$.measurements.collectives[0].busbw_gbps"),
    "negative-time": (_set(_collective, "time_us", -1.0), "$.measurements.collectives[0].time_us"),
    "ranks-shorter-than-nranks": (_set(_collective, "ranks", [0, 1, 2]), "$.measurements.collectives[0].ranks"),
    "duplicate-ranks": (_set(_collective, "ranks", [0, 0, 1, 2, 3, 4, 5, 6]), "$.measurements.collectives[0].ranks[1]"),
    "nranks-zero": (lambda d: _collective(d).update(nranks=0, ranks=[]), "$.measurements.collectives[0].nranks"),
    "nranks-past-cap": (lambda d: _collective(d).update(nranks=10**12, ranks=[]), "$.measurements.collectives[0].nranks"),
    "negative-size": (_set(_collective, "size_bytes", -4), "$.measurements.collectives[0].size_bytes"),
    "negative-wrong": (_set(_collective, "wrong", -1), "$.measurements.collectives[0].wrong"),
    "copy-to-itself": (lambda d: d["peer_copies"][0].update(dst=0), "$.measurements.peer_copies[0]"),
    "negative-latency": (lambda d: d["peer_copies"][0].update(latency_us=-2.5), "$.measurements.peer_copies[0].latency_us"),
    "negative-gpu": (lambda d: d["peer_copies"][0].update(src=-1), "$.measurements.peer_copies[0].src"),
    "host-copy-direction": (lambda d: d["host_copies"][0].update(direction="sideways"),
                            "$.measurements.host_copies[0].direction"),
    "host-copy-negative": (lambda d: d["host_copies"][0].update(gbps=-25.0), "$.measurements.host_copies[0].gbps"),
    "setup-negative": (lambda d: d.update(group_setup_ms=[["tp0", -3.0]]), "$.measurements.group_setup_ms[0]"),
}


def test_unmutated_measurements_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"schema": 1, "measurements": _measurements()}))
    assert run_cli(["import", str(path)]).status == 0
    assert run_cli(["check", "sample:dgx-h100", "--tp", "8", "--measurements", str(path)]).status == 0


@pytest.mark.parametrize("name", list(MEASUREMENT_MUTANTS))
def test_each_measurement_mutant_is_refused(name: str, tmp_path: Path) -> None:
    mutate, fragment = MEASUREMENT_MUTANTS[name]
    data = _measurements()
    mutate(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"schema": 1, "measurements": data}))
    for argv in (["import", str(path)], ["check", "sample:dgx-h100", "--tp", "8", "--measurements", str(path)],
                 ["open", "sample:dgx-h100", "--measurements", str(path)]):
        outcome = run_cli(argv)
        assert_clean_outcome(outcome, name)
        assert outcome.status == 2 and outcome.err.startswith(f"linkscope: error: {path}: "), outcome.err
        assert fragment in outcome.err, outcome.err
    snapshot = _sample()
    snapshot["measurements"] = data
    carried = tmp_path / f"{name}-snapshot.json"
    carried.write_text(json.dumps(snapshot))
    outcome = run_cli(["show", str(carried)])
    assert outcome.status == 2 and fragment.replace("$.measurements", "$.measurements") in outcome.err
