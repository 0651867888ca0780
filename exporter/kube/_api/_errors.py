"""The publishing boundary's errors: Kubernetes client errors are mapped here once, chained ``from``.

    TopolinkError
    └── PublishError            a write or read against the API server (or the feature file) failed
        ├── InvalidObject       an object we built breaks an API rule (never sent), or a status the mapping
        │                       does not know (400, 405, 415, 422 ...: ``status`` says which)
        ├── Forbidden           401 / 403: RBAC or admission said no
        ├── NotFound            404
        ├── Conflict            409 after the retries
        ├── Expired             410 Gone: a watch's resourceVersion is older than the server keeps (list again)
        ├── Unavailable         429, 5xx, refused connections, timeouts after the retries
        │   ├── BackingOff      not sent: the server kept failing and the next try is not due yet
        │   └── Silent          a watch stream with nothing (no event, no bookmark) for too long: dead
        └── BadConfig           no usable kubeconfig or in-cluster configuration: nothing was sent
"""

from __future__ import annotations

from topology import TopolinkError


class PublishError(TopolinkError):
    retry_after: float | None = None  # the server's Retry-After, where it sent one
    status: int | None = None  # the HTTP status (or a Status object's code) the server answered with, if any
    retry_in: float | None = None  # the client's own backoff after this failure: no request is sent sooner


class InvalidObject(PublishError):
    pass


class Forbidden(PublishError):
    pass


class NotFound(PublishError):
    pass


class Conflict(PublishError):
    pass


class Unavailable(PublishError):
    pass


class BackingOff(Unavailable):
    retry_in: float

    def __init__(self, message: str, retry_in: float) -> None:
        super().__init__(message)
        self.retry_in = retry_in


class Silent(Unavailable):
    pass


class Expired(PublishError):
    pass


class BadConfig(PublishError):
    pass


def retry_floor(exc: BaseException) -> float | None:
    """How long the server (its Retry-After) or the client's own backoff (after a failed try, or a request not
    sent) asked to wait before the next try; None where neither said. A sync requeued sooner would only be
    refused unsent by the client."""
    if not isinstance(exc, PublishError) or (exc.retry_after is None and exc.retry_in is None):
        return None
    return max(exc.retry_in or 0.0, exc.retry_after or 0.0)
