"""remember_last: the last answer, for the same objects and equal numbers and strings only."""

from __future__ import annotations

from linkscope.topo.common.memo import remember_last


def test_the_same_arguments_answer_from_memory_and_others_run_again() -> None:
    """A new object equal to the last is a new question (frozen snapshots are compared by identity, never field by
    field); a number or string equal to the last is the same one; only the last answer is kept."""
    calls: list[tuple[object, int]] = []

    @remember_last
    def count(items: list[int], scale: int, label: str = "") -> int:
        calls.append((items, scale))
        return sum(items) * scale

    first, twin = [1, 2], [1, 2]
    assert count(first, 10**6) == 3 * 10**6
    assert count(first, int("1000000")) == 3 * 10**6  # an equal, distinct int: remembered
    assert len(calls) == 1
    assert count(twin, 10**6) == 3 * 10**6  # an equal list, another object: run again
    assert count(twin, 2) == 6
    assert count(twin, 2, label="a") == 6
    assert count(twin, 2, label="a") == 6
    assert count(first, 10**6) == 3 * 10**6  # only the last answer is kept
    assert len(calls) == 5
