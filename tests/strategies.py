"""Hypothesis strategies for the model: every field, every optional state."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from hypothesis import strategies as st

import topology as t

_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_ints = st.integers(min_value=-(2**53), max_value=2**53)


def _for_type(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_for_type(a) for a in typing.get_args(tp)))
    if tp is type(None):
        return st.none()
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_for_type(args[0]), max_size=3).map(tuple)
        return st.tuples(*(_for_type(a) for a in args))
    if tp is t.MatrixKind:
        return st.sets(st.sampled_from(list(t.MatrixKind))).map(_or_flags)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and issubclass(tp, t.Record):
        return record(tp)
    return {float: _finite, int: _ints, str: _text, bool: st.booleans()}[tp]


def _or_flags(flags: set[t.MatrixKind]) -> t.MatrixKind:
    out = t.MatrixKind(0)
    for f in flags:
        out |= f
    return out


def record(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {name: st.deferred(lambda tp=hints[name]: _for_type(tp)) for name in cls.__match_args__}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


snapshots: st.SearchStrategy[t.Snapshot] = record(t.Snapshot)
