"""List pages over the client's page transport (``http.client`` under httpx's client): whole bodies of every
framing (a length, chunks, gzip), one kept-alive connection, the auth and headers httpx sets, and each failure
mapped as httpx's own transport maps it (a cut-short page tried again at once, a refusal and a silent server
reported). Against a loopback server speaking raw HTTP/1.1, so that each framing and failure is exact."""

from __future__ import annotations

import gzip
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporter.kube import Backoff, LightkubeApi, Unavailable

Answer = Callable[[int, bytes], bytes | None]  # (request number, request head) -> what to send; None: close
CLOSE = b"<close>"  # what an answer ends with to close the connection once sent


class _Server:
    """Answers each request on each connection with ``answer(n, head)``; records connections and heads."""

    def __init__(self, answer: Answer) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.heads: list[bytes] = []
        self.connections = 0
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        return
                    data += got
                head, data = data.split(b"\r\n\r\n", 1)
                self.heads.append(head)
                reply = self._answer(len(self.heads) - 1, head)
                if reply is None:
                    return
                conn.sendall(reply.removesuffix(CLOSE))
                if reply.endswith(CLOSE):
                    return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], _Server]]:
    servers: list[_Server] = []

    def start(answer: Answer) -> _Server:
        servers.append(_Server(answer))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _page(n: int) -> bytes:
    return json.dumps({"items": [{"n": n, "pad": "x" * 300_000}], "metadata": {"continue": str(n)}}).encode()


def _length(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" % (
        extra, len(body), body)


def _chunked(body: bytes) -> bytes:
    parts = [body[i:i + 70_000] for i in range(0, len(body), 70_000)]
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n")


def _api(url: str, tmp_path: Path, sleeps: list[float], *, timeout: float = 10.0) -> LightkubeApi:
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "k",
        "clusters": [{"name": "k", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t0k"}}],
        "contexts": [{"name": "k", "context": {"cluster": "k", "user": "u"}}]}))
    return LightkubeApi.connect(kubeconfig=str(config), timeout=timeout,
                                backoff=Backoff(sleep=sleeps.append, rng=random.Random(1)))


def test_pages_of_every_framing_come_whole_over_one_connection(serve: Callable[[Answer], _Server],
                                                               tmp_path: Path) -> None:
    def zipped(body: bytes) -> bytes:
        return _length(gzip.compress(body), b"Content-Encoding: gzip\r\n")

    framings = [_length, _chunked, zipped]
    server = serve(lambda n, head: framings[n % 3](_page(n)))
    api = _api(server.url, tmp_path, [])
    got = [api.get_page("/apis/x/v1/things", {"limit": "2", "continue": f"c{n}"}, "application/json;as=Partial")
           for n in range(4)]
    assert got == [_page(n) for n in range(4)]
    assert server.connections == 1  # kept alive across the pages
    first = server.heads[0].decode().split("\r\n")
    assert first[0] == "GET /apis/x/v1/things?limit=2&continue=c0 HTTP/1.1"
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in first[1:])}
    assert headers["authorization"] == "Bearer t0k" and headers["user-agent"].startswith("topolink/")
    assert headers["accept"] == "application/json;as=Partial" and headers["host"] == server.url.removeprefix("http://")


def test_a_page_cut_short_is_tried_again_at_once(serve: Callable[[Answer], _Server], tmp_path: Path) -> None:
    """A body shorter than its length (the server closed under it) is a broken read, which a GET tries again
    (``IsProbableEOF``); so is a kept-alive connection closed before any answer."""
    cut = _length(_page(0))[:100_000] + CLOSE
    server = serve(lambda n, head: {0: cut, 1: _length(_page(1)), 2: None}.get(n, _length(_page(n))))
    sleeps: list[float] = []
    api = _api(server.url, tmp_path, sleeps)
    assert api.get_page("/api/v1/nodes", {}) == _page(1)
    assert api.get_page("/api/v1/nodes", {}) == _page(3)  # the kept-alive one closed without a word: a new one
    assert len(server.heads) == 4 and server.connections == 3 and len(sleeps) == 2


def test_a_refused_connection_and_a_silent_server_are_reported(serve: Callable[[Answer], _Server],
                                                               tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unavailable, match=r"ConnectError: .*Connection refused"):
        _api(f"http://127.0.0.1:{port}", tmp_path, []).get_page("/api/v1/nodes", {})
    quiet = threading.Event()
    server = serve(lambda n, head: b"" if quiet.wait(5) else None)  # answers nothing until the test ends
    try:
        with pytest.raises(Unavailable, match="ReadTimeout"):
            _api(server.url, tmp_path, [], timeout=0.3).get_page("/api/v1/nodes", {})
    finally:
        quiet.set()
