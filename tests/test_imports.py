"""Import boundaries: the core stays pure and the command line stays light."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("textual", "torch", "pynvml")


def _modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(result.stdout.split())


LAYERS = ("topo", "probes", "tui")
"""The installed package's layers below the command line: linkscope.topo, linkscope.probes, linkscope.tui."""


def _package_of(name: str) -> str:
    """The part of the project (`topo`, `probes`, `tui`, `linkscope` for the command line) or the
    top-level distribution a module belongs to; the bare `linkscope` package (its version) is `linkscope-init`."""
    parts = name.split(".")
    if parts[0] != "linkscope":
        return parts[0]
    if len(parts) == 1:
        return "linkscope-init"
    return parts[1] if parts[1] in LAYERS else "linkscope"


def _top_level_packages(modules: set[str]) -> set[str]:
    return {_package_of(name) for name in modules}


def test_core_imports_no_hardware_or_ui_library() -> None:
    packages = _top_level_packages(
        _modules_after(
            "import pkgutil, importlib, linkscope.topo as topo\n"
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(topo.__path__, 'linkscope.topo.')]"
        )
    )
    for heavy in (*HEAVY, "rich", "psutil", "probes", "tui", "linkscope"):
        assert heavy not in packages, f"topo imported {heavy}"


def test_cli_parser_and_show_path_do_not_import_textual_or_torch() -> None:
    packages = _top_level_packages(_modules_after("from linkscope.cli import build_parser; build_parser()"))
    for heavy in HEAVY:
        assert heavy not in packages, f"building the CLI parser imported {heavy}"


def _imports_of(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(_package_of(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(_package_of(node.module))
    return names


FORBIDDEN = {
    "topo": {"probes", "tui", "linkscope", "torch", "pynvml", "textual", "rich", "psutil"},
    "probes": {"tui", "linkscope", "textual"},
    "tui": {"linkscope"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imports_of(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(bad)}")
    assert not offenders, offenders


def test_only_probes_nvml_imports_pynvml_and_only_bench_imports_torch() -> None:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(("tests/", "benchmarks/", ".venv/", "build/")):
            continue
        imports = _imports_of(path)
        if "pynvml" in imports:
            assert relative == "probes/nvml.py", f"{relative} imports pynvml"
        if "torch" in imports:
            assert relative.startswith(("probes/bench/", "probes/capabilities", "probes/cluster_collect")), \
                    f"{relative} imports torch"
