"""The output sanitiser and the bounded number parser every reader shares."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import linkscope.topo.common.text as text_module
from linkscope.topo.common.errors import InputError
from linkscope.topo.common.numbers import parse_float, parse_int
from linkscope.topo.common.text import printable, printable_block, strip_escapes

HOSTILE = [
    "\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x1b]52;c;ZWNobyBoaQ==\x07", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
    "\x9b2J", "\x9d0;title\x9c", "\x1bP+q\x1b\\", "\x07\x08\x7f", "\x1b(0", "\x1b",
]


@pytest.mark.parametrize("payload", HOSTILE)
def test_printable_leaves_no_control_byte(payload: str) -> None:
    shown = printable(f"dgx-{payload}-01")
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)
    assert shown.startswith("dgx-")


@given(st.text())
def test_printable_never_emits_controls(text: str) -> None:
    shown = printable(text)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)
    block = printable_block(text)
    assert not any((ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F for ch in block)


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_a_plain_ascii_block_is_told_as_the_pattern_tells_it(text: str) -> None:
    """ASCII text is passed whole only when the line-by-line pattern would change nothing in it."""
    assert printable_block(text) == text_module._shown_block(text)


@pytest.mark.parametrize("code", [*range(0x20), 0x7F])
def test_each_ascii_control_but_tab_and_newline_is_shown_in_a_block(code: int) -> None:
    text = f'{{"a": "x{chr(code)}y"}}'
    assert printable_block(text) == text_module._shown_block(text)
    assert (printable_block(text) == text) == (chr(code) in "\t\n")


def test_plain_text_is_unchanged_and_controls_are_visible() -> None:
    assert printable("GPU0 NV18 ünïcode") == "GPU0 NV18 ünïcode"
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"
    assert strip_escapes("\x1b[31mred\x1b[0m") == "red"


@pytest.mark.parametrize("word", ["²", "١٢", "1_000", "0x10", " 1", "", "1" * 19, "9" * 5000])
def test_integers_are_ascii_and_bounded(word: str) -> None:
    with pytest.raises(InputError):
        parse_int(word, "size")


def test_integer_ranges() -> None:
    assert parse_int("-3", "x") == -3
    assert parse_int("42", "x", minimum=0, maximum=42) == 42
    with pytest.raises(InputError, match="below the minimum 1"):
        parse_int("0", "x", minimum=1)
    with pytest.raises(InputError, match="above the maximum"):
        parse_int("43", "x", maximum=42)


@pytest.mark.parametrize("word", ["nan", "inf", "-Infinity", "1e400", "1e99999", "0x1p3", "١.٥", "1.2.3"])
def test_floats_are_finite_and_ascii(word: str) -> None:
    with pytest.raises(InputError):
        parse_float(word, "busbw")


def test_float_values() -> None:
    assert parse_float("2e-07", "error") == 2e-07
    assert parse_float(".5", "x") == 0.5
    assert parse_float("312.45", "x", minimum=0) == 312.45


def test_counted_nouns_agree_with_their_number() -> None:
    from linkscope.topo.common.units import counted

    assert (counted(1, "NIC"), counted(12, "NIC"), counted(0, "GPU pair")) == ("1 NIC", "12 NICs", "0 GPU pairs")
    assert counted(2, "NVLink") == "2 NVLinks" and counted(1, "NVLink") == "1 NVLink"


def test_share_never_rounds_something_to_nothing() -> None:
    from linkscope.topo.common.units import format_share

    assert [format_share(f) for f in (0.47, 0.004, 0.0, 1.0)] == ["47%", "0.4%", "0%", "100%"]


@pytest.mark.parametrize("text", ["1,,2", "1,", ",1", " , "])
def test_comma_lists_refuse_empty_items(text: str) -> None:
    from linkscope.topo.common.numbers import comma_items

    with pytest.raises(InputError):
        comma_items(text, "--x")
    assert comma_items(" 1, 5 ,25", "--x") == ("1", "5", "25")
