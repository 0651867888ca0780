"""The codec's decoder as it was before decoders were built once per type (topology/codec/_json_codec.py before the
change), kept only so that benchmarks/codec.py can print the two side by side. Not used by topolink."""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

import topology as t
from topology import Record
from topology.model._measurement import MatrixKind

SchemaError = t.SchemaError
_MAX_INT = 1 << 63
_MAX_STRING = 4096


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise SchemaError(f"{where}: null not allowed")
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise SchemaError(f"{where}: expected {len(args)} items")
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if tp is MatrixKind:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list of flag names")
        flags = MatrixKind(0)
        for name in value:
            try:
                flags |= MatrixKind[name]
            except (KeyError, TypeError) as exc:
                raise SchemaError(f"{where}: unknown flag {name!r}") from exc
        return flags
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"{where}: {value!r} is not a {tp.__name__}") from exc
    if isinstance(tp, type) and issubclass(tp, Record):
        return _decode_record(tp, value, where)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SchemaError(f"{where}: expected a number")
        if (isinstance(value, int) and abs(value) >= _MAX_INT) or not math.isfinite(value):
            raise SchemaError(f"{where}: number out of range")
        return float(value)
    if tp in (int, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise SchemaError(f"{where}: expected {tp.__name__}")
        if tp is int and abs(value) >= _MAX_INT:
            raise SchemaError(f"{where}: integer out of range")
        if tp is str and len(value) > _MAX_STRING:
            raise SchemaError(f"{where}: string longer than {_MAX_STRING} characters")
        return value
    raise SchemaError(f"{where}: cannot decode type {tp!r}")  # pragma: no cover - a model bug


def _decode_record(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, Mapping):
        raise SchemaError(f"{where}: expected an object")
    names = set(cls.__match_args__)
    unknown = set(value) - names
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")
    hints = _hints(cls)
    kwargs = {k: _decode(hints[k], v, f"{where}.{k}") for k, v in value.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SchemaError(f"{where}: {exc}") from exc


def loads(data: bytes) -> t.Snapshot:
    """What ``topology.loads`` did: parse, decode field by field through the type hints, then the same
    checks as now (``topology.codec._validate.check``)."""
    from topology.codec._validate import check

    doc = json.loads(data)
    body = {k: v for k, v in doc.items() if k != "schema"}
    snap: t.Snapshot = _decode_record(t.Snapshot, body, "snapshot")
    return check(snap)
