"""The rules of the house: the core stays pure, the command line stays light, rooms import downwards only,
no symbolic links and no bare `import topo`."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

from support.paths import ROOT

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


def test_the_app_paints_before_it_imports_what_its_tabs_need() -> None:
    """`linkscope open SOURCE` builds the app from the command line, the app module and its services alone: the
    tabs' modules, and the readers, checks and cost model they import, load after the first frame."""
    modules = _modules_after("from linkscope.cli import build_parser; build_parser('open')\n"
                             "from linkscope.commands import open_cmd\n"
                             "from linkscope.tui.app import build_app; build_app('sample:dgx-h100')")
    assert "linkscope.tui.app" in modules
    early = sorted(name for name in modules if name.startswith(("linkscope.tui.tabs", "linkscope.probes")) or (
        name.startswith("linkscope.topo.") and name.split(".")[2] not in ("common", "model")))
    assert not early, f"imported before the first frame: {early}"


def test_trace_json_loads_no_machine_model() -> None:
    """`trace --json` without a machine reads and joins the traces only: the cost model, the placement of ranks, the
    GPU provenance and the console rendering are loaded by the runs that use them (`--source`, text output)."""
    trace = ROOT / "tests" / "fixtures" / "real" / "traces" / "hta-gloo-rank34-of-300-cpu-only.json.gz"
    modules = _modules_after("import contextlib, io\nfrom linkscope.cli import main\n"
                             f"with contextlib.redirect_stdout(io.StringIO()): main(['trace', '--json', '{trace}'])")
    assert "linkscope.topo.trace.report" in modules
    loaded = sorted(name for name in modules if name.startswith(
        ("linkscope.topo.cost", "linkscope.topo.layout", "linkscope.topo.machine", "linkscope.render", "rich",
         "linkscope.topo.model.provenance", "linkscope.topo.model.snapshot", "linkscope.topo.model.host")))
    assert not loaded, f"trace --json imported {loaded}"

def test_show_loads_no_help_spelling_or_temporary_file_module() -> None:
    """Wrapping help, guessing a mistyped command and writing a file through a temporary one are what some runs
    do: `show` (read, print) loads none of their modules, each a few milliseconds of every start; nor shutil (the
    help's width is read without it). Whatever this interpreter's own start-up hooks loaded is forgotten first, and
    what the libraries `show` prints with load themselves is theirs (rich 14's segments import logging, and with it
    textwrap)."""
    unwanted = ("textwrap", "difflib", "tempfile", "shutil")
    forget = f"import sys\nfor name in {unwanted!r}: sys.modules.pop(name, None)\n"
    modules = _modules_after(forget + "import contextlib, io\nfrom linkscope.cli import main\n"
                             "with contextlib.redirect_stdout(io.StringIO()): main(['show', 'sample:dgx-h100'])")
    assert "linkscope.commands.show_cmd" in modules
    libraries = _modules_after(forget + "import argparse, json, rich.console, rich.columns, rich.rule, rich.table")
    loaded = sorted(modules & set(unwanted) - libraries)
    assert not loaded, f"show imported {loaded}"


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


ROOMS: tuple[tuple[str, ...], ...] = (
    ("common",),
    ("model",),
    ("machine",),
    ("samples", "layout"),
    ("formats",),
    ("cost",),
    ("health",),
    ("checks", "nccl", "trace"),
)
"""The rooms of topo/, lowest first: a room imports only from itself and from rooms of earlier rows, so rooms of
one row never import each other."""

_ROOM_ROW = {room: row for row, rooms in enumerate(ROOMS) for room in rooms}


