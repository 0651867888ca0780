"""Every lightkube/httpx error of a request, mapped once to ours: :class:`~.._api._errors.PublishError`s, and
:class:`~.._api._retry.Retryable` for a server failure (with whether the call may try it again at once)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .._api._errors import Unavailable
from .._api._retry import RETRYABLE, Retryable, retry_after
from ._watch_stream import error_for


@contextmanager
def mapped(what: str) -> Iterator[None]:
    import httpx2
    from lightkube import ApiError

    try:
        yield
    except httpx2.HTTPStatusError as exc:  # lightkube's ApiError, or a body it could not read as a Status
        code = exc.response.status_code
        status = exc.status if isinstance(exc, ApiError) else None
        after = retry_after(exc.response.headers.get("Retry-After"))  # kept on the error: the sync's requeue floor
        err = error_for(what, code, (status.message or "") if status else "", after)
        if code in RETRYABLE:
            raise Retryable(err, after) from exc
        raise err from exc
    except httpx2.TransportError as exc:
        err = Unavailable(f"{what}: {type(exc).__name__}: {exc}")
        raise Retryable(err, again=_reset_read(exc)) from exc


def _reset_read(exc: Exception) -> bool:
    """A GET whose connection was reset or closed under it (a kept-alive one the server had closed): client-go's
    request tries it again at once (``IsConnectionReset``, ``IsProbableEOF``); a write it never does."""
    import httpx2

    if not isinstance(exc, httpx2.RemoteProtocolError | httpx2.ReadError):
        return False
    try:
        return exc.request.method == "GET"
    except RuntimeError:  # no request attached: not one of ours
        return False
