"""How soon a failed sync of a sink is tried again: client-go's default controller rate limiter. Pure.

The larger of a per-sink exponential backoff (``ItemExponentialFailureRateLimiter``: 5 ms doubling with each
failure in a row, at most 1000 s, reset by a success) and an overall token bucket (``BucketRateLimiter``: 10 a
second, bursts of 100), with the server's ``Retry-After`` (or the client's own backoff) as a floor. A failed sync is
requeued on it, independent of the discovery interval, and never given up. Why: ``docs/kube-sync.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

BASE_S = 0.005
MAX_S = 1000.0
QPS = 10.0
BURST = 100


class RateLimiter:
    def __init__(self, *, base_s: float = BASE_S, max_s: float = MAX_S, qps: float = QPS, burst: int = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._base, self._max, self._qps, self._burst = base_s, max_s, qps, burst
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._tokens, self._last = float(burst), clock()

    def when(self, item: str, floor: float | None = None) -> float:
        """One more failure of ``item`` in a row: seconds until its sync is tried again (at least ``floor``)."""
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
            backoff = min(self._max, self._base * 2.0 ** min(n, 60))
            return max(backoff, self._bucket(), min(max(floor or 0.0, 0.0), self._max))

    def _bucket(self) -> float:
        """The overall bucket's wait for one more token (taken now: reserved, as golang.org/x/time/rate's)."""
        now = self._clock()
        self._tokens = min(float(self._burst), self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def result(self, item: str, ok: bool, floor: float | None = None) -> float | None:
        """A sync of ``item`` ended: None when it succeeded (:meth:`forget`), else when to try again (:meth:`when`)."""
        if ok:
            self.forget(item)
            return None
        return self.when(item, floor)

    def forget(self, item: str) -> None:
        """``item`` synced: its backoff starts over."""
        with self._lock:
            self._failures.pop(item, None)

    def failures(self, item: str) -> int:
        with self._lock:
            return self._failures.get(item, 0)
