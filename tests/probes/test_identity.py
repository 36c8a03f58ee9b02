"""Identity table: CUDA_VISIBLE_DEVICES parsed exactly as torch parses it, CUDA vs NVML numbering."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.probes.identity import identity_table, nearest_nics, parse_visible_devices, uuids_to_ordinals
from linkscope.topo.samples import load_sample

H100 = load_sample("dgx-h100").host
UUIDS = [gpu.uuid or "" for gpu in H100.gpus]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("0,1,2", [0, 1, 2]),
        (" 3 , 1", [3, 1]),
        ("1gpu2,2ampere", [1, 2]),
        ("0,-1,2", [0]),
        ("0,x,2", [0]),
        ("0,1,0", []),
        ("+2,3", [2, 3]),
        ("GPU-aa,GPU-bb", ["GPU-aa", "GPU-bb"]),
        ("GPU-aa,1", ["GPU-aa"]),
        ("GPU-aa,GPU-aa", []),
        ("MIG-x,MIG-y", ["MIG-x", "MIG-y"]),
        ("0,GPU-aa", [0]),
    ],
)
def test_parse_visible_devices_golden(value: str | None, expected: list[object] | None) -> None:
    assert parse_visible_devices(value) == expected


def test_lone_sign_raises_like_torch() -> None:
    with pytest.raises(ValueError):
        parse_visible_devices("0,+")


@pytest.fixture(scope="module")
def torch_parse() -> Iterator[object]:
    torch_cuda = pytest.importorskip("torch.cuda")
    yield torch_cuda._parse_visible_devices


ENTRY = st.one_of(
    st.integers(min_value=-3, max_value=12).map(str),
    st.sampled_from(["GPU-29d8", "GPU-", "MIG-1", "x", "", " 1", "2 ", "1a", "+1", "-", "+", "01", "3.5"]),
    st.text(alphabet="0123456789+-GPUMI ab,", max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(ENTRY, max_size=6))
def test_parse_visible_devices_matches_torch(torch_parse: object, entries: list[str]) -> None:
    value = ",".join(entries)
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    try:
        try:
            expected: object = torch_parse()  # type: ignore[operator]
        except ValueError:
            expected = ValueError
        try:
            got: object = parse_visible_devices(value)
        except ValueError:
            got = ValueError
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    assert got == expected, value


def test_uuid_prefixes_resolve_like_torch() -> None:
    uuids = ["GPU-aa11", "GPU-aa22", "GPU-bb33"]
    assert uuids_to_ordinals(["GPU-bb", "GPU-aa1"], uuids) == [2, 0]
    assert uuids_to_ordinals(["GPU-aa", "GPU-bb"], uuids) == [], "an ambiguous prefix ends the list"
    assert uuids_to_ordinals(["GPU-bb", "GPU-zz", "GPU-aa2"], uuids) == [2]
    assert uuids_to_ordinals(["GPU-bb", "GPU-bb3"], uuids) == []


def _cuda_indices(env: dict[str, str], host: object = H100) -> list[int | None]:
    return [row.cuda_index for row in identity_table(host, env).rows]  # type: ignore[arg-type]


def test_all_gpus_visible_by_default() -> None:
    assert _cuda_indices({}) == list(range(8))


def test_visible_devices_renumber_cuda_indices() -> None:
    assert _cuda_indices({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == [None] * 4 + [0, 1, 2, 3]
    assert _cuda_indices({"CUDA_VISIBLE_DEVICES": "3,1"}) == [None, 1, None, 0, None, None, None, None]
    assert _cuda_indices({"CUDA_VISIBLE_DEVICES": "1,9,2"}) == [None, 0] + [None] * 6, "an index past the end stops the list"


def test_visible_devices_by_uuid_prefix() -> None:
    value = f"{UUIDS[6][:12]},{UUIDS[2]}"
    assert _cuda_indices({"CUDA_VISIBLE_DEVICES": value}) == [None, None, 1, None, None, None, 0, None]


def test_duplicate_visible_devices_hide_every_gpu_with_a_note() -> None:
    table = identity_table(H100, {"CUDA_VISIBLE_DEVICES": "0,0"})
    assert [row.cuda_index for row in table.rows] == [None] * 8
    assert table.notes and "no GPU visible" in table.notes[0]


def test_mig_entries_are_noted_not_resolved() -> None:
    table = identity_table(H100, {"CUDA_VISIBLE_DEVICES": "MIG-0a1b"})
    assert all(row.cuda_index is None for row in table.rows)
    assert "MIG" in table.notes[0]


def test_mixed_models_follow_device_order() -> None:
    gpus = list(load_sample("consumer-2gpu").host.gpus)
    slower = replace(gpus[0], name="NVIDIA GeForce RTX 3090", compute_capability="8.6")
    host = replace(load_sample("consumer-2gpu").host, gpus=(slower, gpus[1]))
    fastest_first = identity_table(host, {})
    assert [row.cuda_index for row in fastest_first.rows] == [1, 0]
    assert "PCI_BUS_ID" in fastest_first.notes[0]
    assert _cuda_indices({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, host) == [0, 1]


def test_nearest_nic_is_the_closest_link_class() -> None:
    assert nearest_nics(H100, 0) == (("mlx5_0",), "PIX")
    l40s = load_sample("pcie-l40s-8").host
    assert nearest_nics(l40s, 2) == (("mlx5_1",), "PIX")
    assert nearest_nics(l40s, 7) == (("mlx5_3",), "PIX")
    consumer = load_sample("consumer-2gpu").host
    assert nearest_nics(consumer, 0) == (("enp6s0",), consumer.gpu_nic[0][0])
    assert nearest_nics(load_sample("a100-pcie-nvbridge-4").host, 0) == ((), None)


def test_rows_carry_bus_id_uuid_numa_and_cpus() -> None:
    row = identity_table(H100, {}).rows[5]
    gpu = H100.gpus[5]
    assert (row.nvml_index, row.pci_bus_id, row.uuid, row.numa_node, row.cpu_affinity) == (
        5, gpu.pci_bus_id, gpu.uuid, gpu.numa_node, gpu.cpu_affinity)
    assert row.nearest_nics == ("mlx5_5",)


def test_mig_devices_are_probed_and_listed_in_the_identity_json(tmp_path: Path) -> None:
    """A MIG-enabled GPU's MIG devices come from NVML into the snapshot and the `probe --json` identity rows."""
    from linkscope.commands.probe_cmd import identity_json
    from linkscope.topo.model.snapshot import Snapshot
    from support.fakes import FakeNvml
    from support.fakes.nvml_standin.scenario import with_mig
    from support.probe import probe_fake

    host = with_mig(load_sample("dgx-a100").host)
    sample = Snapshot(hosts=(host,))
    probed = probe_fake(tmp_path, sample, FakeNvml(host)).host
    assert probed.gpus[0].mig_devices == host.gpus[0].mig_devices and len(host.gpus[0].mig_devices) == 2
    rows = identity_json(identity_table(probed, env={}))["rows"]
    assert [mig["gpu_instance_id"] for mig in rows[0]["mig_devices"]] == [1, 2]
    assert rows[0]["mig_devices"][0]["uuid"] == host.gpus[0].mig_devices[0].uuid
    assert rows[1]["mig_devices"] == []
