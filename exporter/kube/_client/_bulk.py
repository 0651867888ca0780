"""The httpx transport of list pages: the standard library's ``http.client`` under httpx's client.

A page of a fleet's list is megabytes (500 ResourceSlices with their managedFields: about 9 MB); httpx's own
transport reads a body in 64 KiB pieces through h11, which copies each piece several times and costs about
0.1 s of CPU per 20 MB. ``http.client`` reads a body of known length in one call into one buffer (a chunked
one chunk by chunk), at a third of the cost. httpx's client above it is unchanged: the same auth flow
(tokens, exec plugins, a 401 answered by a fresh token), base URL, timeouts and redirects; what the
transport gets is the request as httpx would send it, headers and all.

One kept-alive connection per scheme, host and port, TLS with the kubeconfig's ``ssl.SSLContext`` (its CA,
client certificate and verification); errors map to httpx's, as its own transport's do, so that the
client's mapping (``_mapped``) and retry rule see no difference. Not for streams (watches): a response is
read whole before it is returned.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2


class PageTransport(httpx2.BaseTransport):
    """Whole-body requests over ``http.client``: ``ssl_context`` for https (None: the system's defaults)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._open: dict[tuple[str, str, int, float | None], http.client.HTTPConnection] = {}

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"{url.scheme!r}: not http or https", request=request)
        timeout = request.extensions.get("timeout", {}).get("read")
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80), timeout)
        conn = self._open.pop(key, None)
        if conn is None:
            conn = self._connection(key)
            with _errors(request, conn, httpx2.ConnectTimeout, httpx2.ConnectError):
                conn.connect()
        with _errors(request, conn, httpx2.ReadTimeout, httpx2.ReadError):
            conn.putrequest(request.method, url.raw_path.decode("ascii"), skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.raw:
                conn.putheader(name.decode("latin-1"), value)
            conn.endheaders(request.read() or None)
            resp = conn.getresponse()
            body = resp.read()
        if resp.will_close:
            conn.close()
        else:
            self._open[key] = conn
        return httpx2.Response(resp.status, headers=resp.getheaders(), content=body, request=request,
                               extensions={"http_version": b"HTTP/1.1"})

    def _connection(self, key: tuple[str, str, int, float | None]) -> http.client.HTTPConnection:
        scheme, host, port, timeout = key
        if scheme == "https":
            context = self._ssl or ssl.create_default_context()
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def close(self) -> None:
        for conn in self._open.values():
            conn.close()
        self._open.clear()


@contextmanager
def _errors(request: httpx2.Request, conn: http.client.HTTPConnection, timeout: type[httpx2.TransportError],
            failed: type[httpx2.TransportError]) -> Iterator[None]:
    """``http.client``'s and the socket's errors as httpx's transport raises them (``timeout`` and ``failed``:
    its errors for this step, connecting or the exchange); the connection is closed, a later request opens
    another."""
    try:
        yield
    except BaseException as exc:
        conn.close()
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
            kind = timeout
        elif isinstance(exc, http.client.HTTPException):  # a closed kept-alive connection, a body cut short
            kind = httpx2.RemoteProtocolError
        elif isinstance(exc, OSError):  # refused, reset, no such host, TLS
            kind = failed
        else:
            raise
        raise kind(f"{type(exc).__name__}: {exc}", request=request) from exc
