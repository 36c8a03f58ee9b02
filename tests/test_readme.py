"""The README's promises: it starts with the two set-up commands, CI runs its test command, and
every `linkscope` example in it runs with the exit status it states."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from support.paths import ROOT

README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.DOTALL)
EXPECTED_EXIT = re.compile(r"#\s*exit (\d+)")


def _blocks() -> list[str]:
    return FENCE.findall(README)


def _linkscope_lines(interactive: bool) -> list[str]:
    """The `linkscope ...` lines of the README's shell blocks that open the app (or that do not)."""
    lines = []
    for block in _blocks():
        for raw in block.splitlines():
            line = raw.strip()
            if line.startswith("linkscope ") and ("# interactive" in line) == interactive:
                lines.append(line)
    return lines


def _examples() -> list[tuple[str, int]]:
    """Every non-interactive `linkscope ...` line, with its expected exit status."""
    examples = []
    for line in _linkscope_lines(interactive=False):
        expected = EXPECTED_EXIT.search(line)
        examples.append((line.split("#", 1)[0].strip(), int(expected.group(1)) if expected else 0))
    return examples


@pytest.mark.parametrize("line", _linkscope_lines(interactive=True))
def test_readme_app_example_parses_and_its_files_open(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines that open the app (run for real by the tmux smoke test) parse, and their SOURCE and files load."""
    from linkscope.cli import build_parser
    from linkscope.commands import open_cmd

    opened: list[object] = []
    monkeypatch.setattr("linkscope.tui.app.LinkscopeApp.run", lambda app: opened.append(app.snapshot))
    monkeypatch.setattr(open_cmd, "terminal_problem", lambda: None)  # pytest's output is not a terminal
    monkeypatch.chdir(ROOT)
    args = build_parser().parse_args(shlex.split(line.split("#", 1)[0])[1:])
    assert args.run is open_cmd.run
    assert args.run(args) == 0
    assert len(opened) == 1


def test_readme_starts_with_install_and_run_then_install_and_test() -> None:
    first, second = _blocks()[:2]
    assert "pip install" in first and "linkscope" in first
    assert "pip install" in second and "pytest" in second


def test_ci_runs_the_readme_test_command() -> None:
    test_command = _blocks()[1].strip().splitlines()[-1]
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert f'readme_test_command="{test_command}"' in ci_script


def test_readme_has_examples() -> None:
    assert len(_examples()) >= 5


@pytest.mark.xdist_group("readme-examples")  # in README order, one after another: some open files others wrote
@pytest.mark.parametrize(("command", "expected_status"), _examples(), ids=[c for c, _ in _examples()])
def test_readme_example_runs(command: str, expected_status: int, tmp_path: pathlib.Path) -> None:
    argv = shlex.split(command)
    assert argv[0] == "linkscope"
    if argv[1] == "bench" and importlib.util.find_spec("torch") is None:
        pytest.skip("linkscope bench needs torch (CI installs it, so there this runs)")
    result = subprocess.run(
        [sys.executable, "-m", "linkscope", *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "120", "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == expected_status, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_readme_gives_the_cpu_torch_install_and_a_virtual_environment() -> None:
    setup = README.split("## ", 1)[0]
    assert TORCH_CPU in setup and "virtual environment" in setup and "python3 -m venv" in setup


def test_ci_installs_cpu_torch_with_the_plain_pin_as_fallback() -> None:
    """`.ci/run` tries PyTorch's CPU index first and falls back to the plain pin when it cannot be reached."""
    ci_script = (ROOT / ".ci" / "run").read_text()
    index = ci_script.index('--index-url "$torch_cpu_index"')
    assert 'torch_cpu_index="https://download.pytorch.org/whl/cpu"' in ci_script
    assert ci_script.index("python -m pip install --quiet torch==2.13.0\n", index) > index


def test_ci_falls_back_when_the_cpu_index_is_unreachable(tmp_path: pathlib.Path) -> None:
    """Run .ci/run's torch step with a `python` whose pip fails for the index form: the plain pin follows."""
    ci_script = (ROOT / ".ci" / "run").read_text()
    start = ci_script.index("torch_cpu_index=")
    step = ci_script[start:ci_script.index("fi\n", start) + 3]
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "$@" >> "$CALLS"\ncase "$*" in *index-url*) exit 1;; esac\nexit 0\n')
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    result = subprocess.run(["bash", "-c", f"set -euo pipefail\n{step}"], capture_output=True, text=True, check=False,
                            env={"PATH": f"{tmp_path}:/usr/bin:/bin", "CALLS": str(calls)})
    assert result.returncode == 0, result.stderr
    made = calls.read_text().splitlines()
    assert len(made) == 2 and "--index-url" in made[0] and made[1] == "-m pip install --quiet torch==2.13.0"
    assert "could not be reached" in result.stderr


def _performance_rows() -> list[str]:
    """The rows of the README's Performance table (header and rule left out)."""
    section = README.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| what ", "|---"))]


def test_every_performance_figure_names_the_benchmark_that_measures_it() -> None:
    """Each row of the Performance table names a `benchmarks/` script that exists, so every figure can be measured
    again (a figure with no script beside it cannot be re-measured when its code changes)."""
    rows = _performance_rows()
    assert len(rows) >= 10
    for row in rows:
        scripts = re.findall(r"\b(bench_\w+\.py)\b", row.split(" | ", 1)[0])
        assert scripts, f"no benchmarks/ script named: {row[:80]}"
        missing = [name for name in scripts if not (ROOT / "benchmarks" / name).is_file()]
        assert not missing, f"{missing} named but not in benchmarks/: {row[:80]}"
