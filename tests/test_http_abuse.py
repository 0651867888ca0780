"""The HTTP server under abuse, with real clients over loopback: the agent's app (or a tiny ASGI app that holds
requests open) served by the real uvicorn with topolink's limits, in a thread of the test process. Clients are
raw sockets and http.client. Every wait is bounded; timeouts are set short so each test takes seconds."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import http.client
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import Receive, Scope, Send

import topology as t
from exporter import (
    HttpConfig,
    HttpLimits,
    HttpStats,
    MetricsCache,
    View,
    add_http_args,
    create_app,
    http_server,
    limits_from_args,
    listen,
)
from tests.serve_machines import discover_profile


def open_file_room(wanted: int) -> int:
    """Raise this process's soft open-file limit towards ``wanted`` (client and server sockets both live here);
    the room there is, less a margin for everything else."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft - 64


class Running:
    def __init__(self, app: Callable[[Scope, Receive, Send], object], limits: HttpLimits,
                 stats: HttpStats | None = None) -> None:
        self.stats = stats or HttpStats()
        self.sock = listen("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.server = http_server(app, limits, self.stats)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        assert not self.thread.is_alive()

    def get(self, path: str, headers: dict[str, str] | None = None, method: str = "GET"
            ) -> tuple[int, dict[str, str], bytes]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            c.request(method, path, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> View:
    snap = discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))[0]
    return View(snapshot=snap, generation=1, structure_hash=t.structure_hash(snap))


@pytest.fixture
def served(view: View) -> Iterator[Running]:
    """The agent's app with a 1 s head timeout, a 1 s keep-alive and a cap of 64 connections."""
    stats = HttpStats()  # the counters /metrics shows are the server's
    app = create_app(lambda: view, MetricsCache(lambda: view, stats), HttpConfig())
    running = Running(app, HttpLimits(header_timeout_s=1.0, keep_alive_s=1, max_connections=64), stats)
    yield running
    running.stop()


def closed_by_server(s: socket.socket, wait: float) -> bytes | None:
    """What the server sent before closing within ``wait`` seconds, or None while it stays open."""
    s.settimeout(wait)
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return got


def closed_counts(body: bytes) -> dict[str, float]:
    return {s.labels["reason"]: s.value for f in text_string_to_metric_families(body.decode())
            for s in f.samples if s.name == "topolink_http_connections_closed_total"}


