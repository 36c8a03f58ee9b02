"""One installed package: the wheel holds `linkscope` and nothing else at the top level, every module of
topo/, probes/ and tui/ under it (pyproject's package-dir, no links), with the samples and the app's
stylesheet, so installing linkscope next to other distributions named `tui`, `probes` or `topo` clashes
with nothing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.paths import ROOT

FOLDERS = {"linkscope": "linkscope", "linkscope.topo": "topo", "linkscope.probes": "probes", "linkscope.tui": "tui"}
"""Each part of the installed package and the repository folder it is built from."""


def _installed_names() -> set[str]:
    """Every file the wheel must hold, as the wheel names it (`linkscope/topo/model/host.py`)."""
    names: set[str] = set()
    for package, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*"):
            relative = path.relative_to(ROOT / folder)
            if path.suffix in (".py", ".json", ".tcss", ".typed") and "__pycache__" not in relative.parts \
                    and not (package == "linkscope" and relative.parts[0] in FOLDERS.values()):
                names.add(f"{package.replace('.', '/')}/{relative.as_posix()}")
    return names


def test_pyproject_lists_every_package_and_maps_the_folders() -> None:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == FOLDERS
    folders = {f"{package}.{'.'.join(init.parent.relative_to(ROOT / folder).parts)}".rstrip(".")
               for package, folder in FOLDERS.items() for init in (ROOT / folder).rglob("__init__.py")}
    assert sorted(setuptools["packages"]) == sorted(folders), "a new folder of modules goes into pyproject's packages"


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("linkscope-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"linkscope"}
    missing = sorted(_installed_names() - set(names))
    assert not missing, missing
    assert "linkscope/topo/samples/dgx-h100.json" in names and "linkscope/tui/linkscope.tcss" in names


def _dummy_distribution(where: Path, name: str) -> Path:
    """A tiny distribution whose one module is `name` (as other projects named tui or probes ship)."""
    project = where / f"dummy-{name}"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text(f"WHO = 'the other {name}'\n")
    (project / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "dummy-{name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{name}"]\n')
    return project


def _see_these_dependencies(python: Path) -> None:
    """Let the venv of `python` import the packages this interpreter has (textual, rich...), wherever they are
    installed: a venv made with --system-site-packages sees the base interpreter's, not those of a venv running
    the tests. The directories go after the venv's own, and their .pth files are not run (so an editable
    linkscope installed here stays out of it)."""
    import site
    import sysconfig

    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(own, "parent-dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(here) if Path(path).is_dir()))


def test_installing_beside_packages_named_tui_and_probes_leaves_both_working(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    _see_these_dependencies(python)
    others = [str(_dummy_distribution(tmp_path, name)) for name in ("tui", "probes")]
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps"]
    subprocess.run([*pip, *others], check=True, timeout=300, capture_output=True)
    subprocess.run([*pip, str(ROOT)], check=True, timeout=300, capture_output=True)
    probe = ("import tui, probes, linkscope.tui.app, linkscope.probes.bench.worker, linkscope.topo.model.snapshot; "
             "print(tui.WHO, '|', probes.WHO, '|', linkscope.topo.model.snapshot.__name__)")
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "the other tui | the other probes | linkscope.topo.model.snapshot"
