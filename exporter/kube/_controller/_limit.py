"""The controller's writes, spread: client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``) on the
sync's writes and the pending pods' Events (one bucket, as kube-controller-manager's one client limits both), so
that a rack joining at once, or a thousand pods of one job pending at once, is not a storm of writes.

* The bucket holds ``burst`` tokens and starts full; it gains ``qps`` tokens a second up to ``burst``; each write
  (an apply or a delete of a sync, an Event made or its series updated) takes one. Over any ``T`` seconds at
  most ``burst + qps * T`` writes go out.
* A write that finds the bucket empty waits for its token, as client-go's ``Wait`` does, unless a newer change
  is queued: then the sync stops writing and the next one, which recomputes from the newer state, writes the
  rest. A sync that will be superseded writes no stale state while it waits. The same for the Events: a look at
  the pending pods stops, and the next one says what is left.
* Leadership lost ends the wait at once, and nothing more is written.
* Only the sync's writes and the Events pass here: the Lease has a client of its own and never waits behind
  them; reads (the informers' lists and watches, the sync's look at what exists) are not counted.

Defaults (``--write-qps 20 --write-burst 30``) are kube-controller-manager's for its client (``--kube-api-qps``,
``--kube-api-burst``): the first sync of a fleet of 10,000 nodes (about 1,400 objects) takes about 70 s of writes,
a class change (a DeviceClass and a few templates) goes out in one burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

POLL_S = 0.2  # while waiting for a token: how often a newer change or lost leadership is noticed at most


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"write limit: qps ({qps:g}) > 0 and burst ({burst}) >= 1")
        self.qps, self.burst, self._clock = qps, burst, clock
        self._tokens, self._at = float(burst), clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now

    def try_take(self) -> bool:
        """Take a token if one is there (client-go's ``TryAccept``)."""
        with self._lock:
            self._refill()
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def wait_s(self) -> float:
        """Seconds until a token is there."""
        with self._lock:
            self._refill()
            return max(0.0, (1.0 - self._tokens) / self.qps)


class WriteGate:
    """What a sync asks before each write (its ``leading`` argument): True, a token taken; False, write no more
    (leadership lost, or a newer change queued while the bucket was empty)."""

    def __init__(self, bucket: TokenBucket, lost: threading.Event, superseded: Callable[[], bool],
                 log: Callable[[str], None], *, sleep: Callable[[float], object] | None = None,
                 rest: str = "the next sync writes the rest") -> None:
        self._bucket, self._lost, self._superseded, self._log, self._rest = bucket, lost, superseded, log, rest
        self._sleep = sleep or lost.wait  # the wait ends at once when leadership is lost
        self.written = self.stopped = 0  # writes let through; syncs stopped for a newer change

    def __call__(self) -> bool:
        while not self._lost.is_set():
            if self._bucket.try_take():
                self.written += 1
                return True
            if self._superseded():
                self.stopped += 1
                self._log(f"writes: at the limit ({self._bucket.qps:g} a second, burst {self._bucket.burst}) and "
                          "a newer change is queued: the next sync writes the rest")
                return False
            self._sleep(min(self._bucket.wait_s(), POLL_S))
        return False
