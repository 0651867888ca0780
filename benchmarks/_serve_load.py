"""Load for benchmarks/serve.py: a pool of slow clients, paced scrapes, the resident size of a process."""

from __future__ import annotations

import errno
import http.client
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import time
from pathlib import Path
from typing import Any


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_file_room(wanted: int) -> int:
    """Raise the soft open-file limit towards ``wanted``; how many descriptors there are room for."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


class Scraper:
    """One keep-alive connection, as Prometheus holds one; gzip asked for when ``gzip`` is set."""

    def __init__(self, port: int, gzip: bool = False) -> None:
        self.port, self.headers = port, {"Accept-Encoding": "gzip"} if gzip else {}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def once(self) -> tuple[float, bytes]:
        for attempt in (0, 1):  # an idle connection the server closed is opened again, as a client does
            t0 = time.perf_counter()
            try:
                self.conn.request("GET", "/metrics", headers=self.headers)
                r = self.conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise RuntimeError(f"/metrics answered {r.status}")
                return time.perf_counter() - t0, body
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def for_seconds(self, seconds: float, pause_s: float) -> list[float]:
        times: list[float] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end or not times:
            times.append(self.once()[0])
            time.sleep(pause_s)
        return times


def quantiles_ms(times: list[float]) -> tuple[float, float, float]:
    """(p50, p99, max) in milliseconds."""
    q = statistics.quantiles(times, n=100) if len(times) > 1 else [times[0]] * 99
    return q[49] * 1e3, q[98] * 1e3, max(times) * 1e3


class SlowClients:
    """``n`` connections that never finish a request: half send nothing, half send a partial head and then one
    byte a second (slowloris). Whatever the server closes is opened again, so ``n`` stay connected. They run in
    a process of their own, so that they take no time from the scraper's interpreter."""

    def __init__(self, port: int, n: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self._counts = ctx.Array("i", 3)  # connected now, reopened so far, 1 once all were opened
        self._proc = ctx.Process(target=_pool, args=(port, n, self.stop, self._counts), daemon=True)

    def start(self) -> None:
        self._proc.start()

    def join(self, timeout: float) -> None:
        self._proc.join(timeout)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self._counts[2]:
            if time.monotonic() > deadline:
                raise SystemExit("the slow clients did not connect")
            time.sleep(0.05)

    @property
    def connected(self) -> int:
        return int(self._counts[0])

    @property
    def reopened(self) -> int:
        return int(self._counts[1])


def _pool(port: int, n: int, stop: Any, counts: Any) -> None:
    open_file_room(n + 64)
    _Pool(port, n, stop, counts).run()


class _Pool:
    def __init__(self, port: int, n: int, stop: Any, counts: Any) -> None:
        self.port, self.n, self.stop, self.counts = port, n, stop, counts
        self.reopened = 0
        self._sel = selectors.DefaultSelector()

    def _open(self, trickle: bool) -> None:
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", self.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            return
        self._sel.register(s, selectors.EVENT_READ, [trickle, False])  # [trickles, has sent the head's start]

    def run(self) -> None:
        for i in range(self.n):
            self._open(trickle=bool(i % 2))
        last_tick = 0.0
        while not self.stop.is_set():
            for key, _ in self._sel.select(timeout=0.2):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:  # closed by the server (timeout or eviction): connect again
                    self._sel.unregister(s)
                    s.close()
                    self.reopened += 1
                    self._open(trickle=key.data[0])
            now = time.monotonic()
            if now - last_tick >= 1.0:
                last_tick = now
                for key in list(self._sel.get_map().values()):
                    if key.data[0]:
                        s = key.fileobj
                        assert isinstance(s, socket.socket)
                        try:  # a fresh one gets the start of a head, an old one one more byte of it
                            s.send(b"a" if key.data[1] else b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: a")
                            key.data[1] = True
                        except OSError:
                            continue
                self.counts[0], self.counts[1], self.counts[2] = len(self._sel.get_map()), self.reopened, 1
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def slope_mib_per_hour(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per hour."""
    if len(samples) < 2:
        return float("nan")
    xs, ys = [s[0] for s in samples], [s[1] for s in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 3600 if den else float("nan")
