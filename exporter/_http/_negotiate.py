"""HTTP header rules the API follows (pure): content type for ``Accept``, gzip for ``Accept-Encoding``,
and ``If-None-Match`` against an entity tag.

RFC 9110: a coding with ``q=0`` is refused (12.5.3); ``If-None-Match`` compares weakly, so ``W/"x"``
matches ``"x"`` (13.1.2, 8.8.3.2), and ``*`` matches any current representation.
"""

from __future__ import annotations

import re

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE; etagc excludes DQUOTE but allows commas, so a list is read
# tag by tag, not split at commas (empty list elements and odd spacing are allowed by RFC 9110 5.6.1).
_OPAQUE = re.compile(r'(?:W/)?("[^"]*")')


def _media_types(accept: str) -> list[str]:
    return [part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()]


def negotiate_metrics(accept: str | None) -> str | None:
    """The content type for an ``Accept`` header; None when it accepts nothing we serve (406)."""
    if not accept:
        return TEXT
    types = _media_types(accept)
    if "application/openmetrics-text" in types:
        return OPENMETRICS
    if any(t in ("text/plain", "text/*", "*/*") for t in types):
        return TEXT
    return None


def _quality(params: list[str]) -> float:
    for p in params:
        name, _, value = p.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0  # an unreadable weight: do not guess the client wants it
    return 1.0


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when ``Accept-Encoding`` names gzip (or ``x-gzip``, or ``*``) with a weight above 0."""
    if not accept_encoding:
        return False
    weights: dict[str, float] = {}
    for part in accept_encoding.split(","):
        coding, *params = part.split(";")
        coding = coding.strip().lower()
        if coding:
            weights[coding] = _quality(params)
    for name in ("gzip", "x-gzip"):
        if name in weights:
            return weights[name] > 0
    return weights.get("*", 0.0) > 0


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Weak comparison of ``If-None-Match`` with our entity tag (itself strong, ``"hex"``)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    ours = etag.removeprefix("W/")
    return any(opaque == ours for opaque in _OPAQUE.findall(if_none_match))
