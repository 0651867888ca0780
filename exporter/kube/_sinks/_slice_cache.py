"""This node's ResourceSlices of our driver: the informer's store (written by the watch alone) and a mutation cache
of the sink's own writes over it (resourceVersion-ordered, with a TTL), as the DRA resourceslice controller keeps.
A pass plans against :meth:`SliceCache.view` while the watch is fresh, else lists for itself.
Why: ``docs/kube-sync.md``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .._api._api import BOOKMARK_INTERVAL_S, Obj, resource_version

# How long a write of the sink's own stands over the store without the watch confirming it: the resourceslice
# controller's default (``DefaultMutationCacheTTL``), one default discovery interval.
MUTATION_TTL_S = 60.0


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _rv(obj: Obj) -> int | None:
    """etcd's revision as an integer; None where a server gives something else (then nothing is compared)."""
    rv = resource_version(obj)
    return int(rv) if rv is not None and rv.isdigit() else None


def _newer(a: int | None, b: int | None) -> bool:
    """``a`` is known to be newer than ``b``. Where either is not comparable (a server without integer
    resourceVersions) nothing is: the watch's word then wins over a write of the sink's own."""
    return a is not None and b is not None and a > b


@dataclass(frozen=True, slots=True, kw_only=True)
class _Mutation:
    obj: Obj | None  # None: a tombstone (deleted as of ``rv``)
    rv: int | None
    expires: float
    seen: bool = False  # a tombstone of a DELETED event that came while the sink was writing the slice


