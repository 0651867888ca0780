"""Decoding JSON values into the model's types: one decoder per type, built once from its type hints.

The decoder of a record checks the value is an object with no key the record lacks, decodes each field
with the decoder of its type and builds the record; a list of plain values (CPU lists, matrix rows, most
of a snapshot) is checked in one pass over it and kept as a tuple, never value by value through the
general path. A failure is raised with no path built; each enclosing record and list adds its key or
index on the way out, so the success path pays nothing for the error message's ``snapshot.gpus[3].index``.

The lists a snapshot holds are bounded (``_limits.SNAPSHOT_LIMITS``): a document listing more GPUs, NICs,
PCI functions or links than any machine has is refused before a single entry of that list is decoded, so
a document cannot make the commands that read it do work without bound.

The model's types are records (``model._record``: frozen, slotted, keyword-only plain classes, their fields
named by ``__match_args__``, the defaults those of their ``__init__``). ``msgspec`` (a topolink dependency) was
measured for them (``benchmarks/codec.py``): its ``Struct`` classes are created in microseconds, but importing
it costs about 60 ms of CPU (it loads ``typing_extensions``, ``inspect``, ``decimal`` and ``uuid``, which the
discovery path does not otherwise load), and it does not read ``MatrixKind`` flags as the schema writes them (a
list of names). Decoding here costs about as
much again as the JSON parse before it: 4 to 5 times less than the decoder it replaced. A list of records (the
32,768 PCI functions or links of a snapshot at its limits) is decoded a field at a time where it can be
(``_columns``), which takes only what the decoder of one record takes; the rest goes entry by entry as here.
"""

from __future__ import annotations

import enum
import math
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from ..model._errors import SchemaError
from ..model._record import defaults, fields, is_record
from ..model._snapshot_limits import SNAPSHOT_LIMITS
from ._columns import columns

MAX_INT = 1 << 63
MAX_STRING = 4096
_BUILT_MAX = 256  # records of scalars kept per record class, to be taken again (records never change)

Decoder = Callable[[Any], Any]
_BY_COLUMN: dict[type, Callable[[list[Any]], tuple[Any, ...] | None]] = {}  # record class: its lists' decoder
_SHARED: dict[type, tuple[dict[Any, Any], Decoder]] = {}  # record class of scalars: the records built, its decoder


class Bad(Exception):
    """A value that does not decode; ``path`` gathers the keys and indices around it, innermost first."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def error(self, root: str) -> SchemaError:
        return SchemaError(f"{root}{''.join(reversed(self.path))}: {self.message}")


def _int(v: Any) -> int:
    if type(v) is not int:
        raise Bad("expected int")
    if not -MAX_INT < v < MAX_INT:
        raise Bad("integer out of range")
    return v


def _float(v: Any) -> float:
    if type(v) is float:
        if math.isfinite(v):
            return float(v)
        raise Bad("number out of range")
    if type(v) is int:
        if -MAX_INT < v < MAX_INT:
            return float(v)
        raise Bad("number out of range")
    raise Bad("expected a number")


def _str(v: Any) -> str:
    if type(v) is not str:
        raise Bad("expected str")
    if len(v) > MAX_STRING:
        raise Bad(f"string longer than {MAX_STRING} characters")
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise Bad("expected bool")
    return v


_SCALARS: dict[Any, Decoder] = {int: _int, float: _float, str: _str, bool: _bool}


def _fast_list(tp: Any) -> Callable[[list[Any]], bool] | None:
    """A check that a list of ``tp`` values is already what the model holds (no conversion needed)."""
    if tp is float:
        return lambda v: all(type(x) is float for x in v) and all(map(math.isfinite, v))
    if tp is int:
        return lambda v: all(type(x) is int for x in v) and (not v or (min(v) > -MAX_INT and max(v) < MAX_INT))
    if tp is str:
        return lambda v: all(type(x) is str and len(x) <= MAX_STRING for x in v)
    return None


def _items(item: Decoder, value: list[Any]) -> tuple[Any, ...]:
    for i, v in enumerate(value):
        try:
            item(v)
        except Bad as bad:
            bad.path.append(f"[{i}]")
            raise
    raise AssertionError("unreachable: one item failed before")  # pragma: no cover


def _sequence(inner: Any, limit: int | None) -> Decoder:
    item = decoder(inner)
    fast = _fast_list(inner)
    by_column = _BY_COLUMN.get(inner)

    def decode(value: Any) -> tuple[Any, ...]:
        if type(value) is not list:
            raise Bad("expected a list")
        if limit is not None and len(value) > limit:
            raise Bad(f"{len(value)} entries, more than the {limit} a snapshot may hold")
        if fast is not None and fast(value):
            return tuple(value)
        if by_column is not None and (records := by_column(value)) is not None:
            return records
        try:
            return tuple(map(item, value))
        except Bad:
            return _items(item, value)  # again one by one, to say which

    return decode


def _fixed(args: tuple[Any, ...]) -> Decoder:
    items = tuple(decoder(a) for a in args)

    def decode(value: Any) -> tuple[Any, ...]:
        if type(value) is not list:
            raise Bad("expected a list")
        if len(value) != len(items):
            raise Bad(f"expected {len(items)} items")
        out = []
        for i, (item, v) in enumerate(zip(items, value, strict=True)):
            try:
                out.append(item(v))
            except Bad as bad:
                bad.path.append(f"[{i}]")
                raise
        return tuple(out)

    return decode


def _optional(inner: Decoder) -> Decoder:
    if inner is _int:  # the commonest optional fields, in one call rather than two
        return lambda v: v if v is None or (type(v) is int and -MAX_INT < v < MAX_INT) else _int(v)
    if inner is _str:
        return lambda v: v if v is None or (type(v) is str and len(v) <= MAX_STRING) else _str(v)
    return lambda v: None if v is None else inner(v)


def _enum(tp: type[enum.Enum]) -> Decoder:
    members = {m.value: m for m in tp}

    def decode(value: Any) -> Any:
        if type(value) in (str, int) and value in members:
            return members[value]
        raise Bad(f"{value!r} is not a {tp.__name__}")

    return decode


def _flags(tp: type[enum.Flag]) -> Decoder:
    names = {m.name: m for m in tp if m.name}

    def decode(value: Any) -> Any:
        if type(value) is not list:
            raise Bad("expected a list of flag names")
        flags = tp(0)
        for name in value:
            if type(name) is not str or name not in names:
                raise Bad(f"unknown flag {name!r}")
            flags |= names[name]
        return flags

    return decode


def _scalar(tp: Any) -> bool:
    """``tp`` is a scalar the JSON value says exactly: an int, a str, a bool or an enum, or None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return all(a is type(None) or _scalar(a) for a in typing.get_args(tp))
    return tp in (int, str, bool) or (isinstance(tp, type) and issubclass(tp, enum.Enum)
                                      and not issubclass(tp, enum.Flag))


