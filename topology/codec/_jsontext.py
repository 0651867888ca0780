"""Indented JSON text, byte for byte what ``json.dumps(doc, indent=n, allow_nan=False)`` writes, made fast.

``json.dumps`` uses its C encoder only when ``indent`` is None; with an indent every value goes through
the pure-Python one. Here Python walks only the objects and the lists that hold strings or containers.
Scalars are written as the C encoder writes them (strings by its own ``encode_basestring_ascii``), and a
list of numbers, booleans and nulls (CPU lists, matrix rows: most of a snapshot) is joined in one call.
NaN and infinities are refused (ValueError), as there. Object keys must be strings (json.dumps would turn
numbers into strings; a snapshot has none).

The ``json`` package itself (its decoder, scanner and encoder modules: about a millisecond of every start
of ``discover``) is loaded only for what is rare here: a value of another type (an int subclass), or a
non-finite float to refuse with its message.
"""

from __future__ import annotations

from collections.abc import Callable

try:  # what json.encoder.encode_basestring_ascii is, where the C accelerator exists (CPython has it)
    from _json import encode_basestring_ascii as _string
except ImportError:  # pragma: no cover
    from json.encoder import encode_basestring_ascii as _string

TYPE_CHECKING = False  # not typing's: importing typing costs start-up; mypy reads it as True
if TYPE_CHECKING:
    from typing import Any

_encoder: Callable[[Any], str] | None = None


def _compact(o: Any) -> str:
    """``o`` as ``json.dumps(o, allow_nan=False, separators=(",", ":"))`` writes it (or its ValueError)."""
    global _encoder  # noqa: PLW0603 - made once, on first use
    if _encoder is None:
        import json

        _encoder = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode
    return _encoder(o)


_INF = float("inf")


def _float(f: float) -> str:  # -inf < f < inf is math.isfinite without importing math (start-up)
    return float.__repr__(f) if -_INF < f < _INF else _compact(f)  # _compact refuses it


_SCALAR: dict[type, Callable[[Any], str]] = {
    str: _string, int: int.__repr__, float: _float,
    bool: lambda b: "true" if b else "false", type(None): lambda _: "null",
}
_INTS, _FLOATS = {int}, {float}
_FLAT = {int, float, bool, type(None)}  # what a list is written in one line of commas from


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
        kinds = set(map(type, o))
        if kinds == _INTS:  # CPU lists, counts: nearly every list of a snapshot
            return "[" + inner + ("," + inner).join(map(int.__repr__, o)) + newline + "]"
        if kinds == _FLOATS and -_INF < sum(o) < _INF:  # matrix rows; a NaN or an infinity makes the sum one
            return "[" + inner + ("," + inner).join(map(float.__repr__, o)) + newline + "]"
        if kinds <= _FLAT:
            return "[" + inner + ("," + inner).join([_SCALAR[type(v)](v) for v in o]) + newline + "]"
        return "[" + inner + ("," + inner).join(_value(v, inner, step) for v in o) + newline + "]"
    return _compact(o)  # whatever else the C encoder takes (an int subclass) or refuses
