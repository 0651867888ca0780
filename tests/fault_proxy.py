"""A fault-injecting HTTP(S) proxy in front of an API server (kmock, or the real kube-apiserver of the
``apiserver`` tier), one fault at a time, counting every request it receives.

Faults (``mode``):

  ``none``     every request forwarded; watches streamed through as they come
  ``500``      every request answered 500 (a Status, as the server sends one)
  ``429``      every request answered 429 with ``Retry-After: 30``
  ``refuse``   nothing listens on the port: connections are refused
  ``410``      every watch answered 200, then an ``ERROR`` event with a 410 Status, then the end of the stream
               (what a real server sends when the resourceVersion asked for is too old); the rest forwarded
  ``bookmark-410``  the same, with a ``BOOKMARK`` (at the resourceVersion asked for) before the ``ERROR``
  ``silent``   every watch open and every new one goes silent: the server's events are read and dropped, the
               connection kept (a half-open connection, a proxy that stopped forwarding); it stays silent after
               the fault ends, until the client gives it up; the rest forwarded

Changing the mode closes every connection (the way a restarting server or load balancer does), so clients
meet the new mode on their next request; ``silent`` closes none, going in or out. With ``certfile``/``keyfile``
it speaks TLS (the test server's own certificate: it serves 127.0.0.1 too). Every thread and socket it starts,
:meth:`close` ends.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

MODES = ("none", "500", "429", "refuse", "410", "bookmark-410", "silent")
_HOP = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "accept-encoding", "content-length"})


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: FaultProxy

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection the proxy dropped (a mode change) or the client closed: nothing to report


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.proxy._opened(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.proxy._closed(self.connection)

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        proxy = self.server.proxy
        proxy._count()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = proxy.mode
        watch = "watch=true" in self.path or "watch=1" in self.path
        if mode == "500":
            self._send(500, _status(500, "InternalError", "injected fault"))
        elif mode == "429":
            self._send(429, _status(429, "TooManyRequests", "injected fault"), {"Retry-After": "30"})
        elif mode in ("410", "bookmark-410") and watch:
            self._send(200, self._expired(bookmark=mode == "bookmark-410"))
        elif watch:
            self._stream(body)
        else:
            self._forward(body)

    def _expired(self, *, bookmark: bool) -> bytes:
        error = {"type": "ERROR", "object": json.loads(_status(410, "Expired", "too old resource version (injected)"))}
        lines = [error]
        if bookmark:
            rv = parse_qs(urlsplit(self.path).query).get("resourceVersion", ["1"])[0]
            lines.insert(0, {"type": "BOOKMARK", "object": {"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
                                                            "metadata": {"resourceVersion": rv}}})
        return "".join(json.dumps(line) + "\n" for line in lines).encode()

    def _headers(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k.lower() not in _HOP}

    def _forward(self, body: bytes) -> None:
        try:
            resp = self.server.proxy.http.request(self.command, self.path, content=body, headers=self._headers())
        except httpx.HTTPError as exc:
            self._send(502, _status(502, "BadGateway", str(exc)))
            return
        keep = {k: v for k, v in resp.headers.items() if k.lower() in ("content-type", "retry-after", "audit-id")}
        self._send(resp.status_code, resp.content, keep)

    def _stream(self, body: bytes) -> None:
        proxy = self.server.proxy
        try:
            with proxy.http.stream(self.command, self.path, content=body, headers=self._headers()) as resp:
                self.send_response(resp.status_code)
                self.send_header("Content-Type", resp.headers.get("content-type", "application/json"))
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                with proxy._streaming(resp):
                    for chunk in resp.iter_raw():
                        if id(resp) in proxy._silenced:
                            continue
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
        except (httpx.HTTPError, OSError, ValueError):
            self.close_connection = True


class FaultProxy:
    def __init__(self, upstream: str, *, verify: ssl.SSLContext | bool = True, certfile: str | None = None,
                 keyfile: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.http = httpx.Client(base_url=upstream, verify=verify, headers=headers or {},
                                 timeout=httpx.Timeout(30.0, read=None),
                                 limits=httpx.Limits(max_connections=None, max_keepalive_connections=400))
        self._tls: ssl.SSLContext | None = None
        if certfile:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(certfile, keyfile)
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._streams: set[Any] = set()
        self._silenced: set[int] = set()  # streams whose events are dropped (``silent``)
        self.received: list[float] = []  # time.monotonic() of every request received
        self._mode = "none"
        self._port = 0
        self._server: _Server | None = None
        self._listen()

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self._port}"

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"fault {mode!r}: one of {', '.join(MODES)}")
        if mode == self._mode:
            return
        was, self._mode = self._mode, mode
        if was == "refuse":
            self._listen()
        elif mode == "refuse":
            self._unlisten()
        if mode == "silent":
            with self._lock:
                self._silenced |= {id(r) for r in self._streams}
        elif was != "silent":
            self._drop()

    @property
    def streams(self) -> int:
        """How many watch streams are open through the proxy now."""
        with self._lock:
            return len(self._streams)

    def _listen(self) -> None:
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.proxy = self
        if self._tls is not None:
            server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _unlisten(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _drop(self) -> None:
        """Closes every connection and every stream from upstream: clients meet the new mode at once."""
        with self._lock:
            conns, streams = list(self._conns), list(self._streams)
        for resp in streams:
            with contextlib.suppress(Exception):
                resp.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _count(self) -> None:
        with self._lock:
            self.received.append(time.monotonic())

    def _opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)

    def _closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)

    @contextlib.contextmanager
    def _streaming(self, resp: Any) -> Any:
        with self._lock:
            self._streams.add(resp)
            if self._mode == "silent":
                self._silenced.add(id(resp))
        try:
            yield
        finally:
            with self._lock:
                self._streams.discard(resp)
                self._silenced.discard(id(resp))

    def close(self) -> None:
        self._unlisten()
        self._drop()
        self.http.close()
