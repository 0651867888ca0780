"""A work queue of one item that coalesces: any number of adds before the sync starts make one sync, no sooner
than ``delay`` after the first (a rack joining at once is one write pass, not one per node)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class SyncQueue:
    def __init__(self, delay: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._delay, self._clock = delay, clock
        self._due: float | None = None
        self._cond = threading.Condition()

    def add(self, after: float | None = None) -> None:
        """Ask for a sync ``after`` seconds from now (default the queue's delay); an earlier ask stands."""
        with self._cond:
            due = self._clock() + (self._delay if after is None else after)
            if self._due is None or due < self._due:
                self._due = due
                self._cond.notify_all()

    def get(self, stop: threading.Event, poll: float = 0.5) -> bool:
        """Wait for a due sync (True, and the ask is taken) or for ``stop`` (False)."""
        with self._cond:
            while not stop.is_set():
                now = self._clock()
                if self._due is not None and self._due <= now:
                    self._due = None
                    return True
                wait = poll if self._due is None else min(poll, self._due - now)
                self._cond.wait(max(wait, 0.0))
            return False
