"""The typed (C) way in and out of snapshot JSON against the generic codec: it builds and writes what the generic
codec does, and accepts nothing the generic decoder refuses, so every error is still the generic one-line message."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.jsonio import json_text
from linkscope.topo.model.codec import (
    TYPED_FROM_BYTES,
    from_jsonable,
    snapshot_from_json,
    snapshot_to_json,
    to_jsonable,
)
from linkscope.topo.model.host import Nic
from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot
from linkscope.topo.model.typed import decode_snapshot, snapshot_text
from linkscope.topo.samples import SAMPLE_NAMES, load_sample
from support.health import recording_of


def _measured() -> Snapshot:
    """A sample with measurements and a recording: every dataclass of the model in one file."""
    sample = load_sample("dgx-h100")
    measurements = Measurements("test", peer_copies=(PeerCopy(0, 1, 1 << 28, 390.5, 780.0, 2.5, True, True),),
                                collectives=(CollectiveResult("all_reduce", 1024, "float32", 10.0, 0.1, 0.1, 2, 0,
                                                              (0, 1)),))
    readings = [{0: {"nvlink_tx_gbps": 1.5, "nvlink_errors": (("replay", 3),), "pcie_gen_current": 5}}] * 3
    return dataclasses.replace(sample, measurements=measurements, recording=recording_of(sample.host, readings))


def _sample(name: str) -> Callable[[], Snapshot]:
    return lambda: load_sample(name)


SNAPSHOTS: dict[str, Callable[[], Snapshot]] = {**{name: _sample(name) for name in SAMPLE_NAMES}, "measured": _measured}


def _generic(text: str) -> Snapshot:
    return from_jsonable(Snapshot, json.loads(text))


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_typed_decode_builds_what_the_generic_decoder_builds(name: str) -> None:
    text = snapshot_to_json(SNAPSHOTS[name]())
    typed = decode_snapshot(text)
    assert typed is not None
    assert repr(typed) == repr(_generic(text))  # repr: 400 and 400.0 compare equal, and must not differ


def test_an_integer_in_a_float_field_becomes_a_float_as_in_the_generic_decoder() -> None:
    data = json.loads(snapshot_to_json(load_sample("dgx-h100")))
    data["hosts"][0]["nics"][0]["rate_gbit_per_s"] = 400
    text = json.dumps(data)
    typed = decode_snapshot(text)
    assert typed is not None and type(typed.host.nics[0].rate_gbit_per_s) is float
    assert repr(typed) == repr(_generic(text))


def _with(change: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(snapshot_to_json(load_sample("dgx-h100")))
    change(data)
    return json.dumps(data)


def _host(data: dict[str, Any]) -> dict[str, Any]:
    host: dict[str, Any] = data["hosts"][0]
    return host


REFUSED: dict[str, tuple[str, str]] = {
    "unknown top-level field": (_with(lambda d: d.update(color="red")), "unknown field 'color'"),
    "unknown nested field": (_with(lambda d: _host(d)["gpus"][0]["nvlinks"][0].update(speed=1)), "unknown field 'speed'"),
    "19-digit integer": (_with(lambda d: _host(d)["gpus"][0].update(memory_total_bytes=10**18)), "19 digits"),
    "19-digit integer in a float field": (_with(lambda d: _host(d)["nics"][0].update(rate_gbit_per_s=-(10**18))),
                                          "19 digits"),
    "NaN": (_with(lambda d: _host(d)["nics"][0].update(rate_gbit_per_s=float("nan"))), "NaN is not a JSON number"),
    "number out of range": (_with(lambda d: _host(d)["nics"][0].update(rate_gbit_per_s=1.0)).replace(
        '"rate_gbit_per_s": 1.0', '"rate_gbit_per_s": 1e400', 1), "out of range"),
    "no schema": (_with(lambda d: d.pop("schema")), "unsupported snapshot schema None"),
    "another schema": (_with(lambda d: d.update(schema=2)), "unsupported snapshot schema 2"),
    "boolean for an integer": (_with(lambda d: _host(d)["gpus"][0].update(index=True)), "expected an integer"),
    "float for an integer": (_with(lambda d: _host(d)["gpus"][0].update(index=1.0)), "expected an integer"),
    "text for a number": (_with(lambda d: _host(d)["nics"][0].update(rate_gbit_per_s="fast")), "expected a number"),
    "no host name": (_with(lambda d: _host(d).pop("hostname")), "hostname"),
    "unknown link kind": (_with(lambda d: _host(d)["links"][0].update(kind="NVX")), "'NVX' is not one of"),
    "text after the object": (_with(lambda d: None) + " {}", "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_typed_decode_leaves_every_fault_to_the_generic_decoder(case: str) -> None:
    text, fragment = REFUSED[case]
    assert decode_snapshot(text) is None
    with pytest.raises(InputError) as caught:
        snapshot_from_json(text, "box.json")
    message = str(caught.value)
    assert message.startswith("box.json: ") and fragment in message and "\n" not in message


def test_probe_output_is_read_the_generic_way() -> None:
    snapshot = load_sample("dgx-a100")
    text = json_text({"snapshot": to_jsonable(snapshot), "gaps": []})
    assert decode_snapshot(text) is None
    assert snapshot_from_json(text, "probe.json") == snapshot


POOL: tuple[Any, ...] = (None, True, False, 0, -1, 7, 10**18 - 1, -(10**18 - 1), 10**18, 10**40, 1.5, 1e17, 1e18,
                         1e300, float("nan"), float("inf"), "", "NV18", "X", "SYS", "OK", [], [1], {}, {"link": 1})


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def test_typed_decode_accepts_nothing_the_generic_decoder_refuses() -> None:
    """Seeded mutants of every snapshot (one value anywhere replaced, or a field added): where the typed decoder
    accepts one, the generic decoder accepts it too and builds the same snapshot."""
    chooser = random.Random(27)
    outcomes = {"both": 0, "generic only": 0, "neither": 0}
    for name in sorted(SNAPSHOTS):
        original = json.loads(snapshot_to_json(SNAPSHOTS[name]()))
        paths = _paths(original)
        for _ in range(60):
            data = json.loads(json.dumps(original))
            *parents, last = chooser.choice(paths)
            target = data
            for step in parents:
                target = target[step]
            if chooser.random() < 0.1 and isinstance(target, dict):
                target[f"{last}_extra"] = 1
            else:
                target[last] = chooser.choice(POOL)
            text = json.dumps(data)
            typed = decode_snapshot(text)
            try:
                generic: Snapshot | None = _generic(text) if data.get("schema") == 1 else None
            except (InputError, ValueError):  # the generic decoder's refusals (json's own, for NaN, as ValueError)
                generic = None
            if typed is not None:
                assert generic is not None, f"{name}: typed decoding accepted {[*parents, last]} = {target[last]!r}"
                assert repr(typed) == repr(generic)
            outcomes["both" if typed is not None else "generic only" if generic is not None else "neither"] += 1
    assert all(outcomes.values()), outcomes  # the mutants reached every outcome


HOSTILE = {"node01\u200b": False, "gpu\x7f": False, "\x1b[31mred": False, "back\\u005cslash": False, "ünïcode": False,
           "tab\there": True}
"""Host names, and whether the typed writer writes them itself (the same escapes as json_text: `\\t`)."""


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
@pytest.mark.parametrize("indent", [2, None])
def test_typed_text_is_what_json_text_writes(name: str, indent: int | None) -> None:
    snapshot = SNAPSHOTS[name]()
    snapshot.host.matrix_tokens()  # leaves the host's link index cached on it: not a field, never written
    text = snapshot_text(snapshot, indent)
    assert text is not None and text == json_text(to_jsonable(snapshot), indent=indent)


@pytest.mark.parametrize("hostname", sorted(HOSTILE))
def test_text_that_must_be_escaped_is_written_as_json_text_writes_it(hostname: str) -> None:
    snapshot = dataclasses.replace(load_sample("consumer-2gpu"),
                                   hosts=(dataclasses.replace(load_sample("consumer-2gpu").host, hostname=hostname),))
    expected = json_text(to_jsonable(snapshot), indent=None)
    assert snapshot_text(snapshot, None) == (expected if HOSTILE[hostname] else None)  # None: left to json_text
    written = snapshot_to_json(snapshot, indent=None)
    assert written == expected and written.isascii() and "\x7f" not in written


def test_floats_outside_the_plain_notation_keep_their_value() -> None:
    sample = load_sample("consumer-2gpu")
    rates = (0.00004, 1e16, 2.5e-7, 123.25)
    nics = tuple(Nic(f"mlx5_{n}", rate_gbit_per_s=rate) for n, rate in enumerate(rates))
    snapshot = dataclasses.replace(sample, hosts=(dataclasses.replace(sample.host, nics=nics,
                                                                      gpu_nic=(("SYS",) * 4,) * 2),))
    written = snapshot_text(snapshot, 2)
    assert written is not None and json.loads(written) == json.loads(json_text(to_jsonable(snapshot)))
    assert snapshot_from_json(written, "x.json") == snapshot


def _modules_after(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_a_small_file_is_read_without_msgspec_and_a_large_one_with_it(tmp_path: Path) -> None:
    """The typed decoder's start-up is paid only where it pays (codec.TYPED_FROM_BYTES): `show sample:...` stays fast."""
    large = tmp_path / "large.json"
    sample = load_sample("dgx-h100")
    large.write_text(snapshot_to_json(dataclasses.replace(sample, recording=recording_of(sample.host, [{}] * 300))))
    assert len(large.read_text()) > TYPED_FROM_BYTES
    code = ("import sys\nfrom linkscope.topo.model.codec import snapshot_from_json\nfrom linkscope.topo.samples import "
            "load_sample\nload_sample('dgx-h100')\nprint('msgspec' in sys.modules)\n"
            f"snapshot_from_json(open({str(large)!r}).read())\nprint('msgspec' in sys.modules)")
    assert _modules_after(code).split() == ["False", "True"]
