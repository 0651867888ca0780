"""The reflector of this node's ResourceSlices of our driver: lists, then watches from the list's resourceVersion,
and is the only writer of the store (:mod:`._slice_cache`); an event or a state that changes the view of our slices
queues a resync (``wake``). Every error is retried on the backoff, nothing is given up. The rules and
the client-go functions they come from: ``docs/kube-sync.md``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping

from .._api._api import Kind, KubeApi, Obj, initial_events_end, resource_version
from .._api._errors import BackingOff, Expired, Forbidden, InvalidObject, NotFound, PublishError, Silent
from .._api._retry import MAX_DELAY_S, Backoff
from ._slice_cache import SliceCache

log = logging.getLogger(__name__)

RESTART_REASONS = ("closed", "expired", "error", "refused")
FIX_FORBIDDEN = "grant the agent's ServiceAccount list and watch on resourceslices (resource.k8s.io)"
FIX_REFUSED = "a status the agent does not know: check that the server serves resource.k8s.io resourceslices"
# The least window of the back-off after a stream broke (doubling, jittered, at most MAX_DELAY_S): one default
# pass, so watches dropped together come back spread over it.
ERROR_WINDOW_S = 60.0
# A stream that the server ends cleanly before this share of the timeout the client asked for did not reach it (the
# server ends it at the timeout, after a bookmark 2 s before): it was dropped (a server shutting down, a proxy
# closing every connection), and waits as a broken one, spread, not at once. An API that does not say its timeout
# is held to EARLY_CLOSE_S (the client asks for 300 to 600 s).
TIMEOUT_SHARE = 0.95
EARLY_CLOSE_S = 240.0


def slice_fields(node: str, driver: str) -> dict[str, str]:
    return {"spec.nodeName": node, "spec.driver": driver}


class _Ended(Exception):
    """A stream ended before the server's timeout, or a watch list before its state was whole."""


