"""What every record of the model is: frozen, slotted, built by keyword, equal and hashed by its fields.

A record class names its fields once in ``__match_args__`` (the order they are written, compared and shown in),
slots them, annotates them, and takes them by keyword in its ``__init__``, which ends with
``self._fill(locals())``: so ``mypy --strict`` checks every construction, and a record costs what a plain class
costs to define (a frozen, slotted, keyword-only dataclass takes about 1 ms each at import, and the
``dataclasses`` module brings ``inspect`` with it: a third of the start-up budget, benchmarks/startup.py).

:func:`replace` builds a changed copy, as ``dataclasses.replace`` does for dataclasses.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it

if TYPE_CHECKING:
    from typing import Any, Self, TypeVar

    R = TypeVar("R", bound="Record")


class FrozenRecordError(AttributeError):
    """A field of a record was assigned or deleted: records never change (build another with :func:`replace`)."""


class Record:
    """The base of the model's records (see the module's docstring)."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    if TYPE_CHECKING:  # each record's own __init__ takes its fields by keyword
        _getter: Any  # its fields' values, a tuple in __match_args__'s order (set for each record class)

        def __init__(self, **fields: Any) -> None: ...

    def _fill(self, values: dict[str, Any]) -> None:
        """Set every field from ``values`` (the ``__init__``'s ``locals()``)."""
        for name in self.__match_args__:
            object.__setattr__(self, name, values[name])

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__match_args__  # its fields read in one C call: equality and hashing run thousands of times
        cls._getter = attrgetter(*names) if len(names) > 1 else staticmethod(
            lambda record: tuple(getattr(record, name) for name in names))  # attrgetter of one name gives no tuple

    def _values(self) -> tuple[Any, ...]:
        values: tuple[Any, ...] = self._getter(self)
        return values

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenRecordError(f"cannot assign to field {name!r} of a {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise FrozenRecordError(f"cannot delete field {name!r} of a {type(self).__name__}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return bool(self._getter(self) == other._getter(other))

    def __hash__(self) -> int:
        return hash(self._getter(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle: built again through __init__
        return _rebuilt, (type(self), dict(zip(self.__match_args__, self._values(), strict=True)))

    def __replace__(self, **changes: Any) -> Self:  # copy.replace's protocol (Python 3.13)
        return type(self)(**{**dict(zip(self.__match_args__, self._values(), strict=True)), **changes})


def _rebuilt(cls: type[R], fields: dict[str, Any]) -> R:
    return cls(**fields)


def replace(record: R, /, **changes: Any) -> R:
    """A copy of ``record`` with ``changes`` (field name: value), checked as a new record is: an unknown field
    raises TypeError, as ``dataclasses.replace`` does."""
    return record.__replace__(**changes)


def fields(cls: type[Record]) -> tuple[str, ...]:
    """The names of a record class's fields, in order."""
    return cls.__match_args__


def defaults(cls: type[Record]) -> dict[str, Any]:
    """The fields of a record class that have a default, with it (the others are required)."""
    init: Any = cls.__init__
    return dict(init.__kwdefaults__ or {})


def is_record(value: object) -> bool:
    """``value`` is a record class."""
    return isinstance(value, type) and issubclass(value, Record)
