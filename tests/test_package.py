"""One installed package: the wheel holds `linkscope` and nothing else at the top level, with the
samples and the app's stylesheet inside it, so installing linkscope next to other distributions
named `tui`, `probes` or `topo` clashes with nothing."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("linkscope-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"linkscope"}
    for inside in ("linkscope/topo/model.py", "linkscope/probes/bench/worker.py", "linkscope/tui/app.py",
                   "linkscope/tui/linkscope.tcss", "linkscope/topo/samples/dgx-h100.json", "linkscope/cli.py"):
        assert inside in names, inside


def _dummy_distribution(where: Path, name: str) -> Path:
    """A tiny distribution whose one module is `name` (as other projects named tui or probes ship)."""
    project = where / f"dummy-{name}"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text(f"WHO = 'the other {name}'\n")
    (project / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "dummy-{name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{name}"]\n')
    return project


def test_installing_beside_packages_named_tui_and_probes_leaves_both_working(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    others = [str(_dummy_distribution(tmp_path, name)) for name in ("tui", "probes")]
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps"]
    subprocess.run([*pip, *others], check=True, timeout=300, capture_output=True)
    subprocess.run([*pip, str(ROOT)], check=True, timeout=300, capture_output=True)
    probe = ("import tui, probes, linkscope.tui.app, linkscope.probes.bench.worker, linkscope.topo.model; "
             "print(tui.WHO, '|', probes.WHO, '|', linkscope.topo.model.__name__)")
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "the other tui | the other probes | linkscope.topo.model"
