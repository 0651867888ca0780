"""What wakes the sync worker (the discovery thread) before its interval: a discovery pass (SIGHUP, stop); a
resync when a sink's watch saw the view of its objects change, delayed a little and coalesced, as the DRA
resourceslice controller queues its syncs, and never a discovery pass (the hardware did not change); or a failed
sync's requeue, after its sink's backoff (``_requeue``)."""

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
        self._requeue: dict[str, tuple[float, str]] = {}  # sink name: (when due, why), a failed sync's
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

    def requeue(self, sink: str, why: str, after_s: float) -> None:
        """Sync ``sink`` again in ``after_s`` seconds (its backoff after a failed sync), or sooner if already due."""
        with self._cond:
            at = time.monotonic() + after_s
            if sink not in self._requeue or at < self._requeue[sink][0]:
                self._requeue[sink] = (at, why)
            self._cond.notify_all()

    def wait(self, timeout: float) -> tuple[str, dict[str, str]]:
        """Within ``timeout``: ``(why, {})`` for a discovery pass, ``("", {sink: why})`` for a resync or a requeue
        that is due; after it, ``("interval", {})``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                if self._why:  # the pass publishes all
                    why, self._why, self._resync, self._resync_at, self._requeue = self._why, "", {}, None, {}
                    return why, {}
                due = {s: why for s, (at, why) in self._requeue.items() if at <= now}
                if self._resync_at is not None and now >= self._resync_at:
                    due |= self._resync
                    self._resync, self._resync_at = {}, None
                if due:
                    for sink in due:  # a sink synced now is not synced again for an earlier request
                        self._requeue.pop(sink, None)
                    return "", due
                if now >= deadline:
                    return "interval", {}
                self._cond.wait(min([deadline, *([self._resync_at] if self._resync_at is not None else []),
                                     *(at for at, _ in self._requeue.values())]) - now)
