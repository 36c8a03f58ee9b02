"""`@frozen` behaves as `@dataclass(frozen=True)` does: the same equality, hashing, text and immutability, and the
same dataclass for everything that reads one."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from linkscope.topo.common.frozen import frozen


def _point_class(make: Any) -> Any:
    @make
    class Point:
        """A record with a compared field, a defaulted tuple and a field left out of comparison and text."""

        x: int
        y: tuple[int, ...] = ()
        note: str = dataclasses.field(default="", compare=False, repr=False)

    return Point


def _twins() -> tuple[Any, Any]:
    return _point_class(frozen), _point_class(dataclasses.dataclass(frozen=True))


VALUES = [(1, (), ""), (1, (), "other note"), (1, (2, 3), ""), (2, (), ""), (-0, (), "")]


@pytest.mark.parametrize(("first", "second"), list(itertools.product(VALUES, repeat=2)))
def test_equal_hash_and_text_as_a_frozen_dataclass(first: tuple[Any, ...], second: tuple[Any, ...]) -> None:
    ours, theirs = _twins()
    a, b = ours(*first), ours(*second)
    a_twin, b_twin = theirs(*first), theirs(*second)
    assert (a == b, a != b) == (a_twin == b_twin, a_twin != b_twin)
    assert hash(a) == hash(a_twin) and repr(a) == repr(a_twin)
    if a == b:
        assert hash(a) == hash(b)
    assert a != a_twin and (a == a_twin) is False  # another class, as dataclasses have it
    assert a.__eq__(first) is NotImplemented and a != first


def test_immutable_and_a_dataclass_for_everything_that_reads_one() -> None:
    ours, theirs = _twins()
    point = ours(1, (2,), "n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y
    assert dataclasses.is_dataclass(ours(0)) and [f.name for f in dataclasses.fields(ours)] == ["x", "y", "note"]
    assert dataclasses.replace(point, x=5) == ours(5, (2,), "n")
    assert dataclasses.asdict(point) == dataclasses.asdict(theirs(1, (2,), "n"))
    assert ours.__match_args__ == theirs.__match_args__ == ("x", "y", "note")
    assert {point, ours(1, (2,), "other")} == {point}  # `note` is not compared, nor hashed


def test_subclass_compares_its_own_fields_and_never_equals_its_base() -> None:
    base, _ = _twins()

    @frozen
    class Labelled(base):  # type: ignore[misc, valid-type]
        label: str = "a"

    assert Labelled(1, (), "", "a") == Labelled(1, (), "", "a") != Labelled(1, (), "", "b")
    assert Labelled(1) != base(1) and base(1) != Labelled(1)
    assert repr(Labelled(1)) == "test_subclass_compares_its_own_fields_and_never_equals_its_base.<locals>." \
                                "Labelled(x=1, y=(), label='a')"


def test_methods_the_class_defines_are_kept_and_no_field_or_one_field_work() -> None:
    @frozen
    class Shown:
        value: int

        def __repr__(self) -> str:
            return f"<{self.value}>"

    @frozen
    class Empty:
        pass

    assert repr(Shown(3)) == "<3>" and Shown(3) == Shown(3) != Shown(4) and hash(Shown(3)) == hash((3,))
    assert Empty() == Empty() and hash(Empty()) == hash(()) and repr(Empty()).endswith("Empty()")
