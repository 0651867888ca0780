"""JSON ``topolink.topology/v2``: a lossless, schema-checked codec for :class:`Snapshot`.

Generic over the model's dataclasses (driven by their type hints), so a new field needs no codec change.
Enums are written by value, ``MatrixKind`` flags as a sorted list of names, tuples as lists. Unknown
keys are rejected: a document from a newer schema must not half-load as if whole.

v2 added what v1 could not say: which facts each problem leaves unknown (``problems[].unknown``) and the
source statuses ``partial`` and ``disabled``. A v1 document is still read; since its problems do not say
what they leave unknown, each is taken to leave everything about its subject unknown (the whole node when
the subject is not a device), so a v1 snapshot with problems is never taken for a complete one.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from ._errors import SchemaError
from ._facts import NODE, Aspect, Fact
from ._jsontext import dumps_indented
from ._model import Snapshot
from ._numbers import Matrix, MatrixKind
from ._provenance import Problem
from ._validate import check

MAX_DOCUMENT_BYTES = 64 << 20  # a 72-GPU node with every measurement is a few MB; refuse bigger
_MAX_INT = 1 << 63
_MAX_STRING = 4096
SCHEMA = "topolink.topology/v2"
SCHEMA_V1 = "topolink.topology/v1"
READABLE = (SCHEMA, SCHEMA_V1)
_STRUCTURE_FIELDS = ("host_bridges", "pci", "numa_nodes", "gpus", "nvswitches", "nics", "links", "matrices")
_PLAIN = frozenset({str, int, float, bool, type(None)})


@cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    return tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


def _encode(value: Any) -> Any:
    """The JSON value of a model value. Plain values, tuples and the model's dataclasses (nearly all of a
    snapshot's values: CPU lists, matrix rows) are told apart by their exact type, and plain items are not
    recursed into: that is what makes a 64-GPU snapshot cheap. Enums and anything else go the general way."""
    kind: type = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple:
        return [v if type(v) in _PLAIN else _encode(v) for v in value]
    if (names := _field_names(kind)) is not None:
        return {n: v if type(v := getattr(value, n)) in _PLAIN else _encode(v) for n in names}
    if isinstance(value, MatrixKind):
        return sorted(m.name for m in MatrixKind if m in value and m.name)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def to_dict(snap: Snapshot) -> dict[str, Any]:
    return {"schema": SCHEMA, **_encode(snap)}


def dumps(snap: Snapshot, *, indent: int | None = 2) -> str:
    """The JSON text; with ``indent``, exactly what ``json.dumps(..., indent=indent)`` writes, only faster."""
    if indent is None:
        return json.dumps(to_dict(snap), allow_nan=False)
    return dumps_indented(to_dict(snap), indent)


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
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
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
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(value) - names
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")
    hints = _hints(cls)
    kwargs = {k: _decode(hints[k], v, f"{where}.{k}") for k, v in value.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SchemaError(f"{where}: {exc}") from exc


def from_dict(doc: Mapping[str, Any], *, validate: bool = True) -> Snapshot:
    """The snapshot a document holds. ``validate`` (default) also refuses one that decodes but does not
    describe a machine (duplicate ids, ragged matrices, impossible counts): see ``topology._validate``."""
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if schema not in READABLE:
        raise SchemaError(f"not a {SCHEMA} (or {SCHEMA_V1}) document")
    body = {k: v for k, v in doc.items() if k != "schema"}
    snap: Snapshot = _decode_record(Snapshot, body, "snapshot")
    if schema == SCHEMA_V1:
        snap = _from_v1(snap)
    return check(snap, v1=schema == SCHEMA_V1) if validate else snap


def _from_v1(snap: Snapshot) -> Snapshot:
    devices = {g.id for g in snap.gpus} | {n.id for n in snap.nics} | {f.id for f in snap.pci}
    problems = tuple(
        p if p.unknown else Problem(source=p.source, subject=p.subject, message=p.message,
                                    unknown=(Fact(subject=p.subject if p.subject in devices else NODE,
                                                  aspect=Aspect.ALL),))
        for p in snap.problems)
    return dataclasses.replace(snap, problems=problems)


def parse_json(data: str | bytes) -> Any:
    """JSON from untrusted input, every failure a :class:`SchemaError`: too big, not UTF-8, not JSON,
    nested too deep, a number with thousands of digits, ``NaN`` or ``Infinity``."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise SchemaError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise SchemaError("not a snapshot: nested too deep") from exc
    except SchemaError:
        raise
    except ValueError as exc:  # an integer too long to convert
        raise SchemaError(f"not JSON: {str(exc)[:100]}") from exc


def _no_constant(name: str) -> Any:
    raise SchemaError(f"not JSON: {name} is not a number JSON allows")


def loads(data: str | bytes, *, validate: bool = True) -> Snapshot:
    doc = parse_json(data)
    try:
        return from_dict(doc, validate=validate)
    except RecursionError as exc:
        raise SchemaError("not a snapshot: nested too deep") from exc


def structure_hash(snap: Snapshot) -> str:
    """sha256 over devices and links only: changes when the hardware or its wiring does, not when a
    measurement, a timestamp or a problem does. Measured matrices are left out too."""
    body = {name: _encode(getattr(snap, name)) for name in _STRUCTURE_FIELDS if name != "matrices"}
    body["matrices"] = [_encode(m) for m in snap.matrices if not _is_measured(m)]
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"))
    import hashlib  # OpenSSL's start-up costs ~10 ms, which only the agent (and never --format json) pays

    return hashlib.sha256(raw.encode()).hexdigest()


def _is_measured(m: Matrix) -> bool:
    return MatrixKind.MEASURED in m.kind
