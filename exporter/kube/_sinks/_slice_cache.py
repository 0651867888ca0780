"""This node's ResourceSlices of our driver, as the DRA resourceslice controller keeps them: an informer's store
(written by the watch alone) and a mutation cache of the sink's own writes over it (client-go's ``MutationCache``:
a write stands over an older store until the store's resourceVersion reaches it or its TTL runs out). The sync
compares the desired slices with :meth:`SliceCache.view` while the watch is fresh, else lists for itself; a change
of the view is why to sync again. Why: ``docs/kube-sync.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .._api._api import BOOKMARK_INTERVAL_S, Obj, resource_version

# How long a write of the sink's own stands over the store without the watch catching up with it: the resourceslice
# controller's default (``DefaultMutationCacheTTL``), one default discovery interval.
MUTATION_TTL_S = 60.0
_WORDS = {"ADDED": "added", "MODIFIED": "changed", "DELETED": "deleted"}


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _rv(obj: Obj) -> int | None:
    """etcd's revision as an integer; None where a server gives something else (then nothing is compared)."""
    rv = resource_version(obj)
    return int(rv) if rv is not None and rv.isdigit() else None


@dataclass(frozen=True, slots=True)
class _Mutation:
    obj: Obj  # the server's reply to a create or an update of ours
    rv: int | None  # None: not comparable, stands until the store next hears of the name or gets a state
    expires: float


class SliceCache:
    def __init__(self, ttl_s: float = MUTATION_TTL_S, clock: Callable[[], float] = time.monotonic,
                 fresh_s: float = BOOKMARK_INTERVAL_S, noun: str = "resourceslice") -> None:
        """``noun``: what the reasons to sync call an object (the fleet controller keeps one cache a kind of its
        own, ``fresh_s`` infinite: an informer's store, believed while it holds a state)."""
        self._noun = noun
        self._lock = threading.Lock()
        self._store: dict[str, Obj] = {}
        self._at: int | None = None  # the resourceVersion the store's state is at (its last state or event)
        self._synced = False  # the watch committed a whole state (a list, or a watch list at its end)
        self._alive_until = float("-inf")  # the store is the server's view until then (``clock``)
        self._fresh_s = fresh_s
        self._mutations: dict[str, _Mutation] = {}
        self._ttl_s, self.clock = ttl_s, clock

    # -- the watch's side: the only writer of the store ----------------------------------------------
    def replace(self, items: Iterable[Obj], rv: str | None = None) -> list[str]:
        """A whole state (a list, or a watch list at its end) at resourceVersion ``rv``: the store holds exactly
        ``items``. Returns why to sync: each slice of the view that the state changed (a slice new to the view only
        when the store had a state before: until the first, the passes listed for themselves)."""
        listed = {_name(o): o for o in items}
        with self._lock:
            before, had_state = self._versions(), self._synced
            self._mutations = {n: m for n, m in self._mutations.items() if m.rv is not None}
            self._store, self._synced = listed, True
            self._at = int(rv) if rv is not None and rv.isdigit() else None
            self._lived()
            after = self._versions()
        return [f"{self._noun} {n} {'missing' if n not in after else 'changed' if n in before else 'added'}"
                for n in sorted(before.keys() | after.keys())
                if before.get(n) != after.get(n) and (had_state or n in before)]

    def event(self, typ: str, obj: Obj) -> str | None:
        """One watch event after the state; why to sync, when it changed the view (not when it only brings the
        store up to a write of the sink's own that the view already showed)."""
        name, rv = _name(obj), _rv(obj)
        with self._lock:
            self._lived()
            have = self._store.get(name)
            if have is not None and rv is not None and (old := _rv(have)) is not None and rv <= old:
                return None  # replayed, or older than what is held
            before = self._versions()
            if rv is not None and (self._at is None or rv > self._at):
                self._at = rv
            if (m := self._mutations.get(name)) is not None and m.rv is None:
                del self._mutations[name]
            if typ == "DELETED":
                self._store.pop(name, None)
            else:
                self._store[name] = obj
            changed = self._versions() != before
        return f"{self._noun} {name} {_WORDS.get(typ, typ.lower())}" if changed else None

    def alive(self) -> None:
        """The watch showed life (an event, a bookmark, a stream the server ended at its timeout): the store is the
        server's view for one bookmark interval more."""
        with self._lock:
            self._lived()

    def _lived(self) -> None:
        self._alive_until = self.clock() + self._fresh_s

    def alive_until(self) -> float:
        with self._lock:
            return self._alive_until

    def revert_alive(self, until: float) -> None:
        """The store was alive only ``until``: what said more (a bookmark, then a 410 on the same stream) was wrong."""
        with self._lock:
            self._alive_until = min(self._alive_until, until)

    def abandoned(self) -> None:
        """No watch will keep the store (none permitted, or it ended on a bug): passes list for themselves."""
        with self._lock:
            self._synced = False

    def stored(self) -> list[Obj]:
        """The watch's store alone (none of the sink's writes), in name order."""
        with self._lock:
            return [self._store[n] for n in sorted(self._store)]

    def synced(self) -> bool:
        with self._lock:
            return self._synced

    # -- the mutation cache ------------------------------------------------------------------------------
    def _caught_up(self, rv: int) -> bool:
        """The store's state is at or after ``rv``: it holds that write, or what became of it since."""
        return self._at is not None and self._at >= rv

    def _merged(self) -> dict[str, Obj]:
        """The store with each write of the sink's own that it has not caught up with over it (by resourceVersion:
        the store's copy of that name is older), unless the write's TTL ran out."""
        now = self.clock()
        self._mutations = {n: m for n, m in self._mutations.items()
                           if m.expires > now and (m.rv is None or not self._caught_up(m.rv))}
        return self._store | {n: m.obj for n, m in self._mutations.items()}

    def _versions(self) -> dict[str, object]:
        """What the view holds of each name: its resourceVersion (the object itself where it has none)."""
        return {n: resource_version(o) or o for n, o in self._merged().items()}

    # -- the sink's side ------------------------------------------------------------------------------
    def view(self) -> list[Obj] | None:
        """The actual slices (the store, with the sink's own writes over it) while the store is the server's view;
        None while it may not be (no state yet, the watch down or silent too long, no watch): the sync lists."""
        with self._lock:
            if not self._synced or self.clock() >= self._alive_until:
                return None
            merged = self._merged()
            return [merged[n] for n in sorted(merged)]

    def mutated(self, replies: Iterable[Obj]) -> list[str]:
        """The server's replies to the sink's creates and updates, for the mutation cache. Returns why to sync
        again (requeue): a reply the store has already gone past without holding it (deleted or changed after
        it, in a state no event will describe again)."""
        why: list[str] = []
        with self._lock:
            expires = self.clock() + self._ttl_s
            for obj in replies:
                name, rv = _name(obj), _rv(obj)
                if rv is None or not self._caught_up(rv):
                    old = self._mutations.get(name)
                    if old is None or old.rv is None or rv is None or old.rv < rv:
                        self._mutations[name] = _Mutation(obj, rv, expires)
                elif (have := self._store.get(name)) is None or _rv(have) != rv:
                    why.append(f"{self._noun} {name} {'deleted' if have is None else 'changed'} after our write")
        return why
