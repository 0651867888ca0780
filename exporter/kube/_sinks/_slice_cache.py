"""This node's ResourceSlices of our driver as the watch last saw them, shared by the watch thread and the
publish pass.

While a watch is open (from a list's resourceVersion, or resumed from the last one seen), the cache is
*fresh*: a pass plans against it and sends no list. When the watch is down (it broke, its resourceVersion
expired, the server is failing), the cache stays *trusted* for :data:`TRUST_S` from the moment it last agreed
with the server (a list, or a watch open until then): passes plan against it meanwhile instead of listing, and
the watch, resumed from where it stopped, replays what was missed and wakes the agent for it. Only a cache
trusted no longer makes a pass list (which trusts it again, and gives the watch a resourceVersion to resume
from), so a node whose watch cannot be had is checked at least once every :data:`TRUST_S`, and a fleet whose
watches all break at once does not double its requests. When no watch will come (RBAC without ``watch``, a
bug), passes list every time. The sink writes its own results through (the objects the server returned, the
names it deleted), and names it is about to write are *pending*, so the events of its own writes change nothing
and wake nobody. Any other change to a slice we published (kubelet deleting the pool at its start, the garbage
collector deleting slices whose owner is gone, someone editing one) is a reason to publish now: it is returned
to the watch, which wakes the agent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from .._api._api import Obj, resource_version
from .._api._retry import MAX_DELAY_S

# How long the slices last seen stay a pass's view once no watch keeps them fresh: one back-off maximum, the
# longest the watch waits before it tries again, so a slice deleted while the watch is down is found within it.
TRUST_S = MAX_DELAY_S


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _older(event: Obj, have: Obj) -> bool:
    """The event's object is older than what is held. etcd's revisions are integers; anything else is taken
    as newer, so the cache never holds back a change."""
    a, b = resource_version(event), resource_version(have)
    return bool(a and b and a.isdigit() and b.isdigit() and int(a) < int(b))


class SliceCache:
    def __init__(self, trust_s: float = TRUST_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._fresh = False
        self._trust_s, self.clock = trust_s, clock
        self._agreed: float | None = None  # when the items last agreed with the server (``clock``); None: never
        self._watched = False  # a watch keeps this cache (or is on its way back): only then is it trusted
        self._pending: set[str] = set()
        self._published: frozenset[str] = frozenset()  # names of the pool after the last publish
        self._rv: str | None = None  # of a pass's list, for the watch to start from

    # -- the watch's side ---------------------------------------------------------------------------
    def watched(self, clock: Callable[[], float]) -> None:
        """A watch keeps this cache from now on; its trust runs on the watch's ``clock``."""
        with self._lock:
            self._watched, self.clock = True, clock

    def replace(self, items: Iterable[Obj]) -> list[str]:
        """A fresh list: the cache holds exactly ``items`` and is fresh. Returns why to publish now: slices
        published or held that are gone, and held ones someone else changed."""
        listed = {_name(o): o for o in items}
        with self._lock:
            known = (set(self._items) | self._published) - self._pending
            why = [f"resourceslice {n} missing" for n in sorted(known - set(listed))]
            why += [f"resourceslice {n} changed" for n, o in sorted(listed.items())
                    if n in self._items and n not in self._pending
                    and resource_version(o) != resource_version(self._items[n]) and not _older(o, self._items[n])]
            self._items, self._fresh, self._rv, self._agreed = listed, True, None, self.clock()
        return why

    def event(self, typ: str, obj: Obj) -> str | None:
        """One watch event; why to publish now, if it undoes or changes what the sink published."""
        name = _name(obj)
        with self._lock:
            have = self._items.get(name)
            if have is not None and _older(obj, have):
                return None
            mine = name in self._pending
            if typ == "DELETED":
                known = have is not None or name in self._published
                self._items.pop(name, None)
                return f"resourceslice {name} deleted" if known and not mine else None
            self._items[name] = obj
            changed = have is not None and resource_version(obj) != resource_version(have)
            return f"resourceslice {name} changed" if changed and not mine else None

    def listed(self, items: Iterable[Obj], rv: str) -> None:
        """A pass listed while no watch was open: the cache holds ``items`` (not fresh, trusted again), and the
        watch may start from ``rv`` instead of listing again (:meth:`take_rv`)."""
        with self._lock:
            self._items, self._rv, self._agreed = {_name(o): o for o in items}, rv or None, self.clock()

    def take_rv(self) -> str | None:
        """The resourceVersion of a pass's list not yet watched from (once), else None."""
        with self._lock:
            rv, self._rv = self._rv, None
            return rv

    def stale(self) -> None:
        """The watch is down (broken, expired, or held back while the server fails): no longer fresh, trusted
        for :data:`TRUST_S` from the moment it last agreed with the server."""
        with self._lock:
            if self._fresh:
                self._agreed = self.clock()  # the watch kept it right until now
            self._fresh = False

    def expired(self) -> None:
        """The watch's resourceVersion expired (410): no longer fresh, and the watch did not keep it right since
        it opened, so it stays trusted from when it last agreed; the watch lists again at once or on its
        back-off, and passes plan against it meanwhile (a slice deleted meanwhile is found by that list)."""
        with self._lock:
            self._fresh = False

    def doubted(self) -> None:
        """The server is failing and the watch waits for a pass's request to be answered: passes list (each a
        request the client sends only when due) until one is, which trusts the cache again."""
        with self._lock:
            self._fresh, self._agreed = False, None

    def abandoned(self) -> None:
        """No watch will keep this cache (none permitted, or it ended on a bug): passes list every time."""
        with self._lock:
            self._fresh, self._agreed, self._watched = False, None, False

    def fresh(self) -> None:
        """A watch is open again from where the cache stopped: the server replays what was missed."""
        with self._lock:
            self._fresh = True

    def trust_left(self) -> float:
        """Seconds a pass may still plan against the cache without a watch (0: it lists)."""
        with self._lock:
            return self._trust_left()

    def _trust_left(self) -> float:
        if self._fresh:
            return self._trust_s
        if not self._watched:
            return 0.0
        return max(0.0, self._agreed + self._trust_s - self.clock()) if self._agreed is not None else 0.0

    # -- the sink's side ----------------------------------------------------------------------------
    def view(self) -> list[Obj] | None:
        """The slices, while fresh or trusted; None: list them."""
        with self._lock:
            return [self._items[n] for n in sorted(self._items)] if self._trust_left() > 0 else None

    def writing(self, names: Iterable[str]) -> None:
        with self._lock:
            self._pending |= set(names)

    def written(self, stored: Iterable[Obj], deleted: Iterable[str], pool: Iterable[str]) -> None:
        """The sink's writes are done (or failed: then ``stored`` and ``deleted`` hold what did happen) and
        ``pool`` names the slices it means to be there."""
        with self._lock:
            for name in deleted:
                self._items.pop(name, None)
            for obj in stored:
                have = self._items.get(_name(obj))
                if have is None or not _older(obj, have):
                    self._items[_name(obj)] = obj
            self._pending.clear()
            self._published = frozenset(pool)
