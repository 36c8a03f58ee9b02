"""What every command shares, defined once: the exit statuses and the flags of more than one command.

`--json`, `-o`, `--force`, `--fail-on` and SOURCE mean the same thing wherever they appear; a command
adds them here (with its own help text where the words differ) and maps findings to an exit status
with :func:`findings_status`.
"""

from __future__ import annotations

import argparse
import enum
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from linkscope.topo.model.findings import SEVERITIES, Severity, reaches

if TYPE_CHECKING:
    from linkscope.topo.cost.expect import Expected, RowExpectations


class ExitStatus(enum.IntEnum):
    """The exit status of every command."""

    OK = 0
    """Done, and nothing at or above `--fail-on` found."""
    FINDINGS = 1
    """A finding at or above `--fail-on`, a difference (`diff`), a wrong result or a missing node."""
    BAD_INPUT = 2
    """Bad input or usage, one line on stderr naming the file, line or flag."""
    FAILED = 2
    """A run that could not complete (a benchmark worker failed): the same status as bad input."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM; what was finished is still shown and written."""


def findings_status(severities: Iterable[Severity], fail_on: Severity) -> ExitStatus:
    """FINDINGS when one of `severities` is at or above `fail_on`, else OK: the rule every command with findings shares."""
    return ExitStatus.FINDINGS if reaches(severities, fail_on) else ExitStatus.OK


def verdicts_status(verdicts: Iterable[str | None], fail_on: Severity) -> ExitStatus:
    """:func:`findings_status` over verdicts (explain): FINDINGS when one reaches `fail_on`. The severity of each
    verdict is topo.cost.expect's (the one `import --fail-on` uses): `slow` and `faster than model` warnings,
    `far below` an error; ok and not judged none."""
    from linkscope.topo.cost.expect import VERDICT_SEVERITY

    return findings_status((VERDICT_SEVERITY[each] for each in verdicts if each in VERDICT_SEVERITY), fail_on)


def asked_rows(expected: RowExpectations) -> list[Expected | None]:
    """Every row the model was asked about, in order (collectives, peer copies, host copies), None where it could
    not price one: what `judged` counts and `--fail-on` weighs."""
    return [*expected.collectives, *expected.peer_copies, *expected.host_copies]


def difference_severity(worse: bool | None) -> Severity:
    """The severity of one difference between snapshots (`diff`): a warning when it is for the worse, else info."""
    return "warning" if worse else "info"


SOURCE_HELP = ("snapshot JSON, `nvidia-smi topo -m` text, NCCL topology XML, `-` for stdin, or sample:NAME; "
               "default: this machine")


def add_source_argument(parser: argparse.ArgumentParser, help_text: str = SOURCE_HELP) -> None:
    """The optional positional SOURCE every machine-reading command takes (opened by :func:`linkscope.source.open_source`)."""
    parser.add_argument("source", nargs="?", metavar="SOURCE", help=help_text)


def add_json_flag(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
                  help_text: str = "print one JSON object") -> None:
    """`--json`: print one JSON object (standard JSON: no NaN or Infinity) instead of tables."""
    parser.add_argument("--json", action="store_true", help=help_text)


def add_output_flag(parser: argparse.ArgumentParser, help_text: str, required: bool = False) -> None:
    """`-o FILE`: write a file whole or not at all (:func:`topo.common.files.write_text_file`)."""
    parser.add_argument("-o", "--output", default=None, required=required, metavar="FILE", help=help_text)


def add_force_flag(parser: argparse.ArgumentParser,
                   help_text: str = "use --measurements from a different kind of machine anyway") -> None:
    """`--force`: go on where linkscope would refuse (measurements of another machine, busy GPUs)."""
    parser.add_argument("--force", action="store_true", help=help_text)


FAIL_ON_HELP = "exit 1 when a finding is at or above this severity (default warning)"


def add_fail_on_flag(parser: argparse.ArgumentParser, help_text: str = FAIL_ON_HELP) -> None:
    """`--fail-on SEVERITY`: the lowest severity that makes the exit status 1 (default warning)."""
    parser.add_argument("--fail-on", choices=SEVERITIES, default="warning", metavar="SEVERITY",
                        help=f"{help_text}; SEVERITY is one of {', '.join(SEVERITIES)}")


FINDINGS_EXIT_HELP = "exit status: 0 nothing at or above --fail-on, 1 something is, 2 bad input or usage, 130 interrupted"
"""The exit-status line of every command with `--fail-on`."""
PLAIN_EXIT_HELP = "exit status: 0 done, 2 bad input or usage, 130 interrupted"
"""The exit-status line of a command that judges nothing."""


def piped_columns() -> int | None:
    """The width `COLUMNS` asks for, or None where it is unset or not a positive number."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None
