"""The NVML wrapper: error mapping, decoding, constants checked against pynvml, and the fake's fidelity."""

from __future__ import annotations

import ctypes
import inspect
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from linkscope.probes import nvlink as probe_nvlink
from linkscope.probes import nvml as probe_nvml
from linkscope.probes.capabilities import read_software, read_torch_version_file
from linkscope.probes.host import probe_host
from linkscope.probes.live import LiveSampler
from linkscope.probes.nvlink import nvlink_generation
from linkscope.probes.nvml_query import (
    ERROR_REASONS,
    NvmlQuery,
    decode,
    field_value,
    mask_to_numbers,
)
from linkscope.topo.model.host import LinkKind
from linkscope.topo.samples import load_sample
from support.fakes import FakeNvml, build_sysfs
from support.fakes import fake_nvml as fake_module
from support.paths import ROOT

REASON_CONSTANTS = {
    "Uninitialized": "NVML_ERROR_UNINITIALIZED",
    "InvalidArgument": "NVML_ERROR_INVALID_ARGUMENT",
    "NotSupported": "NVML_ERROR_NOT_SUPPORTED",
    "NoPermission": "NVML_ERROR_NO_PERMISSION",
    "NotFound": "NVML_ERROR_NOT_FOUND",
    "DriverNotLoaded": "NVML_ERROR_DRIVER_NOT_LOADED",
    "Timeout": "NVML_ERROR_TIMEOUT",
    "LibraryNotFound": "NVML_ERROR_LIBRARY_NOT_FOUND",
    "FunctionNotFound": "NVML_ERROR_FUNCTION_NOT_FOUND",
    "GpuIsLost": "NVML_ERROR_GPU_IS_LOST",
    "ResetRequired": "NVML_ERROR_RESET_REQUIRED",
    "OperatingSystem": "NVML_ERROR_OPERATING_SYSTEM",
    "DriverLibraryVersionMismatch": "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    "Unknown": "NVML_ERROR_UNKNOWN",
}


@pytest.mark.parametrize(("reason", "constant"), sorted(REASON_CONSTANTS.items()))
def test_real_pynvml_errors_map_to_reasons(reason: str, constant: str) -> None:
    code = getattr(pynvml, constant)
    assert ERROR_REASONS[code] == reason
    error = pynvml.NVMLError(code)
    assert isinstance(error, pynvml.NVMLError) and type(error) is not pynvml.NVMLError
    assert NvmlQuery(pynvml).reason_of(error) == reason


def test_constants_agree_with_pynvml() -> None:
    assert probe_nvml.TOPOLOGY_KINDS == {
        pynvml.NVML_TOPOLOGY_INTERNAL: LinkKind.SELF,
        pynvml.NVML_TOPOLOGY_SINGLE: LinkKind.PIX,
        pynvml.NVML_TOPOLOGY_MULTIPLE: LinkKind.PXB,
        pynvml.NVML_TOPOLOGY_HOSTBRIDGE: LinkKind.PHB,
        pynvml.NVML_TOPOLOGY_NODE: LinkKind.NODE,
        pynvml.NVML_TOPOLOGY_SYSTEM: LinkKind.SYS,
    }
    assert probe_nvml.P2P_TOKENS == {
        pynvml.NVML_P2P_STATUS_OK: "OK",
        pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED: "CNS",
        pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED: "GNS",
        pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: "TNS",
        pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY: "DR",
        pynvml.NVML_P2P_STATUS_NOT_SUPPORTED: "NS",
        pynvml.NVML_P2P_STATUS_UNKNOWN: "U",
    }
    assert dict(probe_nvml.P2P_CAPS) == {
        "read": 0, "write": pynvml.NVML_P2P_CAPS_INDEX_WRITE,
        "nvlink": pynvml.NVML_P2P_CAPS_INDEX_NVLINK, "atomics": pynvml.NVML_P2P_CAPS_INDEX_ATOMICS,
    }
    assert probe_nvlink.REMOTE_TYPES == {
        pynvml.NVML_NVLINK_DEVICE_TYPE_GPU: "gpu",
        pynvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU: "ibmc",
        pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH: "switch",
    }
    assert probe_nvml.FABRIC_STATES[pynvml.NVML_GPU_FABRIC_STATE_COMPLETED] == "Completed"
    assert probe_nvlink.FI_NVLINK_LINK_COUNT == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT
    assert probe_nvlink.FI_NVLINK_GET_STATE == pynvml.NVML_FI_DEV_NVLINK_GET_STATE
    assert probe_nvlink.FI_NVLINK_GET_VERSION == pynvml.NVML_FI_DEV_NVLINK_GET_VERSION
    assert probe_nvml.AFFINITY_SCOPE_NODE == pynvml.NVML_AFFINITY_SCOPE_NODE
    generations = {"1_0": 1, "2_0": 2, "2_2": 2, "3_0": 3, "3_1": 3, "4_0": 4, "5_0": 5, "6_0": 6}
    for suffix, generation in generations.items():
        if hasattr(pynvml, f"NVML_NVLINK_VERSION_{suffix}"):  # older bindings name fewer versions
            assert probe_nvlink.NVLINK_VERSION_GENERATIONS[getattr(pynvml, f"NVML_NVLINK_VERSION_{suffix}")] == generation


