"""Every reader stays linear on long adversarial lines: each pattern of each format, repeated to
200 KB in one line, and a 1 MB line, read under a time bound (a quadratic pattern takes minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fuzz import Reader, assert_clean_outcome, command, readers, run_cli

LINE_CHARS = 200_000
BOUND_S = 3.0
"""Far above a linear read of 200 KB (well under 0.5 s here), far below a quadratic one."""

FRAGMENTS = (
    " ", "\t", "a", "0", "9,", "0-", "GPU0 ", "GPU0", "NV18", "NV", "SYS", "SYSSYS", "NIC0", "X\t", "N/A ",
    "[a@b", "b.", "a@", "(", ")", "[", "]", "# ", "#", "-g ", "--ngpus=", "1e", "1.5", "Device=0 ",
    "slots=", "mlx5_0: ", "r[1-2]", "2(x3),", "\x1b[", "\x1b]", "\"", "{", "[{", "0,n,0", ": ",
    "[1,0]<stdout>:", "[default0]:", "2025-01-01 00:00:00,000 - INFO - ", "> ", "```",
)
"""Pieces of the formats' own syntax: what makes a pattern backtrack is more of what it expects."""


def _inputs(folder: Path) -> list[tuple[Reader, Path]]:
    return [(reader, reader.fixtures[0]) for reader in readers(folder)]


def _with_line(fixture: Path, line: str, folder: Path) -> Path:
    lines = fixture.read_text().splitlines()
    middle = len(lines) // 2
    path = folder / f"long-{fixture.name}"
    path.write_text("\n".join([line, *lines[:middle], line, *lines[middle:], line]) + "\n")
    return path


@pytest.mark.parametrize("fragment", FRAGMENTS, ids=[repr(fragment) for fragment in FRAGMENTS])
def test_a_long_line_of_one_pattern(fragment: str, tmp_path: Path) -> None:
    line = fragment * (LINE_CHARS // len(fragment))
    for reader, fixture in _inputs(tmp_path):
        outcome = run_cli(command(reader, _with_line(fixture, line, tmp_path)), seconds=BOUND_S * 3)
        assert_clean_outcome(outcome, f"{reader.name} with {fragment!r}")
        assert outcome.seconds < BOUND_S, f"{reader.name}: {outcome.seconds:.2f} s for a {fragment!r} line"


def test_a_one_megabyte_line_of_everything(tmp_path: Path) -> None:
    line = "".join(FRAGMENTS) * (1_000_000 // len("".join(FRAGMENTS)))
    for reader, fixture in _inputs(tmp_path):
        outcome = run_cli(command(reader, _with_line(fixture, line, tmp_path)), seconds=BOUND_S * 5)
        assert_clean_outcome(outcome, reader.name)
        assert outcome.seconds < BOUND_S * 2, f"{reader.name}: {outcome.seconds:.2f} s for a 1 MB line"


def test_the_prompt_pattern_of_the_topology_reader_is_linear(tmp_path: Path) -> None:
    """The shell-prompt pattern took 6 s on this 100 KB line and minutes at 1 MB."""
    fixture = readers(tmp_path)[0].fixtures[0]
    outcome = run_cli(["show", str(_with_line(fixture, "[a@" + "b." * 500_000, tmp_path)), "--json"], seconds=20)
    assert_clean_outcome(outcome, "topo")
    assert outcome.seconds < BOUND_S
