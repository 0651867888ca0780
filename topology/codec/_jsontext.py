"""Indented JSON text, byte for byte what ``json.dumps(doc, indent=n, allow_nan=False)`` writes, made fast.

``json.dumps`` uses its C encoder only when ``indent`` is None; with an indent every value goes through
the pure-Python one, about three times as slow on a snapshot (``benchmarks/codec.py``). Here Python walks
only the objects and the lists that hold strings or containers. Strings are written as they are where every
character is printable ASCII but ``"`` and ``\\``, else by the function the encoder itself uses
(``json.encoder.encode_basestring_ascii``), and a list of numbers, booleans and nulls
(CPU lists, matrix rows: most of a snapshot) is joined in one call. NaN and infinities are refused
(ValueError), as there; so is anything else ``json.dumps`` refuses. Object keys must be strings (json.dumps
would turn numbers into strings; a snapshot has none). tests/test_codec_text.py holds the two to the same
bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import Any

# Characters a JSON string holds as they are (json.encoder's ESCAPE_ASCII leaves them): printable ASCII but the
# quote and the backslash. A string of them alone is written without the json module, whose import (its
# decoder and scanner, six regular expressions compiled) cost every ``discover --format json`` about 5M
# instructions (measured, valgrind) for the few strings that need escaping.
_PLAIN = frozenset(map(chr, range(0x20, 0x7F))) - {'"', "\\"}


def _string(s: str) -> str:
    if _PLAIN.issuperset(s):
        return f'"{s}"'
    from json.encoder import encode_basestring_ascii  # what json.dumps writes a string with

    return encode_basestring_ascii(s)


def _compact(o: Any) -> str:
    """What json.dumps writes compactly for ``o`` (an int subclass), or its ValueError (NaN, an infinity)."""
    import json

    return json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode(o)


def _float(f: float) -> str:
    return float.__repr__(f) if math.isfinite(f) else _compact(f)  # _compact refuses it


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
        if kinds == _FLOATS and math.isfinite(sum(o)):  # matrix rows; a NaN or an infinity makes the sum one
            return "[" + inner + ("," + inner).join(map(float.__repr__, o)) + newline + "]"
        if kinds <= _FLAT:
            return "[" + inner + ("," + inner).join([_SCALAR[type(v)](v) for v in o]) + newline + "]"
        return "[" + inner + ("," + inner).join(_value(v, inner, step) for v in o) + newline + "]"
    return _compact(o)  # whatever else the C encoder takes (an int subclass) or refuses