class SliceWatch:
    """The watch: :meth:`step` lists when needed and watches once, and returns the seconds to wait before the next
    step; :meth:`run` steps until ``stop``. ``pick``: choose the API version again."""

    def __init__(self, api: KubeApi, kind: Callable[[], Kind], *, fields: Mapping[str, str], cache: SliceCache,
                 wake: Callable[[str], None], restarts: Counter[str], backoff: Backoff | None = None,
                 stop: threading.Event | None = None, early: float = 0.0,
                 pick: Callable[[], None] = lambda: None) -> None:
        self._api, self._kind, self._fields, self._cache = api, kind, dict(fields), cache
        self._wake, self._restarts, self._stop, self._pick = wake, restarts, stop or threading.Event(), pick
        self.backoff = backoff or Backoff()
        self._clock = self.backoff.clock
        self._early = early
        self._rv: str | None = None  # where the next watch starts; None: the store needs a state first
        self._watch_lists = True  # a watch list may be asked for, until a server breaks, ignores or refuses one
        self._watch_list_next = False  # the next state through a watch list (after a 410), else a list
        self._again: str | None = None  # why the next request is a restart (counted when it is sent)
        self._state: list[Obj] = []  # a watch list's state, until the bookmark that ends it
        self._once: set[str] = set()  # failures tried again at once since the backoff last reset (a 410, a silence)
        # the store's trust before this stream's first bookmark since its last event: a 410 after takes it back
        self._alive_before_bookmark: float | None = None
        self._poked = threading.Event()
        self.problem: str | None = None  # why the watch is refused, with the fix; None while it is not

    def run(self) -> None:
        """Blocks until ``stop`` is set (and the watch is woken: at its stream's next event, or :meth:`poke`). A bug
        leaves the passes listing for themselves (the caller runs the watch again on its own back-off)."""
        try:
            while not self._stop.is_set():
                wait = self.step()
                if wait > 0:
                    self._poked.wait(wait)
        except BaseException:
            self._cache.abandoned()
            raise

    def poke(self) -> None:
        """Ends the wait before the next step now: the server answered after failing, or ``stop`` was set."""
        self._poked.set()

    def step(self) -> float:
        self._poked.clear()  # this step talks to the server; a poke while it does ends the wait after it
        watch_list = self._rv is None and self._watch_list_next  # this step's state comes from a watch list
        try:
            self._list_then_watch()
        except BackingOff as exc:
            return max(exc.retry_in, MAX_DELAY_S)  # nothing sent: the passes probe, and an answer pokes the watch
        except (_Ended, PublishError) as exc:
            if watch_list and self._rv is None and isinstance(exc, InvalidObject | _Ended):
                self._no_watch_lists(exc)  # refused or ignored: a list at once, and lists from now on
                self._sent()
                return 0.0
            wait = self._after(exc)
            if watch_list:  # failed before its end: the next state comes from a list (ListAndWatch's fallback)
                self._watch_list_next = False
            return wait
        return 0.0

    def _after(self, exc: Exception) -> float:
        """The wait after a watch ended on ``exc``."""
        if isinstance(exc, Expired):
            if self._alive_before_bookmark is not None:  # the stream's bookmarks said the store was current; not so
                self._cache.revert_alive(self._alive_before_bookmark)
            return self._failed("expired", exc, at_once=True, floor=ERROR_WINDOW_S)
        if isinstance(exc, Silent):
            return self._failed("error", exc, at_once=True, floor=ERROR_WINDOW_S)
        if isinstance(exc, NotFound):
            self._pick()  # the version may be gone (a server upgraded): choose again, from a fresh state
            self._rv = None
            return self._failed("error", exc)
        if isinstance(exc, Forbidden | InvalidObject):
            return self._refused(exc)
        return self._failed("error", exc, floor=ERROR_WINDOW_S)

    def _refused(self, exc: PublishError) -> float:
        """A 401/403 (no ``list`` or ``watch`` in RBAC) or a status the client does not know: the passes list for
        themselves, and the watch tries again on the back-off, so it is back without a restart once the
        permission arrives. Logged once, with the fix; counted as the restart reason ``refused``, and said by
        :attr:`problem` (the readiness detail, read by the sync worker: one string, replaced whole) until a watch
        opens."""
        self._cache.abandoned()
        self._rv = None
        fix = FIX_FORBIDDEN if isinstance(exc, Forbidden) else FIX_REFUSED
        first = self.problem is None
        self.problem = f"watch refused ({exc}): {fix}"
        wait = self._failed("refused", exc, floor=ERROR_WINDOW_S, quiet=True)
        if first:
            log.warning("resource-slices: %s; each pass lists meanwhile, and the watch tries again (next in %.0f s)",
                        self.problem, wait)
        else:
            log.debug("resource-slices: watch refused again (%s); again in %.0f s", exc, wait)
        return wait

    def _failed(self, reason: str, exc: Exception, *, at_once: bool = False, floor: float = 0.0,
                quiet: bool = False) -> float:
        """Counts ``exc`` in the backoff; the wait before the next try (``at_once``: none, the first time of its kind
        since the backoff last reset; ``floor``: see :meth:`~.._api._retry.Backoff.delay`)."""
        self._sent()
        self._again = reason
        if reason == "expired":
            self._rv, self._watch_list_next = None, self._watch_lists
        if self.backoff.will_reset():
            self._once.clear()
        kind = type(exc).__name__
        at_once = at_once and kind not in self._once
        self._once.add(kind)
        wait = self.backoff.failed(exc, getattr(exc, "retry_after", None), floor=floor, at_once=at_once)
        if quiet:
            pass
        elif reason == "error":  # the server or the way to it failed: an operator's concern
            log.warning("resource-slices: watch failed (%s); again in %.0f s", exc, wait)
        else:
            log.info("resource-slices: watch %s (%s); again in %.0f s", reason, exc, wait)
        return wait

    def _sent(self) -> None:
        """A request went out: it restarts the watch for the reason the last one ended."""
        if self._again is not None:
            self._restarts[self._again] += 1
            self._again = None

    def _list_then_watch(self) -> None:
        kind = self._kind()
        self._state, self._alive_before_bookmark = [], None
        if self._rv is None and not self._watch_list_next:
            self._list(kind)
        opened, early = self._clock(), self._early
        for typ, obj in self._api.watch(kind, {}, self._fields, self._rv, initial=self._rv is None):
            if self._stop.is_set():
                return
            if typ == "OPEN":
                self._sent()
                if self.problem is not None:  # permitted again (the RBAC arrived): the refusals are over
                    log.warning("resource-slices: watching again; before: %s", self.problem)
                    self.problem = None
                opened = self._clock()
                if isinstance(timeout := obj.get("timeoutSeconds"), int | float) and timeout > 0:
                    early = TIMEOUT_SHARE * timeout
            elif self._rv is None:
                self._initial(typ, obj)
            else:
                self._changed(typ, obj)
        if self._rv is None:
            raise _Ended("watch list ended before the end of its state")
        if self._clock() - opened < early:
            raise _Ended("watch closed early")
        self._cache.alive()  # live to the server's timeout (a real server sends a bookmark just before it)
        self._again = "closed"  # the server's timeout: on from where it stopped, at once

    def _list(self, kind: Kind) -> None:
        items, rv = self._api.list_versioned(kind, {}, self._fields)
        self._sent()
        self._commit(items, rv)

    def _commit(self, items: list[Obj], rv: str) -> None:
        for why in self._cache.replace(items, rv):
            self._wake(why)
        self._rv, self._watch_list_next = rv, False

    def _initial(self, typ: str, obj: Obj) -> None:
        """An event of a watch list's state: kept aside until the bookmark that ends it (a bookmark without the
        annotation changes nothing: the state goes on, as in ``handleAnyWatch``)."""
        if typ == "ADDED":
            self._state.append(obj)
        elif typ == "BOOKMARK":
            if initial_events_end(obj):
                state, self._state = self._state, []
                self._commit(state, resource_version(obj) or "")
        else:  # a change before the end of the state: a server that ignores the request
            raise _Ended(f"{typ} before the end of a watch list")

    def _changed(self, typ: str, obj: Obj) -> None:
        self._rv = resource_version(obj) or self._rv
        if typ not in ("ADDED", "MODIFIED", "DELETED"):  # a bookmark: nothing changed, and the stream is live
            if self._alive_before_bookmark is None:
                self._alive_before_bookmark = self._cache.alive_until()
            self._cache.alive()
            return
        self._alive_before_bookmark = None
        if (why := self._cache.event(typ, obj)) is not None:
            self._wake(why)

    def _no_watch_lists(self, exc: Exception) -> None:
        self._watch_lists = self._watch_list_next = False
        self._state = []
        log.info("resource-slices: no watch list (%s); listing and watching instead", exc)