def test_fake_offers_only_functions_and_codes_that_pynvml_has() -> None:
    functions = [name for name in dir(FakeNvml) if name.startswith("nvml")]
    assert functions
    assert [name for name in functions if not hasattr(pynvml, name)] == []
    codes = {name: value for name, value in vars(fake_module).items() if name.startswith("NVML_ERROR_")}
    assert codes == {name: getattr(pynvml, name) for name in codes}
    for cls in fake_module.NVMLError._by_code.values():
        assert hasattr(pynvml, cls.__name__), cls.__name__
    assert issubclass(fake_module.NVMLError(3).__class__, fake_module.NVMLError)
    assert fake_module.NVMLError(3).value == 3


def test_fake_encodings_are_written_independently_of_the_probe() -> None:
    """H100 NVLink 4 is NVML_NVLINK_VERSION_4_0 on the wire; the probe decodes it back to generation 4."""
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    fake.nvmlInit()
    raw = fake.nvmlDeviceGetNvLinkVersion(fake.nvmlDeviceGetHandleByIndex(0), 0)
    assert raw == pynvml.NVML_NVLINK_VERSION_4_0
    assert nvlink_generation(raw, "9.0") == 4


@pytest.mark.parametrize(
    ("raw", "capability", "generation"),
    [(6, "9.0", 4), (4, "8.0", 3), (2, "7.0", 2), (3, "8.0", 3), (4, "9.0", 4), (7, "10.0", 5), (None, "9.0", None),
     (4, None, 3)],
    ids=["h100-enum", "a100-enum", "v100", "a100-plain", "h100-plain", "b200-enum", "unread", "unknown-arch"],
)
def test_nvlink_generation_reads_enum_and_plain_answers(raw: int | None, capability: str | None, generation: int | None) -> None:
    assert nvlink_generation(raw, capability) == generation


def test_decode_is_safe() -> None:
    assert decode(b"NVIDIA H100\x00\x00") == "NVIDIA H100"
    assert decode(b"bad \xff byte") == "bad \ufffd byte"
    assert decode("already text ") == "already text"


def test_mask_to_numbers() -> None:
    assert mask_to_numbers([0b1011]) == {0, 1, 3}
    assert mask_to_numbers([0, 1 << 63, 1]) == {127, 128}
    array = (ctypes.c_ulonglong * 2)(0xF, 1)
    assert mask_to_numbers(array) == {0, 1, 2, 3, 64}


def test_field_value_follows_value_type() -> None:
    values = fake_module.FakeFieldValue(91, 0, valueType=1, value=fake_module.FakeValue(uiVal=18))
    assert field_value(values) == 18
    assert field_value(fake_module.FakeFieldValue(91, 0, nvmlReturn=3)) is None
    assert field_value(fake_module.FakeFieldValue(1, 0, valueType=0, value=fake_module.FakeValue(dVal=1.5))) == 1.5


class _Odd:
    """A binding whose function raises something that is not an NVMLError."""

    class NVMLError(Exception):
        pass

    def nvmlDeviceGetName(self, handle: object) -> str:
        raise TypeError("bad handle")


