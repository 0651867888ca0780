"""Watch this node's ResourceSlices of our driver: keep the sink's cache fresh, and wake the agent when someone else
deletes or changes one.

Kubelet deletes every node-local slice when it starts, and the garbage collector does when the Node goes, so without
a watch the pool would be missing until the next discovery interval. The watch is the informer pattern cut to one
node: list with field selectors (``spec.nodeName``, ``spec.driver``: only this node's slices cross the network),
then watch from the list's resourceVersion with bookmarks (a quiet node's resourceVersion stays recent), and when
the server ends the stream at its timeout, watch again from the last resourceVersion seen. The selection is by
fields alone, not by our label: a slice of ours that lost the label stays in view (and the next pass labels it
again). Every way it can fail is handled, by the client's one retry policy (``_api._retry``): 410 Gone (as a status
or as an ``ERROR`` event in the stream: the resourceVersion is older than the server keeps, as after it restarted)
gets the state again at once, with a watch list where the server has them (one request, from no resourceVersion:
``sendInitialEvents``), else a list and a watch; if the next watch fails the same way before any event came, the
watch cannot be had, and it lists and watches again only when that list stops being trusted
(:data:`~._slice_cache.TRUST_S`, the passes planning against it meanwhile); any other failure backs off with full
jitter over at least :data:`ERROR_WINDOW_S` (so that a fleet whose watches all break at once, as when a proxy or the
server drops every connection, comes back spread over a pass instead of in one burst; a stream the server ends
cleanly sooner than :data:`EARLY_CLOSE_S` after it opened was dropped the same way and waits the same), then watches
again from the last resourceVersion (the server replays what was missed, or answers 410); meanwhile the passes plan
against the cache while it is trusted, and list once it is not; while the client is backing off from a failing
server the watch waits its turn; RBAC without watch or a server without the resource gives up (the passes then list
every time, as without a watch). Each restart is counted by reason. The cache is fresh from the moment the server
accepts a watch until one fails, and trusted for :data:`~._slice_cache.TRUST_S` after. Needs ``list`` and ``watch``
on resourceslices (``PERMISSIONS["resource-slices"]``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping

from .._api._api import Kind, KubeApi, Obj, initial_events_end, resource_version
from .._api._errors import BackingOff, Expired, Forbidden, InvalidObject, NotFound, PublishError
from .._api._retry import Backoff
from ._slice_cache import SliceCache

log = logging.getLogger(__name__)

# Failures that another try will not mend: RBAC without watch, a server without the resource.
_FINAL = (Forbidden, NotFound, InvalidObject)
# Why a watch was opened again: the server ended it (its timeout), its resourceVersion had expired (410:
# listed again), or it failed (backed off, then resumed).
RESTART_REASONS = ("closed", "expired", "error")
GIVE_UP = -1.0  # what :meth:`SliceWatch.step` returns when the watch cannot be had at all
# The least window of the back-off after a watch fails on an error (a broken connection, a 5xx; doubling, full
# jitter, at most MAX_DELAY_S): one default pass. While the watch is down the passes trust what it saw (or list,
# when the server failed it); watches broken all at once (a restart, a proxy dropping every connection) come
# back spread over a pass, as client-go's reflector restarts with a jittered back-off after a watch error. A
# stream open for a window before it broke worked: its break starts a new streak (client-go resets its back-off
# after a quiet while too).
ERROR_WINDOW_S = 60.0
# A stream that the server ends cleanly this soon after it opened did not reach its timeout (the client asks for
# 300 to 600 s): it was dropped (a server shutting down, a proxy or load balancer closing every connection), so it
# waits on the same window as a broken one instead of reopening at once with every other watch it was dropped with.
EARLY_CLOSE_S = 240.0


def slice_fields(node: str, driver: str) -> dict[str, str]:
    return {"spec.nodeName": node, "spec.driver": driver}


class SliceWatch:
    """One watch, step by step: :meth:`step` lists when needed, watches until the stream ends, and returns
    the seconds to wait before the next step (:data:`GIVE_UP`: never). ``backoff``: the watch's own streak."""

    def __init__(self, api: KubeApi, kind: Callable[[], Kind], *, fields: Mapping[str, str], cache: SliceCache,
                 wake: Callable[[str], None], restarts: Counter[str], backoff: Backoff | None = None,
                 stop: threading.Event | None = None,
                 error_window: float = ERROR_WINDOW_S, early: float = 0.0,
                 clock: Callable[[], float] | None = None) -> None:
        self._api, self._kind, self._fields, self._cache = api, kind, dict(fields), cache
        self._wake, self._restarts, self._stop = wake, restarts, stop or threading.Event()
        self.backoff = backoff or Backoff()
        self._rv: str | None = None
        self._expiries = 0  # 410s in a row, no event between
        self._error_window, self._early = error_window, early
        self._clock = clock or self.backoff.clock  # the back-off's clock (simulated where it is)
        self._own_list = False  # the watch opened from the list it just made, no event since
        self._watch_list = True  # after a 410, list and watch in one request (until the server refuses it)
        cache.watched(self._clock)  # its trust runs on the same clock as the back-off

    def _worked(self) -> None:
        """The watch carried this node's slices: an event came, or the stream stayed open a window (a quiet node
        hears nothing between bookmarks). Whatever fails next is a new fault: a first 410, a first break."""
        self._expiries, self._own_list = 0, False
        self.backoff.succeeded()

    def step(self) -> float:
        b = self.backoff
        accepted = False  # the server accepted this watch (an HTTP 200): a failure after is a broken stream
        opened = 0.0
        initial: list[Obj] | None = None  # a watch list's state, until its end (None: not one)

        def lasted() -> bool:
            return accepted and self._clock() - opened >= self._error_window

        try:
            k = self._kind()
            if self._rv is None and b.failures and (rv := self._cache.take_rv()) is not None:
                self._rv = rv  # a pass listed since this watch failed: watch from there (the cache holds it)
            elif self._rv is None and self._expiries and self._watch_list and self._cache.trust_left() > 0:
                # after a 410, while the passes still trust the cache: one request, and no resourceVersion that
                # can be too old (once the cache is no longer trusted, a list trusts it again even if the
                # watch fails after it)
                initial, self._own_list = [], True
            elif self._rv is None:
                items, self._rv = self._api.list_versioned(k, {}, self._fields, probe=False)
                self._own_list = True
                for missing in self._cache.replace(items):
                    self._wake(missing)
            heard, opened = False, self._clock()
            for typ, obj in self._api.watch(k, {}, self._fields, self._rv or None, initial=initial is not None):
                if self._stop.is_set():
                    return 0.0
                if typ == "OPEN":
                    if initial is None:
                        self._cache.fresh()
                    accepted, opened = True, self._clock()
                    continue
                if not heard:
                    heard = True
                    self._worked()
                self._rv = resource_version(obj) or self._rv
                if initial is not None:  # the state, as ADDED events, until the bookmark that ends it
                    if typ == "ADDED":
                        initial.append(obj)
                        continue
                    if typ != "BOOKMARK" or not initial_events_end(obj):
                        self._watch_list, self._rv = False, None  # a server that ignores the request
                        return 0.0  # list and watch instead, at once
                    for missing in self._cache.replace(initial):
                        self._wake(missing)
                    initial = None
                    continue
                if typ in ("ADDED", "MODIFIED", "DELETED") and (why := self._cache.event(typ, obj)) is not None:
                    self._wake(why)
            if initial is not None:  # ended before the state was whole: nothing learnt, start again
                self._rv = None
            if not heard and lasted():
                heard = True
                self._worked()
            if heard and self._clock() - opened < self._early:  # dropped, not timed out: as a broken stream
                self._restarts["error"] += 1
                self._cache.stale()
                return b.failed("watch closed early", floor=self._error_window)
            self._restarts["closed"] += 1  # the server's timeout: on from where it stopped
            if heard:
                return 0.0
            self._cache.stale()
            return b.failed("watch ended before any event")
        except BackingOff as exc:
            self._restarts["error"] += 1  # not reopened: the server is failing (a pass found it so first)
            self._cache.doubted()
            return exc.retry_in  # the client is backing off from a failing server: wait our turn
        except Expired as exc:
            if lasted():
                self._worked()  # a 410 after a while open is a first one, whatever the list it started from
            self._restarts["expired"] += 1
            self._rv = None
            self._cache.expired()  # the passes read what the watch listed, until it lists again
            self._expiries += 1
            log.info("resource-slices: watch expired (%s); listing again", exc)
            if self._expiries == 1 and not self._own_list:
                b.failed(exc, exc.retry_after)
                return 0.0  # the usual case (after a working watch): the state again at once
            # again, or on a watch from a list just made: the watch cannot be had, so a list (and a watch) each
            # time the last list stops being trusted (TRUST_S, the back-off maximum) is all that keeps this
            # node's slices checked; not one on every 410, however the jitter falls
            self._own_list = False
            return max(b.failed(exc, exc.retry_after), self._cache.trust_left())
        except _FINAL as exc:
            if isinstance(exc, InvalidObject) and initial is not None:
                self._watch_list = False  # a server without watch lists (sendInitialEvents): list and watch
                log.info("resource-slices: no watch list (%s); listing and watching instead", exc)
                return 0.0
            self._cache.abandoned()
            log.warning("resource-slices: not watching (%s); a deleted slice is re-created on the next pass", exc)
            return GIVE_UP
        except PublishError as exc:
            self._restarts["error"] += 1
            if accepted:  # the stream broke (a dropped connection): what the watch saw until then stands
                self._cache.stale()
                if lasted():
                    self._worked()
            else:  # the server failed the watch or its list: passes list, each when the client's back-off allows,
                self._cache.doubted()  # so the first pass the server answers finds what changed meanwhile
            wait = b.failed(exc, exc.retry_after, floor=self._error_window)
            log.warning("resource-slices: watch failed (%s); watching again in %.0f s", exc, wait)
            return wait

    def run(self) -> None:
        """Blocks until ``stop`` is set or the watch cannot be had at all. A watch that ends on an error (a bug)
        leaves the passes listing: no cache is read that no watch will list again."""
        try:
            while not self._stop.is_set():
                wait = self.step()
                if wait == GIVE_UP:
                    return
                if wait > 0:
                    self._stop.wait(wait)
        except BaseException:
            self._cache.abandoned()
            raise


def watch_slices(api: KubeApi, kind: Callable[[], Kind], *, fields: Mapping[str, str], cache: SliceCache,
                 wake: Callable[[str], None], stop: threading.Event, restarts: Counter[str],
                 backoff: Backoff | None = None) -> None:
    """Blocks until ``stop`` is set or the watch cannot be had at all."""
    SliceWatch(api, kind, fields=fields, cache=cache, wake=wake, restarts=restarts, backoff=backoff, stop=stop).run()
