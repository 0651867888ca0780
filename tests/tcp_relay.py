"""A TCP relay that keeps what passed each way: the bytes a real client sent and got, as on the wire."""

from __future__ import annotations

import contextlib
import socket
import threading


class _Relay:
    """A TCP relay on a free loopback port to ``upstream``; ``_seen`` is told of every chunk that crosses it,
    ``"up"`` (asked for) or ``"down"`` (answered), before it is passed on."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._up = (host, int(port))
        self._lock = threading.Lock()
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _seen(self, way: str, data: bytes) -> None:
        raise NotImplementedError

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            up = socket.create_connection(self._up)
            threading.Thread(target=self._pump, args=(down, up, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, "down"), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while data := src.recv(65536):
                self._seen(way, data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._sock.close()


class Recorder(_Relay):
    """A TCP relay between Prometheus and the agent that keeps the first bytes of each direction: what was asked
    for and what came back, as sent on the wire."""

    def __init__(self, upstream: str) -> None:
        self.asked, self.answered = bytearray(), bytearray()
        super().__init__(upstream)

    def _seen(self, way: str, data: bytes) -> None:
        seen = self.asked if way == "up" else self.answered
        if len(seen) < 1 << 20:
            seen += data


class CountingRelay(_Relay):
    """A TCP relay that counts what crosses it each way (TLS records and all: the bytes on the wire) and the
    connections it was asked for."""

    def __init__(self, upstream: str) -> None:
        self.up = self.down = 0
        super().__init__(upstream)

    def _seen(self, way: str, data: bytes) -> None:
        with self._lock:
            setattr(self, way, getattr(self, way) + len(data))

    def totals(self) -> tuple[int, int, int]:
        """(bytes up, bytes down, connections) so far."""
        with self._lock:
            return self.up, self.down, self.connections
