"""The one retry policy of the Kubernetes client, for every request and for the watch.

* **Exponential back-off, jittered as client-go's**: after the n-th failure in a row the next try waits
  ``uniform(w/2, w)`` with ``w = min(MAX_DELAY_S, base * 2**n)`` (client-go's ``wait.Backoff`` with
  ``Jitter: 1.0`` waits between ``d`` and ``2d``: the same spread, with ``w`` the stated maximum). A ``floor``
  widens the window to at least ``floor * 2**(n-1)`` (the watch's, after a broken stream: one default pass).
* **A stated maximum**: no wait is longer than :data:`MAX_DELAY_S` (5 minutes).
* **Retry-After as a floor**: the wait is at least what the server asked for (capped at the maximum).
* **Carried across passes**: a :class:`Backoff` counts the failures in a row. While the server keeps failing, a
  request whose next try is not due is not sent at all (the caller gets :class:`~._errors.BackingOff` at once and
  the pass moves on); a call that meets the first failure tries again (``attempts`` tries at most, the wait within
  ``in_call``) only where client-go's request would (``IsNextRetry``): the server said when (``Retry-After`` on a
  429 or 5xx, ``checkWait``), or a read's connection was reset or closed under it (a GET: ``IsConnectionReset``,
  ``IsProbableEOF``); a bare 5xx, a refused connection or a timeout is left to a later call, so a fleet meeting a
  failing server sends it no more than its steady rate. A call made while backing off tries once, if due.
  An answer that is not a failure (any 2xx, a 4xx other than 429) resets the client's backoff, and calls back
  whoever asked to hear of it (:meth:`Backoff.on_answer`: the slice watch, which waits for the server to answer a
  pass rather than probing a failing server itself).
* **Reset after a healthy period**: the backoff resets after :data:`HEALTHY_S` without a failure (client-go's
  ``defaultBackoffReset``, 2 minutes) after its last wait ended. The watch's backoff (a
  :class:`Backoff` of its own) resets only so, never because an event or a bookmark came: a server that sends a
  bookmark and then a 410 on every watch is backed off like any other failing one (``at_once``: a failure
  that is tried again at once, the watch's first 410 since its backoff reset).

So one agent sends a failing server about one request per back-off step: ten minutes of failures cost about
ten requests, what a healthy server gets in ten minutes of one-minute passes (``tests/test_kube_faults.py``,
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
HEALTHY_S = 120.0  # the backoff resets after this long without a failure (client-go's defaultBackoffReset)


class Retryable(Exception):  # a signal between the client and Backoff.run
    """A server failure; ``again``: worth a second try within the call (by default: the server said when)."""

    def __init__(self, error: Exception, retry_after: float | None = None, *, again: bool | None = None) -> None:
        super().__init__(str(error))
        self.error, self.retry_after = error, retry_after
        self.again = retry_after is not None if again is None else again


@dataclass(slots=True, kw_only=True)
class Backoff:
    attempts: int = 2  # tries in one call, where a second is worth it and its wait stays within ``in_call``
    base: float = 1.0
    cap: float = MAX_DELAY_S
    in_call: float = 8.0  # a call waits this long at most; longer waits are left to later calls
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0  # server failures in a row
    not_before: float = 0.0  # no try before this (``clock``)
    failed_at: float = 0.0  # the last failure (``clock``)
    healthy_s: float = HEALTHY_S
    last_error: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _answered: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def delay(self, failures: int, retry_after: float | None, floor: float = 0.0) -> float:
        """The wait after ``failures`` failures in a row: jittered over the upper half of the window, at least
        ``retry_after``, at most ``cap``; with a ``floor`` the window is at least ``floor x 2^(failures-1)``."""
        n = min(failures, 30)
        window = min(self.cap, max(self.base * 2 ** n, floor * 2 ** max(n - 1, 0) if floor > 0 else 0.0))
        jitter = self.rng.uniform(window / 2, window)
        return max(jitter, min(max(retry_after, 0.0), self.cap)) if retry_after is not None else jitter

    def wait_s(self) -> float:
        """Seconds until the next try is due (0: now)."""
        with self._lock:
            return max(0.0, self.not_before - self.clock()) if self.failures else 0.0

    def failed(self, error: object, retry_after: float | None = None, floor: float = 0.0,
               at_once: bool = False) -> float:
        """One more failure in a row (the first after a reset, ``healthy_s`` without one); returns the wait
        before the next try (``floor``: see :meth:`delay`; ``at_once``: none, but for ``retry_after``)."""
        with self._lock:
            now = self.clock()
            if self.failures and now < self.not_before:  # sent before the last failure was counted (requests of
                # several threads in flight together, as a controller's informers when a server goes): the same
                # outage, counted once (each counted would double the wait: a 4 s outage waited 45 s); a longer
                # Retry-After still holds
                if retry_after is not None:
                    self.not_before = max(self.not_before, now + min(max(retry_after, 0.0), self.cap))
                self.last_error = str(error)
                return self.not_before - now
            if self._healthy(now):
                self.failures = 0
            self.failures += 1
            if at_once:
                wait = min(max(retry_after or 0.0, 0.0), self.cap)
            else:
                wait = self.delay(self.failures, retry_after, floor)
            self.not_before, self.failed_at, self.last_error = now + wait, now, str(error)
            return wait

    def will_reset(self) -> bool:
        """The next failure starts the backoff over: none yet, or none for ``healthy_s`` after the last wait ended."""
        with self._lock:
            return not self.failures or self._healthy(self.clock())

    def _healthy(self, now: float) -> bool:
        return bool(self.failures) and now - max(self.not_before, self.failed_at) >= self.healthy_s

    def succeeded(self) -> None:
        with self._lock:
            ended = self.failures > 0
            self.failures, self.not_before = 0, 0.0
        if ended:  # outside the lock: a callback may read this back-off
            for callback in list(self._answered):
                callback()

    def on_answer(self, callback: Callable[[], None]) -> None:
        """``callback()`` each time the server answers after failing (the backoff resets), in the answer's thread."""
        with self._lock:
            self._answered.append(callback)

    def run(self, call: Callable[[], T], refuse: Callable[[float], Exception]) -> T:
        """``call`` raises :class:`Retryable` for a server failure; the last one is re-raised. A try further off
        than ``in_call`` is not made: ``refuse(seconds)`` is raised instead. Any other outcome is an answer from
        the server and resets the backoff."""
        # backing off already: one try, when due; the first failure in this call: ``attempts`` tries
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
                if attempt == tries - 1 or not exc.again:
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
