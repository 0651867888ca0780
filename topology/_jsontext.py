"""Indented JSON text, byte for byte what ``json.dumps(doc, indent=n, allow_nan=False)`` writes, made fast.

``json.dumps`` uses its C encoder only when ``indent`` is None; with an indent every value goes through
the pure-Python one. Here Python walks only the objects and the lists that hold strings or containers.
Scalars are written as the C encoder writes them, and a list of numbers, booleans and nulls (CPU lists,
matrix rows: most of a snapshot) is encoded whole by the C encoder, its commas then indented: with no
string in the text, every comma is a separator. NaN and infinities are refused (ValueError), as there.
Object keys must be strings (json.dumps would turn numbers into strings; a snapshot has none).
"""

from __future__ import annotations

import json
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing costs start-up; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any

_compact = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
_string = json.encoder.encode_basestring_ascii


_INF = float("inf")


def _float(f: float) -> str:  # -inf < f < inf is math.isfinite without importing math (start-up)
    return float.__repr__(f) if -_INF < f < _INF else _compact(f)  # _compact refuses it


_SCALAR: dict[type, Callable[[Any], str]] = {
    str: _string, int: int.__repr__, float: _float,
    bool: lambda b: "true" if b else "false", type(None): lambda _: "null",
}


def dumps_indented(doc: Any, indent: int) -> str:
    return _value(doc, "\n", " " * indent)


def _value(o: Any, newline: str, step: str) -> str:
    scalar = _SCALAR.get(type(o))
    if scalar is not None:
        return scalar(o)
    if isinstance(o, dict):
        if not o:
            return "{}"
        inner = newline + step
        items = (f"{_string(k)}: {_value(v, inner, step)}" for k, v in o.items())
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if isinstance(o, list | tuple):
        if not o:
            return "[]"
        inner = newline + step
        if not isinstance(o[0], str | dict | list | tuple):
            flat = _compact(o)[1:-1]
            if not any(c in flat for c in '"[{'):
                return "[" + inner + flat.replace(",", "," + inner) + newline + "]"
        return "[" + inner + ("," + inner).join(_value(v, inner, step) for v in o) + newline + "]"
    return _compact(o)  # whatever else the C encoder takes (an int subclass) or refuses
