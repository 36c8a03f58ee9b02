"""The benchmark scripts import each other's helpers by name (`from baseline import child_run`): every such name
must exist where it is imported from, or a script breaks only when someone runs it."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _defined(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def test_every_name_a_script_imports_from_another_script_is_defined_there() -> None:
    scripts = {path.stem: path for path in BENCHMARKS.glob("*.py")}
    missing = []
    for path in scripts.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in scripts:
                defined = _defined(scripts[node.module])
                missing += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                            if alias.name not in defined]
    assert len(scripts) > 5 and not missing