class SliceCache:
    def __init__(self, ttl_s: float = MUTATION_TTL_S, clock: Callable[[], float] = time.monotonic,
                 fresh_s: float = BOOKMARK_INTERVAL_S) -> None:
        self._lock = threading.Lock()
        self._store: dict[str, Obj] = {}
        self._at: int | None = None  # the resourceVersion the store's state is at (its last list or event)
        self._synced = False  # the watch committed a whole state (a list, or a watch list at its end)
        self._alive_until = float("-inf")  # the store is the server's view until then (``clock``)
        self._fresh_s = fresh_s
        self._mutations: dict[str, _Mutation] = {}
        self._writing: set[str] = set()  # created or updated by the sink, reply not back yet
        self._deleting: set[str] = set()
        self._published: frozenset[str] = frozenset()  # names of the pool after the last publish
        self._ttl_s, self.clock = ttl_s, clock

    # -- the watch's side: the only writer of the store ----------------------------------------------
    def replace(self, items: Iterable[Obj], rv: str | None = None) -> list[str]:
        """A whole state (a list, or a watch list at its end) at resourceVersion ``rv``: the store holds exactly
        ``items``, and every write of the sink's own that it is newer than is dropped. Returns why to publish now:
        slices published or held that are gone, and held ones someone else changed."""
        listed = {_name(o): o for o in items}
        at = int(rv) if rv is not None and rv.isdigit() else None
        with self._lock:
            # changed by someone else: judged before the mutations this state confirms are dropped below
            changed = [f"resourceslice {n} changed" for n, o in sorted(listed.items())
                       if n in self._store and o != self._store[n] and self._others(n, o)]
            self._mutations = {n: m for n, m in self._mutations.items() if _newer(m.rv, at)}
            known = (set(self._store) | self._published) - self._writing - self._deleting - set(self._mutations)
            missing = [f"resourceslice {n} missing" for n in sorted(known - set(listed))]
            self._store, self._synced, self._at = listed, True, at
            self._lived()
            for name, obj in listed.items():
                self._confirmed(name, _rv(obj))
        return missing + changed

    def event(self, typ: str, obj: Obj) -> str | None:
        """One watch event after the state; why to publish now, if someone else deleted or changed a slice."""
        name, rv = _name(obj), _rv(obj)
        with self._lock:
            self._lived()
            if _newer(rv, self._at) or self._at is None:
                self._at = rv
            have = self._store.get(name)
            if have is not None and rv is not None and not _newer(rv, _rv(have)):
                return None  # replayed, or older than what is held
            if typ == "DELETED":
                self._store.pop(name, None)
                known = have is not None or name in self._published
                ours = name in self._deleting or self._is_tombstone(name) or self._rewritten(name, rv)
                self._add_tombstone(name, rv, seen=name in self._writing)
                return f"resourceslice {name} deleted" if known and not ours else None
            self._store[name] = obj
            others = have is not None and obj != have and self._others(name, obj)
            self._confirmed(name, rv)
            return f"resourceslice {name} changed" if others else None

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

    def _others(self, name: str, obj: Obj) -> bool:
        """Not the event of a write of the sink's own (in flight, or whose reply carried this resourceVersion)."""
        m = self._mutations.get(name)
        return name not in self._writing and not (m is not None and m.obj is not None and m.rv == _rv(obj))

    def _rewritten(self, name: str, rv: int | None) -> bool:
        """A write of the sink's own is newer than ``rv``: a pass that listed while the watch was down already
        created the slice again."""
        m = self._mutations.get(name)
        return m is not None and m.obj is not None and _newer(m.rv, rv)

    def _is_tombstone(self, name: str) -> bool:
        m = self._mutations.get(name)
        return m is not None and m.obj is None

    def _confirmed(self, name: str, rv: int | None) -> None:
        """The store holds ``name`` at ``rv``: a mutation no newer is no longer needed."""
        m = self._mutations.get(name)
        if m is not None and not _newer(m.rv, rv):
            del self._mutations[name]

    def _add_tombstone(self, name: str, rv: int | None, *, seen: bool) -> None:
        """Deleted as of ``rv``: a tombstone, unless a write of ours is newer (created again after)."""
        m = self._mutations.get(name)
        if m is None or m.obj is None or not _newer(m.rv, rv):
            self._mutations[name] = _Mutation(obj=None, rv=rv, expires=self.clock() + self._ttl_s, seen=seen)

    def stored(self) -> list[Obj]:
        """The watch's store alone (none of the sink's writes), in name order."""
        with self._lock:
            return [self._store[n] for n in sorted(self._store)]

    def synced(self) -> bool:
        with self._lock:
            return self._synced

    # -- the sink's side ------------------------------------------------------------------------------
    def view(self) -> list[Obj] | None:
        """The slices (the newer of the store and the sink's writes, per name) while the store is the server's view;
        None while it may not be (no state yet, the watch down or silent too long, no watch): the pass lists."""
        with self._lock:
            now = self.clock()
            if not self._synced or now >= self._alive_until:
                return None
            self._mutations = {n: m for n, m in self._mutations.items() if m.expires > now}
            merged = dict(self._store)
            for name, m in self._mutations.items():
                have = merged.get(name)
                if m.obj is None and (have is None or not _newer(_rv(have), m.rv)):
                    merged.pop(name, None)  # deleted as of a resourceVersion no older than what the store holds
                elif m.obj is not None and (have is None or _newer(m.rv, _rv(have))):
                    merged[name] = m.obj
            return [merged[n] for n in sorted(merged)]

    def writing(self, names: Iterable[str], deleting: Iterable[str] = ()) -> None:
        with self._lock:
            self._writing |= set(names)
            self._deleting |= set(deleting)

    def written(self, stored: Iterable[Obj], deleted: Iterable[Obj], pool: Iterable[str]) -> list[str]:
        """The sink's writes are done (or failed: then ``stored`` and ``deleted`` hold what did happen):
        ``stored`` the server's replies, ``deleted`` the objects as they were when deleted, ``pool`` the names
        meant to be there. Returns why to publish again now: a write of ours the watch saw deleted after it."""
        why: list[str] = []
        with self._lock:
            expires = self.clock() + self._ttl_s
            for obj in deleted:
                self._add_tombstone(_name(obj), _rv(obj), seen=False)
            for obj in stored:
                name, rv = _name(obj), _rv(obj)
                m, have = self._mutations.get(name), self._store.get(name)
                if m is not None and m.seen and not _newer(rv, m.rv):
                    why.append(f"resourceslice {name} deleted while written")  # the watch saw it go after
                elif m is not None and m.obj is not None and _newer(m.rv, rv):
                    pass  # a newer write of ours stands
                elif have is None and rv is not None and self._at is not None and self._at >= rv:
                    why.append(f"resourceslice {name} deleted while written")  # the watch's list after it lacks it
                elif have is None or not _newer(_rv(have), rv):
                    self._mutations[name] = _Mutation(obj=obj, rv=rv, expires=expires)
            self._mutations = {n: dataclasses.replace(m, seen=False) for n, m in self._mutations.items()}
            self._writing.clear()
            self._deleting.clear()
            self._published = frozenset(pool)
        return why