def test_query_survives_missing_functions_and_odd_exceptions() -> None:
    query = NvmlQuery(_Odd())
    assert query("nvmlDeviceGetUUID", 0, subject="gpu 0") is None
    assert query("nvmlDeviceGetUUID", 1, subject="gpu 1") is None
    assert query("nvmlDeviceGetName", 0, subject="gpu 0") is None
    assert [(g.subject, g.reason) for g in query.gaps] == [
        ("nvmlDeviceGetUUID", "FunctionNotFound (not in this NVML binding)"),
        ("nvmlDeviceGetName(gpu 0)", "TypeError: bad handle"),
    ]
    assert query.calls == 1


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_loads(), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_driver_gives_a_gap_and_a_note() -> None:
    snapshot = probe_host(budget_s=5.0)
    assert ("nvmlInit", "LibraryNotFound") in [(g.subject, g.reason) for g in snapshot.gaps]
    notes = [value for name, value in snapshot.meta if name == "note"]
    assert any("libnvidia-ml.so.1" in note for note in notes)
    assert snapshot.host.numa_nodes


def test_software_facts_come_from_files_without_importing_torch() -> None:
    code = ("import sys; from probes.capabilities import read_software; facts = read_software(); "
            "print(facts.torch); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    version, imported = result.stdout.split()
    assert imported == "False"
    try:
        import importlib.metadata

        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        installed = "None"
    assert version.split("+")[0] == installed.split("+")[0]


def test_torch_version_file_is_read_as_text(tmp_path: Path) -> None:
    (tmp_path / "version.py").write_text("__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\n")
    assert read_torch_version_file(tmp_path) == ("2.5.1+cu124", "12.4")
    (tmp_path / "version.py").write_text("__version__ = '2.5.1'\ncuda: Optional[str] = None\n")
    assert read_torch_version_file(tmp_path) == ("2.5.1", None)


def test_cpu_torch_has_no_usable_symmetric_memory() -> None:
    facts = read_software()
    if facts.torch is not None and facts.torch_cuda is None:
        assert facts.torch_symmetric_memory is False


class _Recorder:
    """Forwards to a fake NVML and records every call's function name and arguments."""

    def __init__(self, target: FakeNvml) -> None:
        self._target = target
        self.log: list[tuple[str, tuple[object, ...]]] = []

    def __getattr__(self, name: str) -> object:
        value = getattr(self._target, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def call(*args: object) -> object:
            self.log.append((name, args))
            return value(*args)

        return call


@pytest.mark.parametrize("name", ["dgx-h100", "dgx1-v100", "consumer-2gpu"])
def test_every_call_the_probe_makes_fits_the_real_pynvml_signature(tmp_path: Path, name: str) -> None:
    """The probe and the live sampler call pynvml exactly as the real binding expects (names, argument counts)."""
    sample = load_sample(name)
    recorder = _Recorder(FakeNvml.from_snapshot(sample))
    probe_host(nvml=recorder, sysfs_root=str(build_sysfs(tmp_path, sample.host)), budget_s=5.0)
    LiveSampler(recorder).read()
    assert recorder.log
    for function, args in recorder.log:
        inspect.signature(getattr(pynvml, function)).bind(*args)


def test_with_torch_agrees_with_the_file_reading() -> None:
    pytest.importorskip("torch")
    from_files, from_torch = read_software(), read_software(with_torch=True)
    assert from_torch.torch == from_files.torch
    assert from_torch.torch_cuda == from_files.torch_cuda
    if from_torch.torch_cuda is None:
        assert from_torch.torch_symmetric_memory is False
        assert [gap.reason for gap in from_torch.gaps] == ["torch is a CPU build: no NCCL"]


def test_every_pynvml_error_code_has_a_named_reason() -> None:
    """Each `NVML_ERROR_*` code gets its pynvml class name as the gap reason, never a bare "NVML error 25"."""
    codes = {name: value for name, value in vars(pynvml).items() if name.startswith("NVML_ERROR_") and isinstance(value, int)}
    assert len(codes) > 20
    for name, code in codes.items():
        error = pynvml.NVMLError(code)
        expected = type(error).__name__.removeprefix("NVMLError_")
        if code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
            expected = "DriverLibraryVersionMismatch"
        assert NvmlQuery(pynvml).reason_of(error) == expected, name


def test_p2p_read_index_is_not_taken_from_pynvml() -> None:
    """pynvml spells NVML_P2P_CAPS_INDEX_READ as the tuple (0,); the probe must pass the number 0."""
    assert dict(probe_nvml.P2P_CAPS)["read"] == 0
    assert all(isinstance(index, int) for _, index in probe_nvml.P2P_CAPS)
    assert pynvml.NVML_P2P_CAPS_INDEX_READ in (0, (0,))


NEWER_BINDINGS = pytest.mark.skipif(not hasattr(pynvml, "NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED"),
                                    reason="nvidia-ml-py before 13.615 does not name the NVLink state field's values")


@NEWER_BINDINGS
def test_nvlink_state_constants_agree_with_pynvml() -> None:
    assert probe_nvlink.NVLINK_STATE_UP == {
        pynvml.NVML_NVLINK_STATE_INACTIVE: False,
        pynvml.NVML_NVLINK_STATE_ACTIVE: True,
        pynvml.NVML_NVLINK_STATE_SLEEP: True,
        pynvml.NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED: False,
    }
    assert pynvml.NVML_FEATURE_ENABLED == pynvml.NVML_NVLINK_STATE_ACTIVE


@pytest.mark.parametrize(
    ("state", "up"),
    [(0, False), (1, True), (2, True), (3, False), (7, False), (None, False)],
    ids=["inactive", "active", "sleep", "traffic-disabled", "unknown", "unread"],
)
def test_nvlink_up_decodes_the_state_field(state: int | None, up: bool) -> None:
    assert probe_nvlink.nvlink_up(state) is up


@NEWER_BINDINGS
def test_probe_reads_the_nvlink_state_field_enum_not_a_truth_value(tmp_path: Path) -> None:
    """NVML_FI_DEV_NVLINK_GET_STATE = 3 (ACTIVE_TRAFFIC_DISABLED) is not a usable link; 2 (SLEEP) still is."""
    from support.probe import probe_fake

    sample = load_sample("dgx-h100")
    fake = FakeNvml.from_snapshot(sample)
    fake.set_field_link_state(0, 0, pynvml.NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED)
    fake.set_field_link_state(0, 1, pynvml.NVML_NVLINK_STATE_SLEEP)
    ports = probe_fake(tmp_path, sample, fake).host.gpus[0].nvlinks
    assert [port.active for port in ports[:3]] == [False, True, True]
    assert sum(port.active for port in ports) == 17
    assert ports[0].remote_pci_bus_id is None


def test_fake_reports_ampere_nvlink_as_version_3_1_like_real_a100s() -> None:
    """Real A100s answer 5 (NVML_NVLINK_VERSION_3_1) to nvmlDeviceGetNvLinkVersion; the probe reads generation 3."""
    fake = FakeNvml.from_snapshot(load_sample("dgx-a100"))
    fake.nvmlInit()
    raw = fake.nvmlDeviceGetNvLinkVersion(fake.nvmlDeviceGetHandleByIndex(0), 0)
    assert raw == pynvml.NVML_NVLINK_VERSION_3_1
    assert nvlink_generation(raw, "8.0") == 3


def test_fabric_info_struct_carries_its_version_word_like_pynvmls() -> None:
    """nvmlDeviceGetGpuFabricInfoV rejects a struct without `version`; pynvml's constructor sets it, so must the fake's."""
    assert pynvml.c_nvmlGpuFabricInfoV_t().version == pynvml.nvmlGpuFabricInfo_v2
    assert fake_module.c_nvmlGpuFabricInfoV_t().version == pynvml.nvmlGpuFabricInfo_v2
    fake = FakeNvml.from_snapshot(load_sample("dgx-h100"))
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    unversioned = fake_module.c_nvmlGpuFabricInfoV_t()
    unversioned.version = 0
    with pytest.raises(fake_module.NVMLError) as raised:
        fake.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(unversioned))
    assert raised.value.value == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
