"""The command line as a whole: every command explains itself, usage errors are one line and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from linkscope.cli import COMMAND_MODULES, main


@pytest.mark.parametrize("command", COMMAND_MODULES)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert f"linkscope {command}" in out
    assert len(out.splitlines()) >= 4, "help should explain, not just show usage"


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in COMMAND_MODULES:
        assert command in out


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "--no-such-flag"],
        ["frobnicate"],
        ["check", "--tp"],
        ["show", "sample:no-such-machine"],
        ["show", "/no/such/file.json"],
    ],
)
def test_usage_errors_are_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("linkscope: error: ")
    assert "Traceback" not in err


def test_python_dash_m_entry_point() -> None:
    result = subprocess.run([sys.executable, "-m", "linkscope", "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("linkscope ")
