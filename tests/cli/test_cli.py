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


@pytest.mark.parametrize(("argv", "reason"), [
    (["estimate", "all_reduce", "--ranks", "8", "--bytes", "-1G"], "--bytes: '-1G' is not a size"),
    (["estimate", "all_reduce", "--ranks", "8", "--bytes", "1G", "--intra", "-1:300"], "--intra: '-1:300' is not"),
    (["estimate", "all_reduce", "--ranks", "-8", "--bytes", "1G"], "--ranks: value '-8' is below the minimum 2"),
    (["bench", "p2p", "--bytes", "-1G"], "--bytes: '-1G' is not a size"),
])
def test_a_negative_value_is_refused_for_what_it_is(argv: list[str], reason: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert reason in err and "expected one argument" not in err


def test_an_unknown_flag_names_its_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--frobnicate"]) == 2
    assert capsys.readouterr().err == "linkscope: error: show: unrecognized arguments: --frobnicate\n"
    assert main(["bench", "p2p", "--copies", "x"]) == 2
    assert capsys.readouterr().err.startswith("linkscope: error: bench p2p: argument --copies")


def test_help_command_prints_the_help_of_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["help"]) == 0
    assert "COMMAND" in capsys.readouterr().out
    assert main(["help", "bench", "p2p"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: linkscope bench p2p") and "75%" in out and "%%" not in out
    assert main(["help", "no-such-command"]) == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err


def test_help_wraps_and_keeps_example_commands_whole(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["bench", "collectives", "--help"])
    lines = capsys.readouterr().out.splitlines()
    commands = [line for line in lines if line.lstrip().startswith(("torchrun", "linkscope bench"))]
    assert commands and all("--rdzv-endpoint HOST0:29500" in line for line in commands if "torchrun" in line)
    prose = [line for line in lines if line and not line.startswith(" ") and line not in commands]
    assert all(len(line) <= 80 for line in prose)
    assert not any(line.endswith("nccl-") for line in lines)  # not broken at a hyphen


def test_timeout_zero_and_bad_bench_flags_are_refused_before_torch_is_imported() -> None:
    code = ("import sys\nfrom linkscope.cli import main\n"
            "for argv in (['bench','collectives','--timeout','0'], ['bench','p2p','--bytes','1X'],"
            " ['bench','collectives','--ops','nope'], ['bench','step','--timeout','-1'],"
            " ['bench','step','--layers','0']):\n"
            "    assert main(argv) == 2, argv\n"
            "assert 'torch' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("\n") == 5 and "--timeout: value '0' must be more than 0" in result.stderr


def test_a_closed_pipe_is_not_an_error() -> None:
    process = subprocess.Popen([sys.executable, "-m", "linkscope", "show", "sample:dgx-h100", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader (`| head`) has gone before linkscope writes
    assert process.wait(timeout=60) == 0
    assert process.stderr.read() == b""


def test_the_app_without_a_terminal_says_so_in_one_line() -> None:
    result = subprocess.run([sys.executable, "-m", "linkscope", "sample:dgx-h100"], capture_output=True, text=True,
                            check=False, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "needs a terminal" in result.stderr and "linkscope show sample:dgx-h100" in result.stderr


ARABIC_INDIC_EIGHT = "\u0668"
"""`٨`: `int()` reads it as 8, `str.isdigit()` says it is a digit; linkscope reads ASCII digits only."""


@pytest.mark.parametrize("argv", [
    ["check", "sample:dgx-h100", "--tp", ARABIC_INDIC_EIGHT],
    ["estimate", "all_reduce", "--bytes", "1G", "--ranks", ARABIC_INDIC_EIGHT],
    ["plan", "sample:dgx-h100", "--gpus", ARABIC_INDIC_EIGHT],
    ["check", "sample:dgx-h100", "--mesh", f"tp={ARABIC_INDIC_EIGHT}"],
    ["bench", "collectives", "--iters", ARABIC_INDIC_EIGHT],
    ["trace", "x.json", "--nodes", "1_000"],
    ["record", "-o", "x.json", "--seconds", "nan"],
])
def test_every_numeric_flag_reads_numbers_the_one_way(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """One parser for every integer (and every decimal): a digit of another script, `1_000` or `nan` is refused the
    same way by every command, in one line naming the flag, never read as a number by one and refused by another."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a" in err and ("is not an integer" in err or "is not a number" in err), err


def test_no_flag_parses_numbers_with_int_or_float() -> None:
    """`type=int` and `type=float` accept what the one parser refuses (`٨`, `1_000`, `nan`): no flag uses them."""
    import re

    from support.paths import ROOT

    offenders = [f"{path.relative_to(ROOT)}:{number}" for folder in ("linkscope", "topo", "probes", "tui")
                 for path in sorted((ROOT / folder).rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\btype=(int|float)\b", line)]
    assert not offenders, offenders


def test_commands_share_helpers_through_modules_made_for_sharing() -> None:
    """No command module (`*_cmd.py`) imports another command module or a private name of any module of the command
    line: what two commands share lives in options, job_options, files, source or a bench_* helper module."""
    import ast

    from support.paths import ROOT

    offenders = []
    for path in sorted((ROOT / "linkscope").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("linkscope."):
                continue
            module = node.module or ""
            if module.endswith("_cmd") and path.name.endswith("_cmd.py"):
                offenders.append(f"{path.name} imports {module}")
            if not module.startswith(("linkscope.topo", "linkscope.probes", "linkscope.tui")):
                offenders += [f"{path.name} imports {module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
    assert not offenders, offenders


def test_shared_flags_and_exit_statuses_are_defined_once() -> None:
    """--json, -o, --force and --fail-on come from linkscope.options (one spelling, one meaning), and every exit
    status is an ExitStatus: no command declares its own."""
    import re

    from support.paths import ROOT

    shared = re.compile(r"""add_argument\(\s*["'](--json|--force|--fail-on|-o)["']""")
    offenders = []
    for path in sorted((ROOT / "linkscope").rglob("*.py")):
        text = path.read_text()
        if path.name != "options.py" and shared.search(text):
            offenders.append(f"{path.relative_to(ROOT)} defines a shared flag")
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in re.findall(r"^(EXIT_\w+)\s*=", text, flags=re.M)]
    assert not offenders, offenders