def test_many_slow_clients_are_cut_off_and_metrics_still_answers(served: Running) -> None:
    room = open_file_room(4096)
    n = min(600, room // 2)  # idle and half-sent heads, over the cap of 64: the oldest are evicted for newcomers
    slow = [served.connect() for _ in range(n)]
    for i, s in enumerate(slow):
        if i % 2:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0 = time.monotonic()
    for _ in range(20):
        status, _, body = served.get("/metrics")
        assert status == 200 and b"topolink_gpu_info" in body
    assert time.monotonic() - t0 < 5
    counts = closed_counts(served.get("/metrics")[2])
    assert counts["evicted"] >= n - 64 and counts["refused"] == 0
    # Those still held are closed at the header timeout; a half-sent head is told why (408).
    answers = [closed_by_server(s, 3.0) for s in slow]
    assert all(a is not None for a in answers)
    assert any(a and a.startswith(b"HTTP/1.1 408 ") for a in answers)
    assert closed_counts(served.get("/metrics")[2])["header_timeout"] >= 1
    for s in slow:
        s.close()


def test_a_head_sent_byte_by_byte_is_cut_at_the_header_timeout(served: Running) -> None:
    """Slowloris: each byte resets no timer; the whole head must arrive within the 1 s timeout."""
    s = served.connect()
    t0 = time.monotonic()
    answer = None
    for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 100:  # 14 s at this pace
        try:
            s.send(bytes([byte]))
        except OSError:
            break
        answer = closed_by_server(s, 0.02)
        if answer is not None:
            break
    assert answer is not None and answer.startswith(b"HTTP/1.1 408 "), answer
    assert 0.9 < time.monotonic() - t0 < 3
    s.close()


def test_keep_alive_idle_connection_is_closed(served: Running) -> None:
    c = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    c.request("GET", "/healthz")
    assert c.getresponse().read() == b"ok\n"
    assert c.sock is not None
    assert closed_by_server(c.sock, 3.0) == b""  # after the 1 s keep-alive, nothing more, then closed
    c.close()


def test_oversized_heads_get_431_and_the_server_goes_on(served: Running) -> None:
    for size in (17 * 1024, 1_000_000):
        s = served.connect()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # answered and closed mid-megabyte
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
        answer = closed_by_server(s, 3.0)
        assert answer is not None and answer.startswith(b"HTTP/1.1 431 "), (size, answer)
        s.close()
    status, _, _ = served.get("/metrics", headers={"X-Fits": "a" * 15_000})
    assert status == 200
    assert closed_counts(served.get("/metrics")[2])["header_too_large"] == 2


def test_head_gzip_and_a_weak_etag_through_the_real_server(served: Running) -> None:
    status, headers, body = served.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip" and b"topolink_gpu_info" in gzip.decompress(body)
    for path in ("/metrics", "/healthz", "/readyz", "/v1/topology"):
        got = served.get(path)
        head = served.get(path, method="HEAD")
        assert head[0] == got[0] == 200 and head[2] == b"" and head[1]["content-length"] == str(len(got[2])), path
    etag = served.get("/v1/topology")[1]["etag"]
    assert served.get("/v1/topology", headers={"If-None-Match": f"W/{etag}"})[0] == 304


class HoldOpen:
    """An ASGI app whose requests wait for ``release``: connections with a request in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.inflight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.inflight += 1
        if scope["path"] == "/hold":
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"3")]})
        await send({"type": "http.response.body", "body": b"ok\n"})


def test_at_the_cap_with_every_request_in_flight_a_newcomer_gets_503_then_room_again() -> None:
    app = HoldOpen()
    running = Running(app, HttpLimits(header_timeout_s=5.0, keep_alive_s=5, max_connections=2))
    try:
        held = [running.connect() for _ in range(2)]
        for s in held:
            s.sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.monotonic() + 5
        while app.inflight < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        third = running.connect()
        answer = closed_by_server(third, 3.0)
        assert answer is not None and answer.startswith(b"HTTP/1.1 503 "), answer
        assert running.stats.closed == {"header_timeout": 0, "evicted": 0, "refused": 1, "header_too_large": 0}
        for s in held:
            s.close()  # their requests are abandoned: the connections no longer count
        deadline = time.monotonic() + 5
        while True:
            try:
                if running.get("/fast")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no room after the held connections closed"
            time.sleep(0.05)
    finally:
        running.stop()


def test_limits_from_flags_and_environment() -> None:
    parser = argparse.ArgumentParser()
    add_http_args(parser, {"TOPOLINK_HTTP_MAX_CONNECTIONS": "7"})
    limits = limits_from_args(parser.parse_args(["--http-header-timeout", "2.5"]))
    assert (limits.max_connections, limits.header_timeout_s, limits.keep_alive_s) == (7, 2.5, HttpLimits().keep_alive_s)
    for bad in (["--http-header-timeout", "0"], ["--http-keep-alive", "0"], ["--http-max-connections", "0"]):
        with pytest.raises(SystemExit) as stop:  # the settings' rules refuse them as they are parsed
            parser.parse_args(bad)
        assert stop.value.code == 2


def test_the_cap_fits_the_open_file_limit() -> None:
    """A hard limit of 300 descriptors leaves room for 300 - 128 connections; a higher one is raised to."""
    code = ("import resource; from exporter import connection_cap; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, {hard})); "
            "print(connection_cap(1024), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    low = subprocess.run([sys.executable, "-c", code.format(hard=300)], capture_output=True, text=True, check=True)
    assert low.stdout.split() == ["172", "300"]
    high = subprocess.run([sys.executable, "-c", code.format(hard=4096)], capture_output=True, text=True, check=True)
    assert high.stdout.split() == ["1024", str(1024 + 128)]
