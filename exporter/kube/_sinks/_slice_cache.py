"""This node's ResourceSlices of our driver as the watch last saw them, shared by the watch thread and the
publish pass.

While a watch is open (from the list's resourceVersion, or resumed from the last one seen), the cache is
*fresh*: a pass plans against it and sends no list. After a 410 the watch's own list is the passes' view
until the watch lists again (:meth:`SliceCache.expired`). The sink writes its own results through (the objects the
server returned, the names it deleted), and names it is about to write are *pending*, so the events of its own
writes change nothing and wake nobody. Any other change to a slice we published (kubelet deleting the pool at
its start, the garbage collector deleting slices whose owner is gone, someone editing one) is a reason to
publish now: it is returned to the watch, which wakes the agent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .._api._api import Obj, resource_version


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _older(event: Obj, have: Obj) -> bool:
    """The event's object is older than what is held. etcd's revisions are integers; anything else is taken
    as newer, so the cache never holds back a change."""
    a, b = resource_version(event), resource_version(have)
    return bool(a and b and a.isdigit() and b.isdigit() and int(a) < int(b))


class SliceCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._fresh = False
        self._relisting = False  # after a 410: the watch lists again within one back-off maximum
        self._pending: set[str] = set()
        self._published: frozenset[str] = frozenset()  # names of the pool after the last publish
        self._rv: str | None = None  # of a pass's list, for the watch to start from

    # -- the watch's side ---------------------------------------------------------------------------
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
            self._items, self._fresh, self._rv = listed, True, None
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
        """A pass listed while no watch was open: the cache holds ``items`` (not fresh), and the watch may start
        from ``rv`` instead of listing again (:meth:`take_rv`)."""
        with self._lock:
            self._items, self._rv = {_name(o): o for o in items}, rv or None

    def take_rv(self) -> str | None:
        """The resourceVersion of a pass's list not yet watched from (once), else None."""
        with self._lock:
            rv, self._rv = self._rv, None
            return rv

    def stale(self) -> None:
        """The watch failed: passes list until a watch is open again."""
        with self._lock:
            self._fresh = self._relisting = False

    def expired(self) -> None:
        """The watch's resourceVersion expired (410): the watch lists again, at once or on its back-off (never
        later than one back-off maximum), and until then passes plan against what it last listed and saw
        (their own writes included) instead of listing too; a slice deleted meanwhile is found by that list,
        which wakes the agent."""
        with self._lock:
            self._fresh, self._relisting = False, True

    def fresh(self) -> None:
        """A watch is open again from where the cache stopped: the server replays what was missed."""
        with self._lock:
            self._fresh = True

    # -- the sink's side ----------------------------------------------------------------------------
    def view(self) -> list[Obj] | None:
        """The slices, when fresh or the watch is relisting after a 410; None: list them."""
        with self._lock:
            usable = self._fresh or self._relisting
            return [self._items[n] for n in sorted(self._items)] if usable else None

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
