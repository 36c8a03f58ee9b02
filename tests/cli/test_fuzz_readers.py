"""Property-based fuzzing of every reader and file format through the command line, in process.

Any input gives a result (exit 0 or 1) or one line on stderr and exit 2 — never a traceback — within
a time bound; whitespace-only variants of a real input give the identical `--json`. Text formats are
mutated as text (lines cut, repeated, spliced, numbers made huge or foreign); JSON formats are
mutated as JSON (any value replaced by one of another type, sign or size).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.commands import COMMANDS, argv_for, input_position
from support.fuzz import (
    SAMPLES,
    WEIRD_WORDS,
    Reader,
    assert_clean_outcome,
    command,
    mutated_json,
    readers,
    run_cli,
)

BOUND_S = 5.0
FUZZ = settings(max_examples=int(os.environ.get("LINKSCOPE_FUZZ_EXAMPLES", "60")), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_FOLDER = Path(tempfile.mkdtemp(prefix="linkscope-fuzz-"))
atexit.register(shutil.rmtree, _FOLDER, True)
READERS = readers(_FOLDER)
TEXT_READERS = [reader for reader in READERS if reader.name != "snapshot"]

def _write(text: str, name: str) -> Path:
    path = _FOLDER / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


@st.composite
def mutated_text(draw: st.DrawFn, original: str) -> str:
    """`original` with a few line-level and character-level mutations."""
    lines = original.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            lines = [""]
        where = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(("delete", "repeat", "splice", "word", "truncate", "swap", "blank")))
        if action == "delete":
            del lines[where : where + draw(st.integers(1, 5))]
        elif action == "repeat":
            lines[where:where] = [lines[where]] * draw(st.integers(1, 3))
        elif action == "splice":
            line = lines[where]
            cut = draw(st.integers(0, len(line)))
            lines[where] = line[:cut] + draw(st.text(max_size=20)) + line[cut:]
        elif action == "word":
            words = lines[where].split()
            if words:
                words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(WEIRD_WORDS))
                lines[where] = " ".join(words)
        elif action == "truncate":
            lines = lines[:where]
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[where], lines[other] = lines[other], lines[where]
        else:
            lines[where] = ""
    return "\n".join(lines) + draw(st.sampled_from(("\n", "", "\r\n")))


@pytest.mark.parametrize("reader", TEXT_READERS, ids=[reader.name for reader in TEXT_READERS])
@FUZZ
@given(data=st.data())
def test_any_mutation_of_a_text_input_is_a_result_or_one_line(reader: Reader, data: st.DataObject) -> None:
    fixture = data.draw(st.sampled_from(reader.fixtures))
    text = data.draw(mutated_text(fixture.read_text()))
    outcome = run_cli(command(reader, _write(text, f"fuzz-{reader.name}{fixture.suffix}")), seconds=BOUND_S * 2)
    assert_clean_outcome(outcome, f"{reader.name} on a mutation of {fixture.name}")
    assert outcome.seconds < BOUND_S


SNAPSHOT_COMMANDS = (("show", "{file}"), ("show", "{file}", "--json"), ("check", "{file}", "--tp", "4"),
                     ("plan", "{file}", "--gpus", "16"))


@FUZZ
@given(data=st.data())
def test_any_mutation_of_a_snapshot_is_a_result_or_one_line(data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(sorted(SAMPLES.glob("*.json"))))
    mutated = data.draw(mutated_json(json.loads(sample.read_text())))
    path = _write(json.dumps(mutated), "fuzz-snapshot.json")
    argv = data.draw(st.sampled_from(SNAPSHOT_COMMANDS))
    outcome = run_cli([part.format(file=path) for part in argv], seconds=BOUND_S * 2)
    assert_clean_outcome(outcome, f"{argv[0]} on a mutation of {sample.name}")
    assert outcome.seconds < BOUND_S


def _measurements_file() -> dict[str, Any]:
    outcome = run_cli(["import", str(READERS[2].fixtures[0]), "--json"])
    assert outcome.status == 0, outcome.err
    data: dict[str, Any] = json.loads(outcome.out)
    return data


MEASUREMENTS = _measurements_file()


@FUZZ
@given(data=st.data())
def test_any_mutation_of_measurements_is_a_result_or_one_line(data: st.DataObject) -> None:
    mutated = data.draw(mutated_json(MEASUREMENTS))
    path = _write(json.dumps(mutated), "fuzz-measurements.json")
    argv = data.draw(st.sampled_from((["import", str(path)],
                                      ["check", "sample:dgx-h100", "--tp", "8", "--measurements", str(path)])))
    outcome = run_cli(argv, seconds=BOUND_S * 2)
    assert_clean_outcome(outcome, f"{argv[0]} on mutated measurements")
    assert outcome.seconds < BOUND_S


def _whitespace_variants(text: str) -> dict[str, str]:
    lines = text.splitlines()
    return {
        "trailing spaces": "\n".join(line + "  " for line in lines) + "\n",
        "trailing tabs": "\n".join(line + "\t" for line in lines) + "\n",
        "blank lines after": "\n".join(lines) + "\n\n\n",
        "no final newline": "\n".join(lines),
        "CRLF": "\r\n".join(lines) + "\r\n",
    }


@pytest.mark.parametrize("reader", READERS, ids=[reader.name for reader in READERS])
def test_whitespace_only_variants_give_identical_json(reader: Reader) -> None:
    for fixture in reader.fixtures:
        text = fixture.read_text()
        path = _write(text, f"ws-{fixture.name}")
        expected = run_cli(command(reader, path))
        for variant, changed in _whitespace_variants(text).items():
            path.write_text(changed)
            outcome = run_cli(command(reader, path))
            assert (outcome.status, outcome.out, outcome.err) == (expected.status, expected.out, expected.err), \
                f"{fixture.name} with {variant}: {outcome.err}"
        # blank lines before the text shift every line number a note names, and nothing else
        path.write_text("\n\n" + text)
        outcome = run_cli(command(reader, path))
        assert (outcome.status, _line_numbers_masked(outcome.out), _line_numbers_masked(outcome.err)) == \
            (expected.status, _line_numbers_masked(expected.out), _line_numbers_masked(expected.err))


def _line_numbers_masked(out: str) -> str:
    out = re.sub(r'"table_line": \d+', '"table_line": N', out)  # the line a row's table starts at, in JSON
    return re.sub(r"\b(line|lines) \d+(?:, \d+)*|(?<=\.txt):\d+", lambda match: "line N" if match.group(1) else "N", out)


FLAG_VALUES = st.one_of(st.sampled_from(WEIRD_WORDS), st.text(max_size=12), st.integers(-(10**30), 10**30).map(str),
                        st.floats().map(str))
FLAG_COMMANDS = (
    ("estimate", "all_reduce", "--bytes", "{v}", "--ranks", "8"),
    ("estimate", "all_reduce", "--bytes", "1M", "--ranks", "{v}", "--nodes", "2"),
    ("estimate", "all_reduce", "--bytes", "1M", "--ranks", "8", "--nodes", "{v}"),
    ("estimate", "all_reduce", "--bytes", "1M", "--ranks", "8", "--intra", "{v}"),
    ("check", "sample:dgx-h100", "--tp", "8", "--visible-devices", "{v}"),
    ("check", "sample:dgx-h100", "--tp", "8", "--params", "{v}"),
    ("check", "sample:dgx-h100", "--tp", "{v}"),
    ("plan", "sample:dgx-h100", "--gpus", "{v}"),
    ("bench", "p2p", "--bytes", "{v}"),
    ("bench", "collectives", "--timeout", "{v}", "--nproc", "0"),
)
"""Numeric flags; the bench ones fail before any worker starts (no CUDA GPU, or --nproc 0)."""


@FUZZ
@given(argv=st.sampled_from(FLAG_COMMANDS), value=FLAG_VALUES)
def test_any_value_of_a_numeric_flag_is_a_result_or_one_line(argv: tuple[str, ...], value: str) -> None:
    outcome = run_cli([part.format(v=value) for part in argv], seconds=BOUND_S * 2)
    assert_clean_outcome(outcome, f"{' '.join(argv)} with {value!r}")
    assert outcome.seconds < BOUND_S


COMMAND_FUZZ = settings(max_examples=int(os.environ.get("LINKSCOPE_FUZZ_EXAMPLES", "4")), deadline=None,
                        derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
COVERED_COMMANDS = tuple(sorted(COMMANDS))
"""The commands this suite fuzzes (tests/cli/test_suite_coverage.py holds it to `linkscope help`)."""


@pytest.mark.parametrize("name", COVERED_COMMANDS)
@COMMAND_FUZZ
@given(data=st.data())
def test_every_command_survives_mutated_input_and_arguments(name: str, data: st.DataObject, tmp_path_factory: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command with its input file mutated as text (when it reads one) or one argument swapped for a word
    that has broken parsers: a result or one line, within the bound."""
    case = COMMANDS[name]
    folder = tmp_path_factory.mktemp(f"fuzz-{name}")
    monkeypatch.chdir(folder)  # an argument fuzzed into a relative -o writes here, not into the repository
    if case.prepare is not None:
        case.prepare(monkeypatch, "")
    argv = argv_for(case, folder, output=folder / "out.json" if case.writes else None)
    position = input_position(argv)
    if position is not None and data.draw(st.booleans()):
        path = Path(argv[position])
        path.write_text(data.draw(mutated_text(path.read_text(encoding="utf-8"))), encoding="utf-8", errors="surrogatepass")
    else:
        where = data.draw(st.integers(1, len(argv) - 1)) if len(argv) > 1 else 1
        argv[where:where + 1] = [data.draw(st.sampled_from(WEIRD_WORDS))]
    outcome = run_cli(argv, seconds=BOUND_S * 3)
    assert_clean_outcome(outcome, f"{name} {argv!r}")
