"""One Finding type: every analysis's findings share the base, its severities and its one JSON writer."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import linkscope.probes
import linkscope.topo
from linkscope.topo.health.finding import HealthFinding
from linkscope.topo.model.findings import SEVERITIES, Finding, reaches, worst_severity


def _finding_classes() -> list[type]:
    found = []
    for package in (linkscope.topo, linkscope.probes):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name.endswith("__main__"):
                continue
            try:
                imported = importlib.import_module(module.name)
            except ModuleNotFoundError as missing:  # the benchmark workers' modules need torch
                if missing.name == "torch":
                    continue
                raise
            for _, value in inspect.getmembers(imported, inspect.isclass):
                if value.__name__.endswith("Finding") and value.__module__ == module.name:
                    found.append(value)
    return found


def test_every_finding_is_a_finding_with_a_message_and_no_writer_of_its_own() -> None:
    classes = _finding_classes()
    assert {cls.__name__ for cls in classes} >= {"LayoutFinding", "HealthFinding", "NcclFinding", "TraceFinding",
                                                  "CopyFinding"}
    for cls in classes:
        if cls is Finding:
            continue
        assert issubclass(cls, Finding), cls
        assert "message" in {field.name for field in dataclasses.fields(cls)}, cls
        assert "to_json" not in vars(cls) or cls is HealthFinding, f"{cls.__name__} writes its own JSON"


def test_the_one_writer_keeps_the_contract_order_and_writes_lists() -> None:
    finding = HealthFinding("nvlink-links-down", "warning", "node01", (3, 5), "two ports down", ("GPU3: 16 of 18",),
                            "reseat")
    assert list(finding.to_json()) == ["code", "severity", "host", "gpus", "message", "evidence", "fix"]
    assert finding.to_json()["evidence"] == ["GPU3: 16 of 18"]
    assert finding.to_json(qualified=True)["gpus"] == ["node01:3", "node01:5"]


def test_the_exit_rule_orders_severities() -> None:
    assert SEVERITIES == ("info", "warning", "error")
    assert worst_severity(["info", "error", "warning"]) == "error" and worst_severity([]) is None
    assert reaches(["warning"], "warning") and not reaches(["info"], "warning") and reaches(["error"], "info")
