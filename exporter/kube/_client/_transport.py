"""The httpx transport every request of the client goes through: our User-Agent set, then handed on.

Imported inside :meth:`~._client.LightkubeApi.connect` only (it imports httpx2), so importing the client costs
nothing.
"""

from __future__ import annotations

import httpx2


class UserAgent(httpx2.BaseTransport):
    """Sets ``agent`` as the User-Agent of every request, then hands it to ``inner`` (which owns the connections:
    TLS, keep-alive)."""

    def __init__(self, inner: httpx2.BaseTransport, agent: str) -> None:
        self._inner, self._agent = inner, agent

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["User-Agent"] = self._agent
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()
