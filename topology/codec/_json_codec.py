"""JSON ``topolink.topology/v2``: a lossless, schema-checked codec for :class:`Snapshot`.

Generic over the model's records (driven by their type hints), so a new field needs no codec change.
Enums are written by value, ``MatrixKind`` flags as a sorted list of names, tuples as lists. Unknown
keys are rejected: a document from a newer schema must not half-load as if whole; so is an object that
repeats a key, and a list longer than a snapshot may hold (``SNAPSHOT_LIMITS``). Decoding is built once
per type (``_decode``); ``_validate`` then checks what one field cannot say alone (ids unique, every id
referred to present).

v2 added what v1 could not say: which facts each problem leaves unknown (``problems[].unknown``) and the
source statuses ``partial`` and ``disabled``. A v1 document is still read; since its problems do not say
what they leave unknown, each is taken to leave everything about its subject unknown (the whole node when
the subject is not a device), so a v1 snapshot with problems is never taken for a complete one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from functools import cache
from operator import attrgetter

from ..model._entities import Snapshot, per_snapshot
from ..model._errors import SchemaError
from ..model._facts import NODE, Aspect, Fact
from ..model._measurement import MatrixKind
from ..model._provenance import Problem
from ..model._record import fields, is_record, replace
from ._jsontext import dumps_indented

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any

MAX_DOCUMENT_BYTES = 64 << 20  # a 72-GPU node with every measurement is a few MB; refuse bigger
SCHEMA = "topolink.topology/v2"
SCHEMA_V1 = "topolink.topology/v1"
READABLE = (SCHEMA, SCHEMA_V1)
_PLAIN = frozenset({str, int, float, bool, type(None)})


@cache
def _fields_of(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None:
    """A record's field names, and a getter of their values as one tuple (``operator.attrgetter`` of two or
    more names returns one); None for anything else."""
    if not is_record(cls):
        return None
    names = fields(cls)
    if len(names) > 1:
        return names, attrgetter(*names)
    return names, lambda value: tuple(getattr(value, n) for n in names)


def _encode(value: Any) -> Any:
    """The JSON value of a model value. Plain values, tuples and the model's records (nearly all of a
    snapshot's values: CPU lists, matrix rows) are told apart by their exact type, and plain items are not
    recursed into: that is what makes a 64-GPU snapshot cheap. Enums and anything else go the general way."""
    kind: type = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple:
        return [v if type(v) in _PLAIN else _encode(v) for v in value]
    if (record := _fields_of(kind)) is not None:
        names, values = record
        return {n: v if type(v) in _PLAIN else _encode(v) for n, v in zip(names, values(value), strict=True)}
    if isinstance(value, MatrixKind):
        return sorted(m.name for m in MatrixKind if m in value and m.name)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def to_dict(snap: Snapshot) -> dict[str, Any]:
    return {"schema": SCHEMA, **_encode(snap)}


def dumps(snap: Snapshot, *, indent: int | None = 2) -> str:
    """The JSON text; with ``indent``, exactly what ``json.dumps(..., indent=indent)`` writes, only faster."""
    if indent is None:
        import json

        return json.dumps(to_dict(snap), allow_nan=False)
    return dumps_indented(to_dict(snap), indent)


def from_dict(doc: Mapping[str, Any], *, validate: bool = True) -> Snapshot:
    """The snapshot a document holds. ``validate`` (default) also refuses one that decodes but does not
    describe a machine (duplicate ids, ragged matrices, impossible counts): see ``topology.codec._validate``."""
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if schema not in READABLE:
        raise SchemaError(f"not a {SCHEMA} (or {SCHEMA_V1}) document")
    body = {k: v for k, v in doc.items() if k != "schema"}
    from ._collector import Building
    from ._decode import Bad, decoder  # here: it loads typing, which writing a snapshot has no use for

    try:
        with Building():
            snap: Snapshot = decoder(Snapshot)(body)
    except Bad as bad:
        raise bad.error("snapshot") from None
    if schema == SCHEMA_V1:
        snap = _from_v1(snap)
    if not validate:
        return snap
    from ._validate import check  # here: writing a snapshot has no use for it (start-up)

    return check(snap, v1=schema == SCHEMA_V1)


def _from_v1(snap: Snapshot) -> Snapshot:
    devices = {g.id for g in snap.gpus} | {n.id for n in snap.nics} | {f.id for f in snap.pci}
    problems = tuple(
        p if p.unknown else Problem(source=p.source, subject=p.subject, message=p.message,
                                    unknown=(Fact(subject=p.subject if p.subject in devices else NODE,
                                                  aspect=Aspect.ALL),))
        for p in snap.problems)
    return replace(snap, problems=problems)


def parse_json(data: str | bytes) -> Any:
    """JSON from untrusted input, every failure a :class:`SchemaError`: too big, not UTF-8, not JSON,
    nested too deep, a number with thousands of digits, ``NaN`` or ``Infinity``."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise SchemaError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    import json

    from ._collector import Building

    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        with Building():
            return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_object)
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


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of the document; one that repeats a key is refused (JSON leaves it to the reader, and
    taking the last one would read what the writer did not mean)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise SchemaError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


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
    measurement, a timestamp or a problem does. Measured matrices are left out too, and so is the fabric's
    health mask (the fabric's state, not its wiring). Once per snapshot: every view the agent makes around one
    snapshot (a probe pass, a publish) and the labels ask for it."""
    return per_snapshot(snap, structure_hash, lambda: _structure_hash(snap))


def _structure_hash(snap: Snapshot) -> str:
    """The sha256 of the structure's JSON text with sorted keys and no spaces, as ``json.dumps(..., sort_keys=True,
    separators=(",", ":"))`` writes it (``_hash``)."""
    import hashlib  # OpenSSL's start-up costs ~10 ms, which only the agent (and never --format json) pays

    from ._hash import structure_text  # here: it loads typing (msgspec too for a big one), which writing has no use for

    return hashlib.sha256(structure_text(snap)).hexdigest()