def _record(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    limits = SNAPSHOT_LIMITS if cls.__name__ == "Snapshot" else {}
    decoders: dict[str, Decoder] = {}
    for name in fields(cls):
        tp = hints[name]
        decoders[name] = _sequence(typing.get_args(tp)[0], limits[name]) if name in limits else decoder(tp)
    names = frozenset(decoders)
    optional = defaults(cls)
    required = frozenset(name for name in fields(cls) if name not in optional)
    # a record of scalars alone (a PCIe link's state, a fabric's, a fact) is the same value in thousands of places:
    # one already built is taken again for an object with the same keys, values and JSON types (1 and true are
    # equal in Python, so the types are part of the key; a float is not a scalar here: -0.0 == 0.0)
    built: dict[Any, Any] | None = {} if all(_scalar(hints[name]) for name in names) else None

    def decode(value: Any) -> Any:
        if type(value) is not dict:
            raise Bad("expected an object")
        if not names.issuperset(value):
            raise Bad(f"unknown keys {sorted(set(value) - names)}")
        if not required <= value.keys():
            for name in fields(cls):
                if name in required and name not in value:
                    bad = Bad("missing, and required")
                    bad.path.append(f".{name}")
                    raise bad
        try:
            kwargs = {k: decoders[k](v) for k, v in value.items()}
        except Bad as bad:
            for k, v in value.items():  # again one by one, to say which
                try:
                    decoders[k](v)
                except Bad:
                    bad.path.append(f".{k}")
                    break
            raise
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # a record's own check of its fields; never its signature
            raise Bad(f"not a valid {cls.__name__}: {exc}") from exc

    if built is None:  # a list of these is decoded a field at a time where it can be (``_columns``)
        _BY_COLUMN[cls] = columns(cls, hints, decoders, (Bad,), _SHARED)
        return decode

    def again(value: Any) -> Any:
        try:
            key = (*value.items(), *map(type, value.values()))
            return built[key]
        except KeyError:
            record = decode(value)
            if len(built) < _BUILT_MAX:
                built[key] = record
            return record
        except (AttributeError, TypeError):  # not an object, or a value that is no scalar: refused, and said why
            return decode(value)

    _SHARED[cls] = (built, again)
    return again


@cache
def decoder(tp: Any) -> Decoder:
    """The decoder of values of type ``tp`` (a type hint of the model); raises :class:`Bad`."""
    scalar = _SCALARS.get(tp)
    if scalar is not None:
        return scalar
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _optional(decoder(inner))
    if origin is tuple:
        args = typing.get_args(tp)
        return _sequence(args[0], None) if len(args) == 2 and args[1] is Ellipsis else _fixed(args)
    if isinstance(tp, type) and issubclass(tp, enum.Flag):
        return _flags(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if is_record(tp):
        return _record(tp)
    raise TypeError(f"cannot decode type {tp!r}")  # pragma: no cover - a model bug
