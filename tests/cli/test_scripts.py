"""The command line as scripts use it: a closed pipe, mistyped commands, shared metavars, exit statuses in help."""

from __future__ import annotations

import subprocess
import sys

import pytest

from linkscope.cli import COMMAND_MODULES, main
from support.paths import REAL

NCCL_TESTS = REAL / "nccl_tests" / "2node-16gpu-all_reduce-op-all-max-min-tail.txt"
NCCL_LOG = REAL / "nccl_debug" / "8gpu-node-p2p-ipc-python-logging-prefix-split-lines-excerpt.txt"
TRACE = REAL / "traces" / "hta-1rank-nccl-2.17-collective-name.json.gz"

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
