"""The structure hash's text: the JSON of a snapshot's devices and links, byte for byte what
``json.dumps(body, sort_keys=True, separators=(",", ":"))`` writes of their JSON values (its value is published
and kept with the agent's state: it must never change for the same snapshot).

Written by ``msgspec`` (a topolink dependency) where its text is that one and the snapshot is big enough to pay
for loading it (or it is loaded already): it writes each record's dict (built
once per record, ``_hook``) and every list, number and string in C, about seven times as fast as ``json.dumps`` of
the dicts built in Python (``_json_text``, the way it was written before, kept for the rest). The two writers
differ in three ways, each handled here:

- a float ``json`` writes in exponent form (at or above 1e16, below 1e-4: ``1e+16``, ``1e-05``; NaN and the
  infinities), ``msgspec`` writes otherwise (``1e16``, ``0.00001``, ``null``): such a float is handed to ``msgspec``
  as the text ``json`` writes (``msgspec.Raw``); every other float is written alike (``float.__repr__``), which
  tests/test_topology_model.py holds;
- ``json`` escapes every character outside printable ASCII, ``msgspec`` writes UTF-8: a text with a byte outside
  printable ASCII is written again by ``json``;
- ``msgspec`` writes an ``enum.Flag`` as its integer, ``json`` here as its sorted names: converted in ``_hook``.

Anything else ``msgspec`` refuses (a lone surrogate, a value of no JSON type) is written by ``json`` too.
"""

from __future__ import annotations

import enum
import json
import math
import sys
import typing
from collections.abc import Callable
from functools import cache
from itertools import repeat
from operator import attrgetter
from typing import Any

from ..model._entities import Snapshot
from ..model._measurement import MatrixKind
from ..model._record import fields, is_record
from ._collector import Building

STRUCTURE_FIELDS = ("host_bridges", "pci", "numa_nodes", "gpus", "nvswitches", "nics", "links", "matrices")
_PLAIN = frozenset({str, int, float, bool, type(None)})
_LOW, _HIGH = 1e-4, 1e16  # float.__repr__ writes a float outside [1e-4, 1e16) in exponent form
_json_float: Callable[[float], str] = json.JSONEncoder(separators=(",", ":")).encode  # NaN as NaN, as json.dumps
_BIG = 4096  # PCI functions and links: where msgspec's writing saves more than its import costs (45 ms of CPU)


def structure_text(snap: Snapshot) -> bytes:
    """The text the structure hash is the sha256 of (see the module): by ``msgspec`` where it writes it, and is
    loaded already or worth loading; else by ``json``."""
    if len(snap.pci) + len(snap.links) >= _BIG or "msgspec" in sys.modules:
        text = msgspec_text(snap)
        if text is not None:
            return text
    return _json_text(snap)


