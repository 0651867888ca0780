"""A list of records decoded a field at a time: the checks of a field over every entry in a few calls in C.

A snapshot at the limits lists 32,768 PCI functions or links, each an object of eight to ten fields. Decoded one
object at a time (``_decode``'s record decoder) each field of each entry costs a Python call; here, when every
entry is an object with every field, each field's values are taken out together (a column), and a column of
plain values is checked in C: its types as one set, its numbers' range by ``min`` and ``max``, its strings'
length by ``max``, an enum's members looked up in a dict. Only what has to be built (a nested record, a tuple,
an enum member, an int a float field holds) goes through the field's own decoder, entry by entry. The records
are then built by their constructors, as there.

This is a shortcut, never a second set of rules: it takes only what the record decoder takes, and gives the
same records. Anything else (a missing or unknown key, a value of another type, out of range, a constructor
that refuses) makes it give up (None), and the list is decoded entry by entry, which refuses it and says where.
"""

from __future__ import annotations

import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from itertools import chain, repeat
from operator import eq, itemgetter
from typing import Any

MAX_INT = 1 << 63
MAX_STRING = 4096
_NONE = type(None)

Shared = tuple[dict[Any, Any], Callable[[Any], Any]]  # the records of scalars built, by key; their decoder
Column = Callable[[list[Any]], list[Any] | None]  # the column as the record holds it, or None: not taken here


def _ints(col: list[Any], optional: bool) -> list[Any] | None:
    kinds = set(map(type, col))
    ints = [v for v in col if v is not None] if optional and _NONE in kinds else col
    if not kinds <= ({int, _NONE} if optional else {int}):
        return None
    return col if not ints or (min(ints) > -MAX_INT and max(ints) < MAX_INT) else None


def _strs(col: list[Any], optional: bool) -> list[Any] | None:
    kinds = set(map(type, col))
    strs = [v for v in col if v is not None] if optional and _NONE in kinds else col
    if not kinds <= ({str, _NONE} if optional else {str}):
        return None
    return col if not strs or max(map(len, strs)) <= MAX_STRING else None


def _bools(col: list[Any], optional: bool) -> list[Any] | None:
    return col if set(map(type, col)) <= ({bool, _NONE} if optional else {bool}) else None


def _floats(col: list[Any], optional: bool) -> list[Any] | None:
    kinds = set(map(type, col))
    if not kinds <= ({float, int, _NONE} if optional else {float, int}):
        return None
    if int in kinds:  # an int is a float field's value as a float, within the int range
        ints = [v for v in col if type(v) is int]
        if min(ints) <= -MAX_INT or max(ints) >= MAX_INT:
            return None
        col = [float(v) if type(v) is int else v for v in col]
    floats = [v for v in col if v is not None] if _NONE in kinds else col
    return col if all(map(math.isfinite, floats)) else None


def _members(tp: type[enum.Enum], optional: bool) -> Column:
    members: dict[Any, Any] = {m.value: m for m in tp}
    kinds = {str, int, _NONE} if optional else {str, int}
    if optional:
        members[None] = None

    def column(col: list[Any]) -> list[Any] | None:
        if not set(map(type, col)) <= kinds:  # True == 1: a bool is no member's value
            return None
        try:
            return list(map(members.__getitem__, col))
        except KeyError:
            return None

    return column


def _records(built: dict[Any, Any], again: Callable[[Any], Any], optional: bool) -> Column:
    """A column of records of scalars (a PCIe link state): each taken from the ones already built by its key (as
    ``_decode`` keys them: the object's items and their JSON types), made in C; the others built by ``again``."""

    def column(col: list[Any]) -> list[Any] | None:
        kinds = set(map(type, col))
        if not kinds <= ({dict, _NONE} if optional else {dict}):
            return list(map(again, col))  # refuses, given up below
        objects = [v for v in col if v is not None] if _NONE in kinds else col
        keys = map(tuple, map(chain, map(dict.items, objects), map(map, repeat(type), map(dict.values, objects))))
        found = [record if record is not None else again(value)
                 for record, value in zip(map(built.get, keys), objects, strict=True)]  # a list in it: TypeError
        if _NONE not in kinds:
            return found
        records = iter(found)
        return [None if v is None else next(records) for v in col]

    return column


def _column(hint: Any, decode: Callable[[Any], Any], shared: Mapping[type, Shared]) -> Column:
    """The check of a column of the field typed ``hint`` (``decode``: the field's decoder)."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and _NONE in args
    inner = next((a for a in args if a is not _NONE), hint) if optional else hint
    if inner in shared:
        return _records(*shared[inner], optional)
    if inner in (int, str, bool, float):
        plain = {int: _ints, str: _strs, bool: _bools, float: _floats}[inner]
        return lambda col: plain(col, optional)
    if isinstance(inner, type) and issubclass(inner, enum.Enum) and not issubclass(inner, enum.Flag):
        return _members(inner, optional)
    return lambda col: list(map(decode, col))  # raises Bad: given up below


def columns(cls: type, hints: dict[str, Any], decoders: dict[str, Callable[[Any], Any]],
            give_up: tuple[type[Exception], ...], shared: Mapping[type, Shared]) -> Callable[[list[Any]],
                                                                                    tuple[Any, ...] | None]:
    """The decoder of a list of ``cls`` records a column at a time; None where it gives up (see the module).
    ``give_up``: what a field's decoder raises for a value it refuses; ``shared``: the records of scalars built
    so far, by class, and their decoder."""
    names = tuple(decoders)
    keys = frozenset(names)
    checks = [(itemgetter(name), _column(hints[name], decoders[name], shared)) for name in names]
    refused: tuple[type[Exception], ...] = (*give_up, TypeError, ValueError)  # a value refused, or a record's own check

    def decode(items: list[Any]) -> tuple[Any, ...] | None:
        if not items:
            return ()
        if set(map(type, items)) != {dict} or not all(map(eq, map(dict.keys, items), repeat(keys))):
            return None  # an entry not an object, or without every field: the entry by entry way says which
        cols = []
        changed = False
        try:
            for get, check in checks:
                col = list(map(get, items))
                got = check(col)
                if got is None:
                    return None
                changed = changed or got is not col
                cols.append(got)
            rows = items if not changed else map(dict, map(zip, repeat(names), zip(*cols, strict=True)))
            return tuple(cls(**row) for row in rows)
        except refused:
            return None

    return decode
