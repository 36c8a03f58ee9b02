"""The snapshot model and its JSON codec: round-trip, validation, one-line errors."""

from __future__ import annotations

import json

import pytest

from linkscope.topo.common.errors import InputError
from linkscope.topo.model.codec import (
    from_jsonable,
    measurements_from_json,
    measurements_to_json,
    snapshot_from_json,
    snapshot_to_json,
    to_jsonable,
)
from linkscope.topo.model.host import (
    Capabilities,
    Gap,
    Gpu,
    Host,
    Link,
    LinkKind,
    NvLinkPort,
    P2PStatus,
    Versions,
    parse_link_token,
)
from linkscope.topo.model.measurements import CollectiveResult, Measurements, PeerCopy
from linkscope.topo.model.snapshot import Snapshot


def _two_gpu_snapshot() -> Snapshot:
    ports = tuple(NvLinkPort(i, active=i != 3, version=4, remote_type="switch") for i in range(18))
    host = Host(
        "node-1",
        gpus=(Gpu(0, "NVIDIA H100 80GB HBM3", nvlinks=ports, pcie_width_current=8), Gpu(1, "NVIDIA H100 80GB HBM3")),
        links=(Link(0, 1, LinkKind.NVLINK, 17, 4, P2PStatus("OK", "OK", "OK", "OK")),),
        gpu_nic=(("PIX",), ("PXB",)),
    )
    measurements = Measurements(
        "test",
        peer_copies=(PeerCopy(0, 1, 1 << 28, 390.5, 780.0, 2.5, True, True),),
        collectives=(CollectiveResult("all_reduce", 1024, "float32", 10.0, 0.1, 0.1, 2, 0, (0, 1)),),
    )
    return Snapshot(
        (host,), "test", meta=(("description", "two GPUs"),), gaps=(Gap("uuid", "NotSupported"),), measurements=measurements
    )


def test_snapshot_round_trips_through_json() -> None:
    snapshot = _two_gpu_snapshot()
    assert snapshot_from_json(snapshot_to_json(snapshot)) == snapshot


def test_derived_values() -> None:
    snapshot = _two_gpu_snapshot()
    assert snapshot.host.gpus[0].nvlink_active_count == 17
    assert snapshot.host.gpus[0].nvlink_gen == 4
    assert snapshot.host.matrix_tokens() == [["X", "NV17"], ["NV17", "X"]]
    assert snapshot.host.link(1, 0).kind is LinkKind.NVLINK
    assert snapshot.meta_value("description") == "two GPUs"
    assert snapshot.meta_value("missing") is None


@pytest.mark.parametrize(
    ("token", "expected"),
    [("NV18", (LinkKind.NVLINK, 18)), ("NV1", (LinkKind.NVLINK, 1)), ("SYS", (LinkKind.SYS, 0)), ("X", (LinkKind.SELF, 0))],
)
def test_parse_link_token(token: str, expected: tuple[LinkKind, int]) -> None:
    assert parse_link_token(token) == expected


@pytest.mark.parametrize("token", ["NV", "nv4", "PCI", ""])
def test_parse_link_token_rejects_unknown(token: str) -> None:
    with pytest.raises(ValueError):
        parse_link_token(token)


def _mutated(change) -> str:
    data = to_jsonable(_two_gpu_snapshot())
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("change", "expected_fragment"),
    [
        (lambda d: d.update(schema=99), "unsupported snapshot schema 99"),
        (lambda d: d.pop("schema"), "unsupported snapshot schema None"),
        (lambda d: d["hosts"][0]["gpus"][0].update(index="zero"), "$.hosts[0].gpus[0].index: expected an integer"),
        (lambda d: d["hosts"][0]["links"][0].update(kind="NVL"), "$.hosts[0].links[0].kind: 'NVL' is not one of"),
        (lambda d: d["hosts"][0].update(color="red"), "$.hosts[0]: unknown field 'color'"),
        (lambda d: d.update(hosts={}), "$.hosts: expected a list"),
        (lambda d: d["hosts"][0]["gpus"][0].update(memory_total_bytes=True), "memory_total_bytes: expected an integer"),
        (lambda d: d["hosts"][0].pop("hostname"), "$.hosts[0]: "),
    ],
)
def test_bad_snapshot_json_is_one_clear_line(change, expected_fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        snapshot_from_json(_mutated(change), "box.json")
    message = str(caught.value)
    assert message.startswith("box.json: ")
    assert expected_fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "fragment"), [("{", "not valid JSON"), ("[1]", "JSON object"), ("", "not valid JSON")])
def test_malformed_json(text: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        snapshot_from_json(text, "x.json")


def test_measurements_round_trip() -> None:
    measurements = _two_gpu_snapshot().measurements
    assert measurements is not None
    assert measurements_from_json(measurements_to_json(measurements)) == measurements


def test_measurements_file_without_measurements() -> None:
    with pytest.raises(InputError, match="no measurements"):
        measurements_from_json('{"schema": 1}', "m.json")


def test_probe_json_output_wrapping_a_snapshot_opens() -> None:
    snapshot = _two_gpu_snapshot()
    wrapped = json.dumps({"identity": {"rows": []}, "snapshot": to_jsonable(snapshot)})
    assert snapshot_from_json(wrapped) == snapshot


def test_decoder_fills_defaults_and_names_a_missing_required_field() -> None:
    """Fields left out take their defaults (factories called anew per object); a required one left out is named."""
    first = from_jsonable(Host, {"hostname": "a"})
    second = from_jsonable(Host, {"hostname": "b", "gpus": []})
    assert first == Host("a") and second == Host("b")
    assert first.versions == Versions() and first.capabilities == Capabilities() and first.gpus == ()
    assert first.link(0, 0).token == "X"
    with pytest.raises(InputError, match=r"\$\.hosts\[1\]: missing field 'hostname'"):
        from_jsonable(Snapshot, {"hosts": [{"hostname": "a"}, {"gpus": []}]})


def test_merging_measurements_keeps_every_field() -> None:
    """The app merges each benchmark's results into the snapshot's: nothing of either is dropped (the identity of the
    machine and the notes included), and a field added to Measurements must be merged too."""
    import dataclasses

    from linkscope.topo.model.measurements import (
        CollectiveResult,
        HostCopy,
        MeasuredOn,
        Measurements,
        PeerCopy,
        merge_measurements,
    )

    earlier = Measurements("a", peer_copies=(PeerCopy(0, 1, unidir_gbps=1.0),), host_copies=(HostCopy(0, "h2d", 0, None, 5.0),),
                           collectives=(CollectiveResult("all_reduce", 8, "float32", 1.0, 1.0, 1.0, 2),),
                           group_setup_ms=(("tp0", 1.0),), notes=("first",), identity=MeasuredOn(gpu_model="H100"))
    later = Measurements("b", peer_copies=(PeerCopy(0, 1, unidir_gbps=2.0),), notes=("first", "second"))
    merged = merge_measurements(earlier, later)
    assert merged.source == "a + b" and merged.notes == ("first", "second") and merged.identity == earlier.identity
    assert [copy.unidir_gbps for copy in merged.peer_copies] == [1.0, 2.0]
    for field in dataclasses.fields(Measurements):
        if field.name not in ("source", "identity", "notes"):
            assert getattr(merged, field.name) == getattr(earlier, field.name) + getattr(later, field.name), field.name
    assert merge_measurements(None, later) is later
