"""The HTTP server for the API: uvicorn's h11 protocol, bounded against slow and hostile clients.

- A request head (request line and headers) must arrive within ``header_timeout_s`` of the connection, or of
  its first byte after a keep-alive pause; otherwise the connection is closed, with a 408 when part of a head
  came. uvicorn has no such timer: a client that connects and sends nothing is held for ever.
- An idle keep-alive connection is closed after ``keep_alive_s`` (uvicorn's own timer).
- At most ``max_connections`` connections. One more evicts the connection that has waited longest for a
  request head (a slow client, or an idle keep-alive one); a request being answered is never cut, and a
  newcomer is refused with 503 only when every connection has one in flight. uvicorn's ``limit_concurrency``
  is not used: it counts idle connections too and answers the next request 503, so 1,000 clients that send
  nothing would lock Prometheus out.
- A head (request line and headers) over ``max_header_bytes`` gets 431, counted before h11 parses it: h11
  parses a head of any size that arrives whole, and uvicorn answers h11's own size error with 400.
"""

from __future__ import annotations

import asyncio
import resource
import socket
from http import HTTPStatus
from typing import Any, ClassVar

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import Server

from .._core._http_limits import HttpLimits, HttpStats
from ._asgi import ASGIApp

_RESERVED_FDS = 128  # discovery, NVML, probe pipes, state files, Graphviz, the API client: never connections


def listen(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket, bound here so that a port in use is the caller's clear error (OSError), not a
    server thread that dies at start."""
    # An ASCII name goes as bytes: getaddrinfo runs a str through the idna codec, which loads stringprep and
    # unicodedata (0.4 MiB resident) for a name that is an address or plain ASCII anyway.
    node = (host.encode("ascii") if host.isascii() else host) if host else None
    family, kind, proto, _, address = socket.getaddrinfo(node, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart rebinds past TIME_WAIT
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def connection_cap(wanted: int) -> int:
    """``wanted``, or as many connections as the open-file limit leaves room for. The soft limit is raised
    towards the hard one first, as far as ``wanted`` needs (Go's runtime raises it the same way)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + _RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - _RESERVED_FDS))


def _plain(status: int, text: str) -> bytes:
    """A whole response written before (or without) a parsed request: h11 cannot frame one then."""
    body = text.encode() + b"\n"
    return (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def _head_size(pending: bytes) -> int:
    """Bytes of the request head at the start of ``pending``: up to its blank line, or all when none yet."""
    ends = [i + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (i := pending.find(mark)) >= 0]
    return min(ends) if ends else len(pending)


class _Guard:
    """What a server's connections share: the limits, the counters, and the connections waiting for a request
    head, oldest wait first (a dict keeps insertion order)."""

    def __init__(self, limits: HttpLimits, stats: HttpStats) -> None:
        self.limits, self.stats = limits, stats
        self.waiting: dict[GuardedH11, None] = {}


class GuardedH11(H11Protocol):
    guard: ClassVar[_Guard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        full = len(self.connections) >= self.guard.limits.max_connections
        super().connection_made(transport)
        if full and not self._evict_one():
            self.guard.stats.count("refused")
            transport.write(_plain(503, "too many connections with a request in flight"))
            transport.close()
            return
        self._wait_for_head(timed=True)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            if self._head_timer is None:
                self._wait_for_head(timed=True)  # the first byte of a head after a keep-alive pause
            if _head_size(self.conn.trailing_data[0] + data) > self.guard.limits.max_header_bytes:
                self.guard.stats.count("header_too_large")
                self._done_waiting()
                self.transport.write(_plain(431, "request line and headers over "
                                                 f"{self.guard.limits.max_header_bytes} bytes"))
                self.transport.close()
                return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._done_waiting()  # a head arrived: a request is in flight

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._wait_for_head(timed=False)  # keep-alive: uvicorn's idle timer runs; evictable meanwhile

    def connection_lost(self, exc: Exception | None) -> None:
        self._done_waiting()
        super().connection_lost(exc)

    def _wait_for_head(self, *, timed: bool) -> None:
        self.guard.waiting.setdefault(self, None)
        if timed and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.guard.limits.header_timeout_s, self._head_timeout)

    def _done_waiting(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.guard.stats.count("header_timeout")
        if self.conn.trailing_data[0]:  # part of a head came: say why before closing
            self.transport.write(_plain(408, "request head not received in time"))
        self._done_waiting()
        self.transport.close()

    def _evict_one(self) -> bool:
        victim = next(iter(self.guard.waiting), None)
        if victim is None:
            return False
        victim._done_waiting()
        self.guard.stats.count("evicted")
        victim.transport.close()
        self.connections.discard(victim)  # counted out now: its connection_lost comes on a later loop turn
        return True


def http_server(app: ASGIApp, limits: HttpLimits, stats: HttpStats) -> Server:
    """A uvicorn server for ``app`` with these limits; run it with ``server.run(sockets=[listen(...)])``."""
    protocol = type("TopolinkH11", (GuardedH11,), {"guard": _Guard(limits, stats)})
    config = Config(app, http=protocol, ws="none", lifespan="off", log_config=None, access_log=False,
                    server_header=False, timeout_keep_alive=limits.keep_alive_s, timeout_graceful_shutdown=1,
                    h11_max_incomplete_event_size=limits.max_header_bytes)
    return Server(config)