def msgspec_text(snap: Snapshot) -> bytes | None:
    """The text as ``msgspec`` writes it, where it writes what ``json`` writes; None where it would not."""
    import msgspec

    with Building():
        try:
            hook = _hook({})
            text = msgspec.json.encode(_body(snap, hook), enc_hook=hook, order="sorted")
        except (msgspec.MsgspecError, TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
            return None
    # printable ASCII only: the text json writes (it escapes the rest; msgspec writes UTF-8 and a raw DEL)
    return text if text.isascii() and b"\x7f" not in text else None


def _body(snap: Snapshot, hook: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {name: _dicts(getattr(snap, name)) for name in STRUCTURE_FIELDS
                            if name not in ("gpus", "matrices")}
    gpus = []
    for gpu in snap.gpus:  # each GPU's fabric without its health mask (the fabric's state, not its wiring)
        encoded = hook(gpu)
        if encoded.get("fabric") is not None:
            fabric = {k: v for k, v in hook(encoded["fabric"]).items() if k != "health_mask"}
            encoded = {**encoded, "fabric": fabric}  # a copy: the GPU's dict is its record's, kept in ``done``
        gpus.append(encoded)
    body["gpus"] = gpus
    body["matrices"] = [m for m in snap.matrices if MatrixKind.MEASURED not in m.kind]
    return body


def _dicts(records: tuple[Any, ...]) -> Any:
    """A list of records of one class as their dicts, built a field at a time in C (32,768 PCI functions or links
    at the limits: one ``hook`` call each otherwise); a float field passed whole where it holds no float ``msgspec``
    writes otherwise than ``json`` (else its values go through ``_floats`` one by one). Any other list as it is."""
    if len(records) < 64 or len({r.__class__ for r in records}) != 1 or (plan := _plan(records[0].__class__)) is None:
        return records
    names, values, fixes = plan
    if not fixes:
        return list(map(dict, map(zip, repeat(names), map(values, records))))
    columns = list(zip(*map(values, records), strict=True))
    for i, fix in fixes:
        present = tuple(v for v in columns[i] if v is not None)
        if fix is not _floats or _floats(present) is not present:
            columns[i] = tuple(map(fix, columns[i]))
    return list(map(dict, map(zip, repeat(names), zip(*columns, strict=True))))


def _hook(done: dict[int, dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """``msgspec``'s ``enc_hook``: a record's dict of fields, each record's once (``done``, by identity: a snapshot
    read back shares one PCIe link state among thousands of functions and links, ``_decode``)."""

    def hook(value: Any) -> dict[str, Any]:
        encoded = done.get(id(value))
        if encoded is not None:
            return encoded
        plan = _plan(value.__class__)
        if plan is None:
            raise TypeError(f"not a record: {type(value).__name__}")  # to json, which writes what it can
        names, values, fixes = plan
        got = values(value)
        if fixes:
            got = list(got)
            for i, fix in fixes:
                v = got[i]
                if v is not None and (type(v) is not float or not (v == 0 or _LOW <= abs(v) < _HIGH)):
                    got[i] = fix(v)  # a float msgspec writes as json does is left as it is, without a call
        encoded = dict(zip(names, got, strict=True))
        done[id(value)] = encoded
        return encoded

    return hook


_Plan = tuple[tuple[str, ...], Callable[[Any], Any], tuple[tuple[int, Callable[[Any], Any]], ...]]


@cache
def _plan(cls: type) -> _Plan | None:
    """A record class's field names, a getter of their values, and the fields written otherwise than ``msgspec``
    writes them (flags, and anything that may hold a float); None for anything else."""
    if not is_record(cls):
        return None
    names = fields(cls)
    hints = typing.get_type_hints(cls)
    fixes: list[tuple[int, Callable[[Any], Any]]] = []
    for i, name in enumerate(names):
        inner = [a for a in typing.get_args(hints[name]) if a is not type(None)] or [hints[name]]
        if any(isinstance(a, type) and issubclass(a, enum.Flag) for a in inner):
            fixes.append((i, _flag))
        elif "float" in str(hints[name]) or hints[name] is Any:
            fixes.append((i, _floats))
    getter: Callable[[Any], Any] = attrgetter(*names) if len(names) > 1 else (lambda r: (getattr(r, names[0]),))
    return names, getter, tuple(fixes)


def _flag(value: Any) -> Any:
    if isinstance(value, MatrixKind):
        return sorted(m.name for m in MatrixKind if m in value and m.name)
    return value.value if isinstance(value, enum.Enum) else value


def _floats(value: Any) -> Any:
    """``value`` with each float that ``msgspec`` would write otherwise than ``json`` as ``json``'s text."""
    import msgspec  # loaded by msgspec_text

    kind = type(value)
    if kind is float:
        return value if value == 0 or _LOW <= abs(value) < _HIGH else msgspec.Raw(_json_float(value).encode())
    if kind is not tuple or not value:
        return value
    if {float, int}.issuperset(map(type, value)):  # a row of numbers: checked in C, passed whole when fit
        nonzero = list(filter(None, value))
        if not nonzero or (math.isfinite(sum(nonzero)) and min(map(abs, nonzero)) >= _LOW
                           and max(map(abs, nonzero)) < _HIGH):
            return value
    return [_floats(v) for v in value]


def _json_text(snap: Snapshot) -> bytes:
    """The text as ``json.dumps`` writes it, from the records' JSON values built in Python."""
    done: dict[int, Any] = {}  # id of a record or enum member: its JSON value (all of them live in snap meanwhile)
    with Building():
        body = {name: _sorted_encode(getattr(snap, name), done) for name in STRUCTURE_FIELDS if name != "matrices"}
        body["gpus"] = [{**gpu, "fabric": {k: v for k, v in gpu["fabric"].items() if k != "health_mask"}}
                        if gpu.get("fabric") else gpu for gpu in body["gpus"]]  # copies: a fabric's may be shared
        body["matrices"] = [_sorted_encode(m, done) for m in snap.matrices if MatrixKind.MEASURED not in m.kind]
        # no cycle to look for: a tree of values encoded from records, which never change (shared, never circular)
        return json.dumps(dict(sorted(body.items())), separators=(",", ":"), check_circular=False).encode()


@cache
def _sorted_fields(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None:
    """A record's field names sorted, as ``json.dumps(..., sort_keys=True)`` writes them, and a getter of their
    values as one tuple; None for anything else."""
    if not is_record(cls):
        return None
    names = tuple(sorted(fields(cls)))
    return names, attrgetter(*names) if len(names) > 1 else (lambda r: (getattr(r, names[0]),))


def _sorted_encode(value: Any, done: dict[int, Any]) -> Any:
    """The JSON value of ``value`` with each record's keys in sorted order, each record and enum member encoded
    once (``done``, by identity)."""
    kind: type = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple:
        return [v if type(v) in _PLAIN else _sorted_encode(v, done) for v in value]
    if (encoded := done.get(id(value))) is not None:
        return encoded
    if (record := _sorted_fields(kind)) is not None:
        names, values = record
        encoded = {n: v if type(v) in _PLAIN else _sorted_encode(v, done)
                   for n, v in zip(names, values(value), strict=True)}
    elif isinstance(value, enum.Enum):
        encoded = _flag(value)
    elif isinstance(value, tuple | list):
        encoded = [_sorted_encode(v, done) for v in value]
    else:
        encoded = value
    done[id(value)] = encoded
    return encoded
