"""The command line as scripts use it: a closed pipe, mistyped commands, shared metavars, exit statuses in help."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from linkscope.cli import COMMAND_MODULES, build_parser, main
from support.paths import REAL

NCCL_TESTS = REAL / "nccl_tests" / "2node-16gpu-all_reduce-op-all-max-min-tail.txt"
NCCL_LOG = REAL / "nccl_debug" / "8gpu-node-p2p-ipc-python-logging-prefix-split-lines-excerpt.txt"
TRACE = REAL / "traces" / "hta-1rank-nccl-2.17-collective-name.json.gz"
NCCL_GRAPH = REAL / "nccl_graph_xml" / "rtx3090-2node-graph-dump-net-dev-0-ring-tree-8gpu-sys.xml"

PIPED_RUNS: dict[str, list[str]] = {
    "open": ["open", "--help"],
    "show": ["show", "sample:dgx-h100"],
    "samples": ["samples"],
    "probe": ["probe"],
    "check": ["check", "--tp", "8", "--dp", "2", "sample:h100-cluster-mixed"],
    "estimate": ["estimate", "all_reduce", "--bytes", "1G", "--ranks", "8", "--intra", "1:300", "--algo", "ring"],
    "explain": ["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "150ms", "sample:dgx-h100"],
    "plan": ["plan", "sample:dgx-h100", "--gpus", "8"],
    "bench": ["bench", "--help"],
    "import": ["import", str(NCCL_TESTS)],
    "trace": ["trace", str(TRACE)],
    "doctor": ["doctor", "sample:dgx-h100-degraded"],
    "diff": ["diff", "sample:dgx-h100", "sample:dgx-h100-degraded"],
    "record": ["record", "--help"],
    "nccl-log": ["nccl-log", str(NCCL_LOG)],
    "collect": ["collect", "--help"],
    "merge": ["merge", "--help"],
    "nccl-graph": ["nccl-graph", str(NCCL_GRAPH)],
    "export": ["export", "nccl-topo", "sample:dgx-h100", "-o", "-"],
    "help": ["help", "check"],
}
"""For every command, a run that prints to stdout on a machine without a GPU (its --help where a run needs one)."""


def test_every_command_has_a_piped_run() -> None:
    assert set(PIPED_RUNS) == set(COMMAND_MODULES)


@pytest.mark.parametrize("command", COMMAND_MODULES)
def test_a_closed_pipe_ends_every_command_quietly_with_status_0(command: str) -> None:
    """`linkscope ... | head -1` where head has gone before linkscope writes: exit 0, nothing on stderr, for every
    command alike (findings or not: the reader chose to stop reading)."""
    process = subprocess.Popen([sys.executable, "-m", "linkscope", *PIPED_RUNS[command]],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    assert process.wait(timeout=120) == 0
    assert process.stderr.read() == b""


@pytest.mark.parametrize(("argv", "said"), [
    (["chek", "sample:dgx-h100"], "unknown command 'chek' (did you mean check?)"),
    (["shwo"], "unknown command 'shwo' (did you mean show?)"),
    (["frobnicate"], "unknown command 'frobnicate' (`linkscope --help` lists the commands)"),
    (["show", "sample:dgx-h10"], "unknown sample 'dgx-h10': did you mean dgx-h100?"),
    (["sample:dgx-a10"], "did you mean dgx-a100?"),
    (["no-such-dir/box.json"], "no such file"),
])
def test_a_mistyped_command_or_sample_says_what_was_meant(argv: list[str], said: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_a_file_named_like_a_command_word_still_opens_as_a_source(tmp_path: pytest.TempPathFactory,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    with open("chek", "w") as file:
        file.write("not a topology\n")
    assert main(["chek"]) == 2
    assert "unknown command" not in capsys.readouterr().err


def test_a_command_imports_only_its_own_module() -> None:
    code = ("import sys; from linkscope.cli import main; main(['samples'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('linkscope.commands.')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "['linkscope.commands.samples_cmd']"


def _commands(parser: argparse.ArgumentParser, name: str = "linkscope") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and bench subcommand with its parser."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += [(f"{name} {sub_name}".removeprefix("linkscope "), sub), *_commands(sub, f"{name} {sub_name}")]
    return found


COMMANDS = _commands(build_parser())

SHARED_METAVARS = {
    "--bytes": "SIZE", "--min-bytes": "SIZE", "--max-bytes": "SIZE",
    "--nodes": "N", "--ranks": "N", "--nproc": "N", "--iters": "N", "--warmup": "N", "--samples": "N", "--copies": "N",
    "--steps": "N", "--layers": "N", "--jobs": "N", "--top-k": "N", "--gpus": "N", "--tp": "N", "--dp": "N",
    "--timeout": "SECONDS", "--seconds": "SECONDS", "--interval": "SECONDS", "--budget": "SECONDS",
    "--probe-timeout": "SECONDS", "--rendezvous-timeout": "SECONDS",
    "--output": "FILE", "--measurements": "FILE", "--rank-map": "FILE", "--cost-params": "FILE", "--env-file": "FILE",
    "--nccl-log": "FILE",
    "--source": "SOURCE", "--snapshot": "SOURCE", "--baseline": "SOURCE", "--expect": "SOURCE", "--attach": "SOURCE",
    "--fail-on": "SEVERITY",
}
"""Sizes are SIZE, counts N, durations in seconds SECONDS, files FILE, machines SOURCE, in every command."""


def test_the_same_things_have_the_same_metavar_in_every_command() -> None:
    seen: dict[str, set[str]] = {}
    unnamed = []
    for name, parser in COMMANDS:
        for action in parser._actions:
            takes_value = action.nargs != 0 and action.option_strings and not action.choices
            if not takes_value or "--help" in action.option_strings:
                continue
            flag = action.option_strings[-1]
            if action.metavar is None:
                unnamed.append(f"{name} {flag}")
            seen.setdefault(flag, set()).add(str(action.metavar))
    assert not unnamed, f"value flags without a metavar: {unnamed}"
    for flag, metavars in seen.items():
        assert len(metavars) == 1, f"{flag} is spelled {sorted(metavars)} in different commands"
        if flag in SHARED_METAVARS:
            assert metavars == {SHARED_METAVARS[flag]}, (flag, metavars)


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_states_its_exit_status_in_its_help(name: str, parser: argparse.ArgumentParser) -> None:
    text = " ".join(parser.format_help().split())
    assert "exit status: 0" in text and "2 bad input" in text, name
    if any("--fail-on" in action.option_strings for action in parser._actions):
        assert "--fail-on" in text.split("exit status:")[1], name


def test_explain_usage_reads_op_then_an_optional_source() -> None:
    usage = dict(COMMANDS)["explain"].format_usage()
    assert usage.rstrip().endswith("OP [SOURCE]") and "..." not in usage


@pytest.mark.parametrize(("argv", "status"), [
    (["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "6ms", "sample:dgx-h100"], 1),
    (["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "6ms", "sample:dgx-h100",
      "--fail-on", "error"], 0),
    (["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "5ms", "sample:dgx-h100",
      "--fail-on", "info"], 0),
    (["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "1500ms", "sample:dgx-h100",
      "--fail-on", "error"], 1),
    (["explain", "all_reduce", "--bytes", "1G", "--ranks", "8", "--time", "1500ms"], 0),
    (["diff", "sample:dgx-h100", "sample:dgx-h100-degraded"], 1),
    (["diff", "sample:dgx-h100", "sample:dgx-h100-degraded", "--fail-on", "error"], 0),
    (["diff", "sample:dgx-h100", "sample:dgx-h100"], 0),
    (["diff", "sample:dgx-h100", "sample:dgx-a100", "--fail-on", "info"], 1),
])
def test_fail_on_means_on_explain_and_diff_what_it_means_everywhere(argv: list[str], status: int,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """0 when nothing reaches --fail-on (default warning), 1 when something does: explain's `slow` is a warning and
    `far below` an error; diff's difference for the worse a warning, any other an info."""
    assert main(argv) == status
    capsys.readouterr()


