"""The publishing boundary's errors: Kubernetes client errors are mapped here once, chained ``from``.

    TopolinkError
    └── PublishError            a write or read against the API server (or the feature file) failed
        ├── InvalidObject       an object we built breaks an API rule: never sent
        ├── Forbidden           401 / 403: RBAC or admission said no
        ├── NotFound            404
        ├── Conflict            409 after the retries
        └── Unavailable         429, 5xx, refused connections, timeouts after the retries
"""

from __future__ import annotations

from topology import TopolinkError


class PublishError(TopolinkError):
    pass


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
