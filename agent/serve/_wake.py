"""What wakes the sync worker (the discovery thread) before its interval: a discovery pass (SIGHUP, stop), or a
resync when a sink's watch saw the view of its objects change: delayed a little and coalesced, as the DRA
resourceslice controller queues its syncs, and never a discovery pass (the hardware did not change)."""

from __future__ import annotations

import threading
import time

RESYNC_DELAY_S = 0.5  # a burst of events (kubelet deleting every slice of the node) is one resync


class Wake:
    def __init__(self, resync_delay_s: float = RESYNC_DELAY_S) -> None:
        self._cond = threading.Condition()
        self._why = ""  # a discovery pass asked for, and why (the first reason)
        self._resync: dict[str, str] = {}  # sink name: why (the first reason)
        self._resync_at: float | None = None  # when the queued resync is due (monotonic)
        self._delay = resync_delay_s

    def __call__(self, why: str) -> None:
        """A discovery pass now (which publishes every sink)."""
        with self._cond:
            self._why = self._why or why
            self._cond.notify_all()

    def resync(self, sink: str, why: str) -> None:
        """Publish again from the last discovery, after the delay (more requests before then join it); ``sink``
        asked, for ``why``."""
        with self._cond:
            self._resync.setdefault(sink, why)
            if self._resync_at is None:
                self._resync_at = time.monotonic() + self._delay
            self._cond.notify_all()

    def wait(self, timeout: float) -> tuple[str, dict[str, str]]:
        """Within ``timeout``: ``(why, {})`` for a discovery pass, ``("", {sink: why})`` for a resync; after it,
        ``("interval", {})``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                if self._why:
                    why, self._why, self._resync, self._resync_at = self._why, "", {}, None  # the pass publishes all
                    return why, {}
                if self._resync_at is not None and now >= self._resync_at:
                    resync, self._resync, self._resync_at = self._resync, {}, None
                    return "", resync
                if now >= deadline:
                    return "interval", {}
                self._cond.wait((deadline if self._resync_at is None else min(deadline, self._resync_at)) - now)
