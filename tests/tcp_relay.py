"""A TCP relay that keeps what passed each way: the bytes a real client sent and got, as on the wire."""

from __future__ import annotations

import contextlib
import socket
import threading


class Recorder:
    """A TCP relay between Prometheus and the agent that keeps the first bytes of each direction: what was asked
    for and what came back, as sent on the wire."""

    def __init__(self, upstream: str) -> None:
        self.asked, self.answered = bytearray(), bytearray()
        host, port = upstream.rsplit(":", 1)
        self._up = (host, int(port))
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._sock.accept()
            except OSError:
                return
            up = socket.create_connection(self._up)
            threading.Thread(target=self._pump, args=(down, up, self.asked), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, self.answered), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, seen: bytearray) -> None:
        try:
            while data := src.recv(65536):
                if len(seen) < 1 << 20:
                    seen += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._sock.close()


class CountingRelay:
    """A TCP relay that counts what crosses it each way (TLS records and all: the bytes on the wire) and the
    connections it was asked for."""

    def __init__(self, upstream: str) -> None:
        self.up = self.down = self.connections = 0
        self._lock = threading.Lock()
        host, port = upstream.rsplit(":", 1)
        self._up = (host, int(port))
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

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
                with self._lock:
                    setattr(self, way, getattr(self, way) + len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def totals(self) -> tuple[int, int, int]:
        """(bytes up, bytes down, connections) so far."""
        with self._lock:
            return self.up, self.down, self.connections

    def close(self) -> None:
        self._sock.close()
