"""`@frozen`: the project's immutable records, a frozen dataclass made with half of the generated code.

`dataclasses.dataclass(frozen=True)` writes six methods as Python source and compiles each (`__init__`,
`__setattr__`, `__delattr__`, `__eq__`, `__hash__`, `__repr__`): on Python 3.11 about 1.5 ms per class, and
`linkscope doctor` creates 35 classes before it reads a byte (nearly a fifth of its instructions went to
compiling that source). :func:`frozen` lets dataclasses write the first three and gives the class the other three
from closures over its fields, which cost nothing to make and behave as the generated ones do: equal only to an
instance of the same class with equal compared fields, hashed over the same fields, shown as
`Name(field=value, ...)`. Everything else is a plain frozen dataclass (`dataclasses.fields`, `replace`, `asdict`,
`FrozenInstanceError`, msgspec).
Python 3.13 compiles a dataclass's methods in one go, which makes the difference smaller there.

Records that keep many instances use `@dataclass(frozen=True, slots=True)` instead (slots save memory per
instance; the class is built twice).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # typing has it from Python 3.11; at run time it only marks the function
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda function: function

_Record = TypeVar("_Record")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[_Record]) -> type[_Record]:
    """`cls` as `@dataclass(frozen=True)` makes it, with `__eq__`, `__hash__` and `__repr__` that are not compiled
    from source (a method the class body defines itself is kept, as dataclasses keep it)."""
    made = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]  # (a dataclass by now)
    compared = _values_of(tuple(field.name for field in fields if field.compare))
    hashed = _values_of(tuple(field.name for field in fields
                              if (field.compare if field.hash is None else field.hash)))
    shown = tuple(field.name for field in fields if field.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(compared(self) == compared(other))
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __repr__(self: Any) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({values})"

    for name, method in (("__eq__", __eq__), ("__hash__", __hash__), ("__repr__", __repr__)):
        if name not in cls.__dict__:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(made, name, method)
    return made


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of `names`' values of an instance, in C where there are two or more."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        only = names[0]
        return lambda instance: (getattr(instance, only),)
    return lambda instance: ()
