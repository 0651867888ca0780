"""A work queue of one item that coalesces: any number of adds before the sync starts make one sync.

A change asks for a sync ``delay`` after it; a later change before the sync starts moves it to ``delay`` after
itself (changes in between join it), never past ``most`` after the first change it waits for: a rack joining
node by node over a few seconds is one pass of writes, not one a second of stale intermediate states, and a
fleet that never stops changing is still synced every ``most`` seconds. ``most`` equal to ``delay`` (the default)
keeps the first change's time. An explicit ask (``after``: a retry, a resync) stands as asked, the earlier of two
winning, and is not moved by changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class SyncQueue:
    def __init__(self, delay: float, clock: Callable[[], float] = time.monotonic, most: float | None = None) -> None:
        self._delay, self._clock = delay, clock
        self._most = delay if most is None else max(most, delay)
        self._asked: float | None = None  # an explicit ask's time
        self._settle: float | None = None  # the changes' time
        self._first: float | None = None  # the first change the next sync follows
        self._cond = threading.Condition()

    def _due(self) -> float | None:
        dues = [d for d in (self._asked, self._settle) if d is not None]
        return min(dues) if dues else None

    def add(self, after: float | None = None) -> None:
        """A change (no ``after``: a sync ``delay`` from now, moved by later changes up to ``most`` after the
        first), or a sync asked for ``after`` seconds from now (an earlier ask stands)."""
        with self._cond:
            now = self._clock()
            if after is None:
                if self._first is None:
                    self._first = now
                self._settle = min(now + self._delay, self._first + self._most)
            elif self._asked is None or now + after < self._asked:
                self._asked = now + after
            self._cond.notify_all()

    def due(self) -> float | None:
        """When the next sync is due (the clock's time), None when none is asked for."""
        with self._cond:
            return self._due()

    def pending(self) -> bool:
        """Whether a sync is asked for and not yet taken (a change came after the running sync started)."""
        return self.due() is not None

    def get(self, stop: threading.Event, poll: float = 0.5) -> bool:
        """Wait for a due sync (True, and the ask is taken) or for ``stop`` (False)."""
        with self._cond:
            while not stop.is_set():
                now, due = self._clock(), self._due()
                if due is not None and due <= now:
                    self._asked = self._settle = self._first = None
                    return True
                wait = poll if due is None else min(poll, due - now)
                self._cond.wait(max(wait, 0.0))
            return False
