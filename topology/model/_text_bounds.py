"""Text from outside (sysfs, NVML, a snapshot: node, NIC, device and product names, problem messages that
quote them) made safe to show, at each display boundary: the data keeps the original, only its display is
escaped.

``shown`` writes every character that is not printable (controls: NUL, BEL, ESC of an ANSI sequence, tab,
newline, carriage return, DEL, the C1 range; formats: the bidi overrides and isolates, zero-width ones; line
and paragraph separators; unassigned code points; lone surrogates) as a Python-style escape (``\\t``,
``\\x1b``, ``\\u202e``), and a backslash as two, so the escaped text is never ambiguous and cannot break a
tab-separated row, start a new line, move the cursor or reorder what follows. A ``limit`` bounds what one
value may take of a row: past it the text is cut at a whole character or escape and ``...`` ends it. What is
printable already (letters of any script, spaces, punctuation) is left as it is.

Each output form escapes its own syntax after this: DOT quotes and backslashes, HTML and SVG ``<&>"'``. JSON
needs none of it: ``json.dumps`` escapes every control character (and, with ``ensure_ascii``, every non-ASCII
one), and a reader gets the original string back.
"""

from __future__ import annotations

NAME_LIMIT = 64  # a name in a table cell: longer than any real node, device or product name
TEXT_LIMIT = 1024  # a message on its own line (a problem, a reason, a log field)
CUT = "..."

_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: object, limit: int | None = NAME_LIMIT) -> str:
    """``text`` (``str()`` of anything else) as it may be shown on a terminal, in a table row or a page:
    non-printable characters and backslashes escaped, at most ``limit`` characters (None: no bound, for ids
    that must stay distinct)."""
    s = text if isinstance(text, str) else str(text)
    if (limit is None or len(s) <= limit) and s.isprintable() and "\\" not in s:
        return s  # the common case: nothing to do
    pieces: list[str] = []
    used = 0
    for ch in s:
        piece = _escape(ch)
        pieces.append(piece)
        used += len(piece)
        if limit is not None and used > limit:  # the rest is cut anyway: no need to escape it
            break
    if limit is None or used <= limit:
        return "".join(pieces)
    while pieces and used + len(CUT) > limit:
        used -= len(pieces.pop())
    return "".join(pieces) + CUT


def shown_text(text: object) -> str:
    """A message, a reason or a detail: escaped like a name, bounded at :data:`TEXT_LIMIT`."""
    return shown(text, TEXT_LIMIT)