def _piped(argv: list[str], columns: str | None) -> str:
    import os

    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    result = subprocess.run([sys.executable, "-m", "linkscope", *argv], capture_output=True, text=True, env=env,
                            check=False, timeout=120)
    return result.stdout


def test_piped_tables_honour_columns() -> None:
    """`import` piped with COLUMNS=160 shows every column; with COLUMNS=80 it says which it left out."""
    wide = _piped(["import", str(NCCL_TESTS)], "160")
    assert "too narrow" not in wide and "op from" in wide and "ranks from" in wide
    narrow = _piped(["import", str(NCCL_TESTS)], "80")
    assert "too narrow for every column" in narrow


@pytest.mark.parametrize("columns", [None, "80", "60"])
def test_piped_check_output_is_wrapped_never_cut(columns: str | None) -> None:
    text = _piped(["check", "--tp", "8", "--dp", "16", "--nodes", "16", "sample:dgx-h100"], columns)
    assert "Process groups" in text and "…" not in text


@pytest.mark.parametrize("argv", [["check", "--tp", "8"], ["plan", "--gpus", "8"]])
def test_ranks_on_a_machine_without_gpu_ask_for_a_source(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    import linkscope.probes.host
    from linkscope.topo.samples import load_sample

    sample = load_sample("dgx-h100")
    no_gpu = dataclasses.replace(sample, hosts=(dataclasses.replace(sample.host, gpus=()),))
    monkeypatch.setattr(linkscope.probes.host, "probe_host", lambda *args, **kwargs: no_gpu)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give a SOURCE (sample:NAME, a saved topology" in err, err


def test_suggest_under_cyclic_placement_offers_the_one_flag_fix_first(capsys: pytest.CaptureFixture[str]) -> None:
    """The finding says "use block placement"; the suggestion leads with that one flag and its speedup, and the
    order only megatron-core can start comes after it."""
    argv = ["check", "--tp", "2", "--pp", "2", "--dp", "4", "--nodes", "2", "--distribution", "cyclic",
            "sample:dgx-h100", "--suggest"]
    main(argv)
    text = capsys.readouterr().out
    first = text.index("Suggestion, one flag:")
    assert text.index("--distribution block", first) < text.index("Or, changing more:") < text.index("--order")
    main([*argv, "--json"])
    suggestion = json.loads(capsys.readouterr().out)["suggestion"]
    assert suggestion["one_flag"]["flags"] == ["--distribution block"]
    assert 1 < suggestion["one_flag"]["speedup"] <= suggestion["speedup"]


def test_suggest_that_is_block_placement_alone_is_not_offered_twice(capsys: pytest.CaptureFixture[str]) -> None:
    main(["check", "--tp", "8", "--dp", "2", "--nodes", "2", "--distribution", "cyclic", "sample:dgx-h100", "--suggest"])
    text = capsys.readouterr().out
    assert "one flag" not in text and text.count("--distribution block") == 2  # the finding's fix and the suggestion
