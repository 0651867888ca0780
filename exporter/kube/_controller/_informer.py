"""An informer: one list, then a watch from the list's resourceVersion; its thread is the only writer of its store.

The rules are the agent's (``docs/kube-sync.md``): a stream the server ends is opened again from the last
resourceVersion (bookmarks keep it recent); 410 Gone lists again; any other failure waits on the backoff (its
Retry-After a floor, the wait jittered and doubling up to ``MAX_WAIT_S``, at least ``ERROR_WINDOW_S`` after a stream
broke so that replicas dropped together come back spread) and tries again: nothing is given up. A 410 lists again at
once the first time, then (410 after 410, no watch ended well between) on the same backoff; a silent stream (nothing
for ``SILENT_S``) is listed and watched again, at once the first time: a list, not a watch from where it stopped,
because a path that swallowed one stream's events may swallow the next one's (a watch opened while a proxy drops
events stays silent another ``SILENT_S``) and a list is a request that ends (the agent's passes list for themselves
once its watch shows no life). Every change calls ``changed()`` (the controller's queue coalesces them). A label
selector, a field selector and a namespace narrow what crosses the network; :class:`._owned.OwnedInformer` keeps the
controller's own objects through the agent's mutation cache instead of a plain store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._api._api import Kind, KubeApi, Obj, resource_version
from .._api._errors import BackingOff, Expired, PublishError, Silent
from .._api._retry import Backoff

ERROR_WINDOW_S = 2.0
MAX_WAIT_S = 30.0  # the longest wait between tries: client-go's reflector's backoff maximum (one leader, not a fleet)


def _name(obj: Obj) -> str:
    """The store's key: the name, behind its namespace for a namespaced kind."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


class Informer:
    def __init__(self, api: KubeApi, kind: Kind, *, keep: Callable[[Obj], Obj | None],
                 changed: Callable[[], None], log: Callable[[str], None], fields: Mapping[str, str] | None = None,
                 labels: Mapping[str, str] | None = None, namespace: str | None = None,
                 backoff: Backoff | None = None) -> None:
        """``keep(obj)``: what the store holds of an object (None: not ours to hold)."""
        self._api, self._kind, self._keep, self._changed, self._log = api, kind, keep, changed, log
        self._fields, self._labels = dict(fields or {}), dict(labels or {})
        # a namespace only where given: a port's list_versioned and watch without it list and watch every namespace
        self._where: dict[str, Any] = {"namespace": namespace} if namespace else {}
        self._backoff = backoff or Backoff(cap=MAX_WAIT_S)
        self._lock = threading.Lock()
        self._store: dict[str, Obj] = {}
        self._rv: str | None = None
        self.synced = threading.Event()  # the store holds one whole list

    def items(self) -> dict[str, Obj]:
        """A copy of the store (name, or namespace/name, -> what ``keep`` held)."""
        with self._lock:
            return dict(self._store)

    def _put(self, name: str, obj: Obj | None) -> bool:
        with self._lock:
            if obj is None:
                return self._store.pop(name, None) is not None
            if self._store.get(name) == obj:
                return False
            self._store[name] = obj
            return True

    def _replace(self, items: list[Obj], rv: str) -> None:
        """The store holds exactly ``items`` (a list at ``rv``)."""
        fresh: dict[str, Obj] = {}
        for obj in items:
            if (held := self._keep(obj)) is not None:
                fresh[_name(obj)] = held
        with self._lock:
            self._store = fresh

    def _event(self, typ: str, obj: Obj) -> bool:
        """One watch event into the store; whether what the store shows changed."""
        return self._put(_name(obj), None if typ == "DELETED" else self._keep(obj))

    def _list(self) -> None:
        items, rv = self._api.list_versioned(self._kind, self._labels, self._fields, **self._where)
        self._replace(items, rv)
        self._rv = rv or None
        self.synced.set()
        self._changed()

    def _watch(self, stop: threading.Event) -> None:
        for typ, obj in self._api.watch(self._kind, self._labels, self._fields, resource_version=self._rv,
                                        **self._where):
            if stop.is_set():  # leadership ended: at the stream's next event or bookmark (a minute at most)
                return
            if typ == "OPEN":
                continue
            if rv := resource_version(obj):
                self._rv = rv
            if typ == "BOOKMARK":
                continue
            if self._event(typ, obj):
                self._changed()

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` (checked at each event: a stream ends at its next event, at the latest
        at the server's next bookmark, a minute apart)."""
        while not stop.is_set():
            try:
                if self._rv is None:
                    self._list()
                self._watch(stop)
                self._backoff.succeeded()
            except Expired as exc:  # list again: at once the first time, then on the backoff (a server that
                self._rv = None  # expires every watch is not listed in a loop: a fleet's whole list each time)
                if (wait := self._backoff.failed(exc, floor=ERROR_WINDOW_S, at_once=self._backoff.will_reset())) > 0:
                    self._log(f"watch {self._kind.plural}: {exc}; listed again in {wait:.1f} s")
                    stop.wait(wait)
            except BackingOff as exc:
                stop.wait(exc.retry_in)
            except PublishError as exc:
                if silent := isinstance(exc, Silent):  # what the path swallowed is read by a list, a request that
                    self._rv = None  # ends; a watch from here may be as silent, and the replay lost with it
                wait = self._backoff.failed(exc, exc.retry_after, floor=ERROR_WINDOW_S,  # a silent stream: again at
                                            at_once=silent and self._backoff.will_reset())  # once
                self._log(f"watch {self._kind.plural}: {exc}; again in {wait:.1f} s")
                stop.wait(wait)