def _imported_names(path: pathlib.Path) -> set[str]:
    """The modules a file imports (absolute imports), wherever in the file the import stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _topo_imports(path: pathlib.Path) -> set[str]:
    """The topo rooms a module imports (`linkscope.topo.<room>...`)."""
    return {name.split(".")[2] for name in _imported_names(path) if name.startswith("linkscope.topo.")}


def test_every_topo_module_lives_in_a_room_and_the_rooms_are_listed() -> None:
    top_level = sorted(path.name for path in (ROOT / "topo").glob("*.py"))
    assert top_level == ["__init__.py"], f"modules at topo/'s top level: put them in a room: {top_level}"
    rooms = sorted(path.parent.name for path in (ROOT / "topo").glob("*/__init__.py"))
    assert rooms == sorted(_ROOM_ROW), "every room of topo/ is in ROOMS, once"


def test_rooms_import_only_rooms_below_them() -> None:
    offenders = []
    for room, row in _ROOM_ROW.items():
        for path in sorted((ROOT / "topo" / room).rglob("*.py")):
            above = {other for other in _topo_imports(path) - {room} if _ROOM_ROW.get(other, len(ROOMS)) >= row}
            if above:
                offenders.append(f"{path.relative_to(ROOT)} imports {sorted(above)}")
    assert not offenders, offenders


def _repository_files() -> list[pathlib.Path]:
    """Every file of the checkout that git tracks or would track (ignored build outputs left out)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an unpacked archive): every file but the usual outputs
        skipped = {".git", ".venv", "build", "dist", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__"}
        return [path for path in ROOT.rglob("*") if not skipped & set(path.relative_to(ROOT).parts)]
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def test_no_symbolic_link_anywhere_in_the_repository() -> None:
    """pyproject's package-dir maps linkscope.topo, .probes and .tui onto the folders: a checkout without link
    support (Windows' default, some CI caches) builds the same wheel."""
    links = [path.relative_to(ROOT).as_posix() for path in _repository_files() if path.is_symlink()]
    assert not links, links


def test_nothing_imports_topo_probes_or_tui_bare() -> None:
    """`import topo` works from the repository root by accident and nowhere else (and loads a module twice, as
    `topo.x` and `linkscope.topo.x`): every import names the installed package."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in (".venv", "build", "dist") or path.is_symlink():
            continue
        bad = {name.split(".")[0] for name in _imported_names(path)} & set(LAYERS)
        if bad:
            offenders.append(f"{relative.as_posix()}: {sorted(bad)}")
    assert not offenders, offenders
    loaded = _modules_after("import linkscope.cli, linkscope.topo.checks.check, linkscope.probes.host, linkscope.tui.app")
    assert not {name.split(".")[0] for name in loaded} & set(LAYERS)


MAX_MODULE_LINES = 470
"""Small modules with one purpose: a module past this many lines is two modules."""


def test_no_module_of_the_core_is_too_long() -> None:
    long = [f"{path.relative_to(ROOT)}: {count}" for path in sorted((ROOT / "topo").rglob("*.py"))
            if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, long


def test_every_cap_is_in_the_limits_module() -> None:
    """topo/common/limits.py holds every MAX_* cap, so the largest accepted input, what a reader keeps and how much a
    list shows are found in one place."""
    limits = ROOT / "topo" / "common" / "limits.py"
    offenders = []
    for folder in ("topo", "probes", "tui", "linkscope"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == limits:
                continue
            for node in ast.parse(path.read_text()).body:
                names = [target.id for target in (node.targets if isinstance(node, ast.Assign) else [
                    node.target] if isinstance(node, ast.AnnAssign) else []) if isinstance(target, ast.Name)]
                offenders += [f"{path.relative_to(ROOT)}: {name}" for name in names if name.lstrip("_").startswith("MAX_")]
    assert not offenders, offenders


_BANDWIDTH_WORDS = re.compile(r"gbps|bw|peak|load|bandwidth|speed|value", re.IGNORECASE)


def _hand_written_gbps(path: pathlib.Path) -> list[int]:
    """Lines of `path` where an f-string formats a number straight before `GB/s`: a placeholder with a format spec, a
    computed value, or a name that holds a bandwidth (`{load:.1f} GB/s`, `{x / 2} GB/s`, `{peak_gbps} GB/s`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, following in zip(node.values, node.values[1:], strict=False):
            if not (isinstance(value, ast.FormattedValue) and isinstance(following, ast.Constant)
                    and str(following.value).lstrip().startswith("GB/s")):
                continue
            expression = ast.unparse(value.value)
            if value.format_spec is not None or not isinstance(value.value, ast.Name | ast.Attribute | ast.Subscript) \
                    or _BANDWIDTH_WORDS.search(expression):
                found.append(node.lineno)
    return found


def test_bandwidths_are_written_by_the_one_formatter(tmp_path: pathlib.Path) -> None:
    """`format_gbps` (topo/common/units.py) writes every GB/s figure: one spelling, one rule for small values and
    for infinity, and a format spec where a report lines its figures up."""
    units = ROOT / "topo" / "common" / "units.py"
    offenders = [f"{path.relative_to(ROOT)}:{line}" for folder in ("topo", "probes", "tui", "linkscope")
                 for path in sorted((ROOT / folder).rglob("*.py")) if path != units for line in _hand_written_gbps(path)]
    assert not offenders, offenders
    sample = tmp_path / "sample.py"
    sample.write_text('a = f"{load:.1f} GB/s"\nb = f"{x / 2} GB/s"\nc = f"{peak_gbps} GB/s"\nd = f"GPU{copy.dst} GB/s"\n')
    assert _hand_written_gbps(sample) == [1, 2, 3], "the check sees hand-written figures and passes labels"
