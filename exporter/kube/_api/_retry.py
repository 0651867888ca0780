"""The one retry policy of the Kubernetes client, for every request and for the watch.

* **Exponential back-off with full jitter**: after the n-th server failure in a row (429, 5xx, a refused or
  broken connection, a timeout) the next try waits ``uniform(0, min(MAX_DELAY_S, base * 2**n))``.
* **A stated maximum**: no wait is longer than :data:`MAX_DELAY_S` (5 minutes).
* **Retry-After honoured up to that maximum**: the wait is at least what the server asked for (capped at
  the maximum), for requests and for watches alike.
* **Carried across passes**: a :class:`Backoff` is the back-off state (the failures in a row), shared by
  every call of one client. While the server keeps failing, a request whose next try is further off than
  ``in_call`` seconds is not sent at all (the caller gets :class:`~._errors.BackingOff` at once and the pass
  moves on); a call that starts the back-off waits for a sooner one, ``attempts`` tries at most; a call made
  while it is on tries once, if due. The watch never probes a failing server: while backing off it waits for
  a pass's request to be answered, so a failing server gets about one request a pass at most. Only an answer
  that is not a failure (any 2xx, a 4xx other than 429) ends the back-off.
* **The watch** has a back-off of its own (:class:`Backoff` too): a watch counts as a success only when an event
  arrives, not when it opens, so a watch that opens and fails at once (410 inside an HTTP 200 stream, a connection
  closed right after) backs off like any other failure. A first 410 after a working watch gets the state again at
  once (a watch list); a repeated one (or one on a watch opened from its own list) lists and watches again only once
  that list stops being trusted (:data:`~exporter.kube._sinks._slice_cache.TRUST_S`, one back-off maximum), the
  passes planning against it meanwhile. A watch that breaks on an error (or that the server drops long before its
  timeout) waits at least a window of one default pass (:data:`~exporter.kube._sinks._slice_watch.ERROR_WINDOW_S`,
  full jitter): watches dropped together come back spread out, and the passes trust what the watch saw meanwhile.

So one agent sends a failing server about one request per back-off step: ten minutes of failures cost about
ten requests, what a healthy server gets in ten minutes of one-minute passes (a server whose every watch
fails with 410: a list and a watch more every five minutes) (``tests/test_kube_faults.py``,
``benchmarks/faults.py``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
RETRYABLE = frozenset({429, 500, 502, 503, 504})
MAX_DELAY_S = 300.0  # the longest wait between tries: 5 minutes


class Retryable(Exception):  # a signal between the client and Backoff.run
    def __init__(self, error: Exception, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error, self.retry_after = error, retry_after


@dataclass(slots=True, kw_only=True)
class Backoff:
    attempts: int = 2  # tries in one call, while the wait stays within ``in_call``: two at most, so that
    # a fleet meeting a fault sends no more than twice its steady rate
    base: float = 2.0
    cap: float = MAX_DELAY_S
    in_call: float = 8.0  # a call waits this long at most; longer waits are left to later calls
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0  # server failures in a row
    not_before: float = 0.0  # no try before this (``clock``)
    last_error: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def delay(self, failures: int, retry_after: float | None, floor: float = 0.0) -> float:
        """The wait after ``failures`` failures in a row: full jitter, at least ``retry_after``, at most ``cap``;
        with a ``floor`` the jitter's window is at least ``floor x 2^(failures-1)``."""
        n = min(failures, 30)
        window = max(self.base * 2 ** n, floor * 2 ** max(n - 1, 0) if floor > 0 else 0.0)
        jitter = self.rng.uniform(0, min(self.cap, window))
        return max(jitter, min(max(retry_after, 0.0), self.cap)) if retry_after is not None else jitter

    def wait_s(self) -> float:
        """Seconds until the next try is due (0: now)."""
        with self._lock:
            return max(0.0, self.not_before - self.clock()) if self.failures else 0.0

    def failed(self, error: object, retry_after: float | None = None, floor: float = 0.0) -> float:
        """One more failure in a row; returns the wait before the next try (``floor``: see :meth:`delay`)."""
        with self._lock:
            self.failures += 1
            wait = self.delay(self.failures, retry_after, floor)
            self.not_before, self.last_error = self.clock() + wait, str(error)
            return wait

    def succeeded(self) -> None:
        with self._lock:
            self.failures, self.not_before = 0, 0.0

    def held(self) -> float | None:
        """For the watch, which never probes a failing server (the passes do, one request each): the seconds
        to wait while backing off, else None."""
        with self._lock:
            return max(self.not_before - self.clock(), self.base) if self.failures else None

    def run(self, call: Callable[[], T], refuse: Callable[[float], Exception], probe: bool = True) -> T:
        """``call`` raises :class:`Retryable` for a server failure; the last one is re-raised. A try further off
        than ``in_call`` is not made: ``refuse(seconds)`` is raised instead (at once while backing off and
        ``probe`` is false). Any other outcome is an answer from the server and ends the back-off."""
        if not probe and (held := self.held()) is not None:
            raise refuse(held)
        # already backing off: one try, when due; a back-off that starts in this call: ``attempts`` tries
        tries = self.attempts if not self.failures else 1
        for attempt in range(tries):
            wait = self.wait_s()
            if wait > self.in_call or (wait > 0 and attempt == 0):
                raise refuse(wait)
            if wait > 0:
                self.sleep(wait)
            try:
                result = call()
            except Retryable as exc:
                self.failed(exc.error, exc.retry_after)
                if attempt == tries - 1:
                    raise exc.error from exc
                continue
            except Exception:
                self.succeeded()  # an answer (404, 403, 409 ...): the server is up
                raise
            self.succeeded()
            return result
        raise AssertionError("unreachable")


def retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
