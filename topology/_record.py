"""``record``: the model's frozen, slotted, keyword-only dataclasses, made cheaper to create at import.

A dataclass is created by compiling the source of its generated methods, one ``exec`` each: ``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, and for a frozen one ``__setattr__`` and ``__delattr__``. Those
compilations are most of what importing the model costs. Here ``__repr__``, ``__eq__`` and ``__hash__``
are not generated per class but shared (:class:`Record`), reading the fields through one
``operator.attrgetter`` per class; they behave as the generated ones do (same text, equal only to the
same class, the hash of the field values). A record is still a dataclass: ``dataclasses.replace``,
``fields`` and ``asdict`` work on it unchanged. ``msgspec.Struct`` was measured too
(``benchmarks/codec.py``): its classes are created in microseconds, but importing msgspec costs as much as
these records (it loads ``typing``, ``inspect``, ``pathlib``), and it is third-party code (house rule 2).
"""

from __future__ import annotations

import dataclasses
import reprlib
from operator import attrgetter

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:
    def dataclass_transform(**_: object) -> object:  # what mypy reads only: at run time, nothing
        return lambda f: f


class Record:
    """The shared methods of every record; ``_values`` (set per class) gives its field values as a tuple."""

    __slots__ = ()
    if TYPE_CHECKING:  # set per class by ``record``; not annotations at run time (type hints stay the fields')
        _values: Callable[[Any], tuple[Any, ...]]
        _names: tuple[str, ...]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values(self) == self._values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values(self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        body = ", ".join(f"{n}={v!r}" for n, v in zip(self._names, self._values(self), strict=True))
        return f"{self.__class__.__qualname__}({body})"


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, slots=True, kw_only=True)``, with the shared methods of :class:`Record`,
    which the class is made to derive from."""
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    based = type(cls.__name__, (Record,), body)
    based.__qualname__ = cls.__qualname__
    made: Any = dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False, eq=False)(based)
    names = tuple(f.name for f in dataclasses.fields(made))
    get = attrgetter(*names)
    made._names = names
    made._values = staticmethod(get if len(names) > 1 else lambda o: (get(o),))
    return made  # type: ignore[no-any-return]
