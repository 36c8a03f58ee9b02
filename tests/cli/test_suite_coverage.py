"""Every command of `linkscope help` is under every robustness suite: fuzz, hostile strings, special files,
output files and signals. A new command that is not added to `support.commands.COMMANDS` fails here."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from linkscope.cli import COMMAND_MODULES
from support.commands import COMMANDS
from support.fuzz import run_cli

SUITES = {
    "fuzz": "test_fuzz_readers",
    "hostile strings": "test_hostile_strings",
    "special files and output files": "test_output_files",
    "signals": "test_signals",
}
"""Suite -> the module whose COVERED_COMMANDS lists the commands it runs."""


def _help_commands() -> set[str]:
    outcome = run_cli(["help"])
    listing = outcome.out.split("positional arguments:", 1)[1].split("options:", 1)[0]
    return set(re.findall(r"^    (\S+)", listing, re.MULTILINE))


def test_the_command_table_is_every_command_of_linkscope_help() -> None:
    assert _help_commands() == set(COMMAND_MODULES), "linkscope help and COMMAND_MODULES disagree"
    assert set(COMMANDS) == set(COMMAND_MODULES), f"add {sorted(set(COMMAND_MODULES) - set(COMMANDS))} to support.commands"


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_command_is_under_every_suite(suite: str) -> None:
    name = SUITES[suite]
    module = sys.modules.get(name)
    if module is None:  # not collected in this run: load it from its file
        spec = importlib.util.spec_from_file_location(f"coverage_of_{name}", Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    missing = sorted(set(COMMAND_MODULES) - set(module.COVERED_COMMANDS))
    assert not missing, f"the {suite} suite does not run {missing}"
