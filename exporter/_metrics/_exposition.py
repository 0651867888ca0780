"""The ``/metrics`` bytes: rendered once per view, with the server's few live counters appended per scrape.

A view changes only when the agent swaps it, so its families are built once and rendered once per format, on
the first scrape that asks for that format (about 25 ms for an 8-GPU node with every probe result; a scrape
asks for one format, so it never pays for the other), and every scrape in between copies bytes. The HTTP
counters move between views; they are rendered on their own (microseconds) and appended: families are
independent blocks in both formats, and OpenMetrics' ``# EOF`` goes last. For gzip, each view's part is
compressed once and its compressor state kept: a scrape copies that state, feeds it the live part and
finishes it, which yields one ordinary gzip stream of the whole body without compressing the view again.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import ALLOWUTF8
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from .._core._http_limits import HttpStats
from .._core._view import View
from ._metrics import HttpCollector, families

_EOF = b"# EOF\n"
_GZIP = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream


def _render(registry: CollectorRegistry, openmetrics: bool) -> bytes:
    """The registry's families; OpenMetrics without its closing ``# EOF`` (the caller appends it last)."""
    if openmetrics:  # every name is in the legacy character set (tests/test_metrics.py), which no escaping keeps as
        # is: the default (underscores) rewrites each sample's name a character at a time, 70% of a 256-GPU scrape
        body = generate_openmetrics(registry, escaping=ALLOWUTF8)  # type: ignore[no-untyped-call]
        return bytes(body).removesuffix(_EOF)
    return generate_latest(registry)


class Exposition:
    """The bodies of one scrape, in both formats (a test's and a benchmark's view of the cache)."""

    __slots__ = ("openmetrics", "text")

    def __init__(self, text: bytes, openmetrics: bytes) -> None:
        self.text, self.openmetrics = text, openmetrics


class _Compressor(Protocol):
    """What ``zlib.compressobj`` returns (zlib does not name its class publicly)."""

    def compress(self, data: bytes, /) -> bytes: ...
    def flush(self, mode: int = ..., /) -> bytes: ...
    def copy(self) -> _Compressor: ...


class _Part:
    """One view's families in one format, and its gzip compressor with all of them fed and flushed."""

    __slots__ = ("_zipped", "_zipper", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._zipper: _Compressor | None = None
        self._zipped = b""

    def gzipped(self, tail: bytes) -> bytes:
        if self._zipper is None:
            zipper = zlib.compressobj(6, zlib.DEFLATED, _GZIP)
            self._zipped = zipper.compress(self.raw) + zipper.flush(zlib.Z_SYNC_FLUSH)
            self._zipper = zipper
        finish = self._zipper.copy()
        return self._zipped + finish.compress(tail) + finish.flush()


class _Built:
    """The families of the view being rendered, built once for both formats."""

    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def collect(self) -> Iterable[Metric]:
        return self.metrics


class _ViewParts:
    """One view's families, and each format's part once a scrape has asked for it."""

    __slots__ = ("key", "metrics", "parts")

    def __init__(self, key: int, metrics: list[Metric]) -> None:
        self.key, self.metrics = key, metrics
        self.parts: dict[bool, _Part] = {}  # openmetrics -> its part


class MetricsCache:
    """The agent's own registries: the view's families (built once per view, rendered once per view and
    format) and, when given, the HTTP server's counters (rendered per scrape)."""

    def __init__(self, current: Callable[[], View | None], http: HttpStats | None = None) -> None:
        self._current = current
        self._built = _Built()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self._built)
        self._live: CollectorRegistry | None = None
        if http is not None:
            self._live = CollectorRegistry(auto_describe=False)
            self._live.register(HttpCollector(http))
        self._lock = threading.Lock()
        self._cached: _ViewParts | None = None

    def _part(self, openmetrics: bool) -> _Part:
        """The current view's families in one format (OpenMetrics without its ``# EOF``), rendered on the first
        request for that format."""
        view = self._current()
        key = -1 if view is None else view.generation
        cached = self._cached
        if cached is not None and cached.key == key and (part := cached.parts.get(openmetrics)) is not None:
            return part
        with self._lock:
            cached = self._cached
            if cached is None or cached.key != key:
                cached = _ViewParts(key, [] if view is None else list(families(view)))
                self._cached = cached
            part = cached.parts.get(openmetrics)
            if part is None:
                self._built.metrics = cached.metrics
                part = cached.parts[openmetrics] = _Part(_render(self.registry, openmetrics))
                self._built.metrics = []
                if len(cached.parts) == 2:  # both formats rendered: the families are no longer needed
                    cached.metrics = []
            return part

    def prime(self) -> None:
        """Render the current view in both formats now, so that no scrape waits for it."""
        self._part(False)
        self._part(True)

    def body(self, *, openmetrics: bool, gzipped: bool) -> bytes:
        part = self._part(openmetrics)
        tail = b"" if self._live is None else _render(self._live, openmetrics)
        if openmetrics:
            tail += _EOF
        return part.gzipped(tail) if gzipped else part.raw + tail

    def exposition(self) -> Exposition:
        return Exposition(self.body(openmetrics=False, gzipped=False), self.body(openmetrics=True, gzipped=False))
