"""A watch over HTTP, read line by line: our own loop rather than lightkube's, because every way a watch ends
has to reach the caller as a value it can act on.

A watch ends in one of four ways: the server closes it at ``timeoutSeconds`` (the generator returns: open it
again from the last resourceVersion); an HTTP error status before the stream starts; an ``ERROR`` event inside
an HTTP 200 stream (a Status object, most often 410 Gone when the resourceVersion asked for is older than
the server keeps, as after the API server restarts); a broken connection. The last three raise a
:class:`~._errors.PublishError` subclass, 410 as :class:`~._errors.Expired`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .._api._api import SILENT_S, Kind, Obj
from .._api._errors import Conflict, Expired, Forbidden, InvalidObject, NotFound, PublishError, Silent, Unavailable
from .._api._retry import RETRYABLE, retry_after


def error_for(what: str, code: int, message: str = "", retry_after: float | None = None) -> PublishError:
    """The error for an HTTP status, or a Status object's code (``retry_after``: the server's Retry-After)."""
    cls: type[PublishError] = (
        Forbidden if code in (401, 403) else NotFound if code == 404 else Conflict if code == 409 else
        Expired if code == 410 else Unavailable if code in RETRYABLE else InvalidObject)
    err = cls(f"{what}: {code} {message}".rstrip())
    err.retry_after, err.status = retry_after, code
    return err


def path_of(kind: Kind, namespace: str | None = None) -> str:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    return f"{base}/namespaces/{namespace}/{kind.plural}" if namespace else f"{base}/{kind.plural}"


def selector(pairs: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))


def decode_event(line: bytes | str, what: str) -> tuple[str, Obj]:
    """One line of the stream: ``(type, object)``; an ``ERROR`` event raises its Status as an error."""
    try:
        event = json.loads(line)
        typ, obj = str(event["type"]), event["object"]
    except (ValueError, KeyError, TypeError) as exc:
        raise Unavailable(f"{what}: unreadable event: {str(line)[:200]}") from exc
    if typ == "ERROR":
        status: dict[str, Any] = obj if isinstance(obj, dict) else {}
        details = status.get("details") if isinstance(status.get("details"), dict) else {}
        wait = details.get("retryAfterSeconds") if details else None
        raise error_for(what, int(status.get("code") or 500), str(status.get("message") or ""),
                        float(wait) if isinstance(wait, int | float) else None)
    return typ, dict(obj)


OPEN = "OPEN"  # the type of the first item: the server accepted the watch (no object)


def stream_events(http: Any, path: str, params: Mapping[str, str], what: str) -> Iterator[tuple[str, Obj]]:
    """``(OPEN, {})`` once the server accepted the watch, then its events until the server ends the stream."""
    import httpx2

    timeout = httpx2.Timeout(10.0, read=SILENT_S)
    opened = False
    try:
        with http.stream("GET", path, params=dict(params), timeout=timeout) as resp:
            if resp.status_code != 200:
                body = resp.read()
                try:
                    message = str(json.loads(body).get("message") or "")
                except (ValueError, AttributeError):
                    message = body[:200].decode(errors="replace")
                raise error_for(what, resp.status_code, message, retry_after(resp.headers.get("Retry-After")))
            yield OPEN, {}
            opened = True
            for line in resp.iter_lines():
                if line.strip():
                    yield decode_event(line, what)
    except httpx2.ReadTimeout as exc:
        if opened:
            raise Silent(f"{what}: nothing for {SILENT_S:.0f} s") from exc
        raise Unavailable(f"{what}: {type(exc).__name__}: {exc}") from exc
    except httpx2.TransportError as exc:
        raise Unavailable(f"{what}: {type(exc).__name__}: {exc}") from exc


def watch_timeout_s() -> int:
    """The server ends each watch after this (then it is opened again from where it stopped); spread over
    5 to 10 minutes as client-go's reflectors do, so that a fleet's agents do not reconnect together."""
    import random

    return random.randint(300, 600)


def matches(obj: Obj, labels: Mapping[str, str], fields: Mapping[str, str] | None) -> bool:
    """Whether ``obj`` carries ``labels`` and the values of ``fields`` (dotted paths): the selectors a list sent."""
    have = (obj.get("metadata") or {}).get("labels") or {}
    if any(have.get(k) != v for k, v in labels.items()):
        return False
    for path, want in (fields or {}).items():
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value != want:
            return False
    return True
