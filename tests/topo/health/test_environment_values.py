"""Environment variables read by their values, per NCCL's documented meanings (topo.health.environment)."""

from __future__ import annotations

import pytest

from linkscope.topo.formats.nccl_log import read_nccl_log_text
from linkscope.topo.health.environment import setting_meaning
from linkscope.topo.health.finding import HealthContext
from linkscope.topo.health.rules import run_health
from linkscope.topo.nccl.checks import nccl_findings
from linkscope.topo.samples import load_sample
from support.paths import REAL

AZUREML_IB_OFF = (REAL / "nccl_debug" /
                  "azureml-1gpu-container-nccl-2.10.3-ibext-plugin-ib-disabled-socket-fallback-hex-hostname-init-excerpt.txt")


@pytest.mark.parametrize(
    ("name", "value", "says", "severity"),
    [
        ("NCCL_IB_DISABLE", "0", "leaves InfiniBand/RoCE on", "info"),
        ("NCCL_IB_DISABLE", "1", "turns off InfiniBand/RoCE", "warning"),
        ("NCCL_P2P_DISABLE", "0", "leaves GPU peer-to-peer on", "info"),
        ("NCCL_SHM_DISABLE", "1", "turns off the shared-memory transport", "warning"),
        ("NCCL_NVLS_ENABLE", "0", "turns NVLink SHARP off", "warning"),
        ("NCCL_NVLS_ENABLE", "1", "leaves NVLink SHARP on", "info"),
        ("NCCL_P2P_LEVEL", "LOC", "turns P2P off", "warning"),
        ("NCCL_P2P_LEVEL", "NVL", "only up to NVL", "info"),
        ("NCCL_NET_GDR_LEVEL", "2", "GPUDirect RDMA only up to PXB", "info"),
        ("NCCL_NET_GDR_LEVEL", "PIX", "only up to PIX", "info"),
        ("NCCL_CROSS_NIC", "0", "one NIC (rail)", "info"),
        ("NCCL_CROSS_NIC", "1", "crosses rails", "info"),
        ("NCCL_ALGO", "Ring", "restricts NCCL to the algorithms Ring", "info"),
        ("NCCL_ALGO", "^NVLS", "excludes the algorithms NVLS", "info"),
        ("NCCL_PROTO", "Simple", "protocols Simple", "info"),
        ("NCCL_NET", "Socket", "forces the socket transport", "warning"),
        ("NCCL_IB_DISABLE", "yes", "not a number", "warning"),
    ],
)
def test_values_mean_what_nccl_documents(name: str, value: str, says: str, severity: str) -> None:
    meaning = setting_meaning(name, value)
    assert meaning is not None and says in meaning[0] and meaning[1] == severity


def test_ib_disable_0_is_no_ib_finding_in_doctor() -> None:
    """NCCL_IB_DISABLE=0 on a DGX with 8 RDMA NICs is NCCL's default: no env-ib-disabled; =1 is a warning."""
    snapshot = load_sample("dgx-h100")
    off = run_health(HealthContext(snapshot, env={"NCCL_IB_DISABLE": "0"}))
    on = run_health(HealthContext(snapshot, env={"NCCL_IB_DISABLE": "1"}))
    assert "env-ib-disabled" not in {finding.code for finding in off}
    assert [finding.severity for finding in on if finding.code == "env-ib-disabled"] == ["warning"]


def test_doctor_reads_nvls_algo_and_cross_nic_values() -> None:
    findings = run_health(HealthContext(load_sample("dgx-h100"),
                                        env={"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Ring", "NCCL_CROSS_NIC": "2"}))
    settings = {finding.evidence[0]: finding for finding in findings if finding.code == "env-setting"}
    assert settings["NCCL_NVLS_ENABLE=0"].severity == "warning"
    assert settings["NCCL_ALGO=Ring"].severity == "info"
    assert "the default" in settings["NCCL_CROSS_NIC=2"].message


def test_an_nccl_log_with_ib_disable_0_is_not_told_ib_is_off() -> None:
    """The real AzureML excerpt logs `NCCL_IB_DISABLE set by environment to 1.` (read by hand): a warning that IB
    is off. The same line with 0 (synthetic) leaves InfiniBand on: info, never "turns off"."""
    text = AZUREML_IB_OFF.read_text()
    assert "NCCL_IB_DISABLE set by environment to 1." in text
    real = [f for f in nccl_findings(read_nccl_log_text(text, "real")) if f.code == "env-override" and "IB_DISABLE" in f.message]
    assert len(real) == 1 and real[0].severity == "warning" and "turns off InfiniBand" in real[0].message
    zero = text.replace("NCCL_IB_DISABLE set by environment to 1.", "NCCL_IB_DISABLE set by environment to 0.")
    found = [f for f in nccl_findings(read_nccl_log_text(zero, "zero")) if f.code == "env-override" and "IB_DISABLE" in f.message]
    assert len(found) == 1 and found[0].severity == "info"
    assert "turns off" not in found[0].message and "leaves InfiniBand/RoCE on" in found[0].message
