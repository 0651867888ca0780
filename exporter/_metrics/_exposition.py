"""The ``/metrics`` bytes: the pair families rendered once per snapshot, the view's own families once per view,
with the server's few live counters appended per scrape.

The pair families (GPU pairs, GPU x NIC pairs, NUMA distances: nearly all of a large node's series) depend on
the snapshot alone, so they are built and rendered once per snapshot and format (``topology.per_snapshot``)
and go first in the body; every view around the snapshot (a probe pass or a sink's publish makes one) shares
them. A view changes only when the agent swaps it, so its own families are built once and rendered once per
format, on the first scrape that asks for that format (a scrape asks for one format, so it never pays for the
other), and every scrape in between copies bytes. The HTTP counters move between views; they are rendered on
their own (microseconds) and appended: families are independent blocks in both formats, and OpenMetrics'
``# EOF`` goes last. For gzip, each part is compressed once and its compressor state kept: the view's part
continues from a copy of the pair part's state, a scrape from a copy of the view's, fed the live part and
finished, which yields one ordinary gzip stream of the whole body without compressing anything again.
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

from topology import per_snapshot

from .._core._http_limits import HttpStats
from .._core._view import View
from ._metrics import PAIR_SERIES_LIMIT, HttpCollector, pair_families, pair_series, view_families

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
    """Families rendered in one format, after an optional part that goes before them in the body, and the gzip
    compressor with the whole body up to here fed and flushed (kept once a gzipped body is asked for)."""

    __slots__ = ("_before", "_lock", "_zipped", "_zipper", "raw")

    def __init__(self, raw: bytes, before: _Part | None = None) -> None:
        self.raw, self._before = raw, before
        self._zipper: _Compressor | None = None
        self._zipped = b""  # this part's own compressed bytes; the parts before it keep theirs
        self._lock = threading.Lock()

    def _state(self) -> tuple[list[bytes], _Compressor]:
        """The compressed bytes of the body so far, part by part, and the compressor that wrote them."""
        with self._lock:
            if self._zipper is None:
                zipped: list[bytes] = []
                zipper: _Compressor
                if self._before is None:
                    zipper = zlib.compressobj(6, zlib.DEFLATED, _GZIP)
                else:
                    zipped, base = self._before._state()
                    zipper = base.copy()
                self._zipped = zipper.compress(self.raw) + zipper.flush(zlib.Z_SYNC_FLUSH)
                self._zipper = zipper
            else:
                zipped = [] if self._before is None else self._before._state()[0]
            return [*zipped, self._zipped], self._zipper

    def body(self, tail: bytes, *, gzipped: bool) -> bytes:
        """The whole body: the parts before this one, this one and ``tail`` (rendered per scrape)."""
        if gzipped:
            zipped, zipper = self._state()
            finish = zipper.copy()
            return b"".join((*zipped, finish.compress(tail), finish.flush()))
        return (b"" if self._before is None else self._before.body(b"", gzipped=False)) + self.raw + tail


class _Built:
    """Families built already, as a collector yields them."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics


def _render_families(metrics: list[Metric], openmetrics: bool) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Built(metrics))
    return _render(registry, openmetrics)


def _pair_part(view: View, limit: int, openmetrics: bool) -> tuple[_Part, int]:
    """The view's pair families in one format, rendered once per snapshot, unread facts and format (every view
    around the snapshot shares them); nothing while their series are above ``limit``. Also the series withheld."""
    snap, unread = view.snapshot, tuple(view.unread)
    withheld = pair_series(snap)
    if withheld > limit:
        return _Part(b""), withheld
    return per_snapshot(snap, (_pair_part, unread, openmetrics),
                        lambda: _Part(_render_families(pair_families(snap, unread), openmetrics))), 0


class _ViewParts:
    """One view's own families, and each format's part once a scrape has asked for it."""

    __slots__ = ("key", "metrics", "parts")

    def __init__(self, key: int, metrics: list[Metric]) -> None:
        self.key, self.metrics = key, metrics
        self.parts: dict[bool, _Part] = {}  # openmetrics -> its part


class MetricsCache:
    """The agent's own families: the view's pair families (built and rendered once per snapshot and format, while
    their series are within ``pair_limit``), the view's own (built once per view, rendered once per view and
    format) and, when given, the HTTP server's counters (rendered per scrape)."""

    def __init__(self, current: Callable[[], View | None], http: HttpStats | None = None,
                 pair_limit: int = PAIR_SERIES_LIMIT) -> None:
        self._current = current
        self._pair_limit = pair_limit
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
                cached = self._cached = _ViewParts(key, [])
            part = cached.parts.get(openmetrics)
            if part is None:
                if view is None:
                    part = _Part(b"")
                else:
                    pairs, withheld = _pair_part(view, self._pair_limit, openmetrics)
                    if not cached.parts:
                        cached.metrics = list(view_families(view, withheld))
                    part = _Part(_render_families(cached.metrics, openmetrics), pairs)
                cached.parts[openmetrics] = part
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
        return part.body(tail, gzipped=gzipped)

    def exposition(self) -> Exposition:
        return Exposition(self.body(openmetrics=False, gzipped=False), self.body(openmetrics=True, gzipped=False))
