"""The controller's own objects, kept by watches instead of a list each sync: one informer for each kind of each part
the server serves (a namespaced kind in the namespace the controller writes it in; the Slurm ConfigMap by its name
too), restricted to the controller's ``managed-by`` label, so what crosses the network is what it made.

Each informer keeps its objects in the agent's mutation cache (:class:`.._sinks._slice_cache.SliceCache`, client-go's
``MutationCache``): the server's reply to each of the sync's applies stands over the watch's store until the store's
resourceVersion reaches it (or its time to live runs out), so a sync just after a write sees that write and does
not make it again while the watch event lags. A delete stands likewise: while the store still holds the deleted
object at the resourceVersion it was deleted at, the sync does not see it (nor delete it again). A kind whose part
the server does not serve has no informer; a part served later gets its informers then (their first list), and a
part no longer served loses them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from .._api._api import Kind, KubeApi, Obj, resource_version
from .._fleet._wanted import KINDS, PART_KINDS, SLURM_CONFIGMAP
from .._sinks._slice_cache import MUTATION_TTL_S, SliceCache
from ._informer import Informer
from ._sync import MANAGED_BY, MANAGER

Where = tuple[Kind, str | None]  # a kind, and the namespace it is watched in (None: cluster-scoped)


class OwnedInformer(Informer):
    """An informer of the controller's objects of one kind whose store is a mutation cache (``cache``)."""

    def __init__(self, api: KubeApi, kind: Kind, namespace: str | None, *, changed: Callable[[], None],
                 log: Callable[[str], None]) -> None:
        fields = {"metadata.name": SLURM_CONFIGMAP} if kind == KINDS["ConfigMap"] else None
        super().__init__(api, kind, keep=lambda o: o, changed=changed, log=log, labels={MANAGED_BY: MANAGER},
                         fields=fields, namespace=namespace)
        # believed while it holds a state (as a client-go informer's store): a watch that is down is backing off
        # and the syncs' writes would fail as well
        self.cache = SliceCache(fresh_s=math.inf, noun=f"{kind.kind} {namespace + '/' if namespace else ''}")

    def _replace(self, items: list[Obj], rv: str) -> None:
        self.cache.replace(items, rv)

    def _event(self, typ: str, obj: Obj) -> bool:
        return self.cache.event(typ, obj) is not None


class Owned:
    """The informers of the controller's own kinds, and the sync's view of them (:class:`._sync.Observed`)."""

    def __init__(self, api: KubeApi, namespaces: Mapping[str, str], *, changed: Callable[[], None],
                 log: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        """``namespaces``: a namespaced kind's plural -> the namespace its objects are written in."""
        self._api, self._namespaces, self._changed, self._log, self._clock = api, namespaces, changed, log, clock
        self._running: dict[Where, tuple[OwnedInformer, threading.Event]] = {}
        self._gone: dict[tuple[Kind, str | None, str], tuple[str | None, float]] = {}  # deletes the store lags
        self.lists = 0  # informers started (each lists once, then watches)

    def _where(self, parts: Iterable[str]) -> set[Where]:
        kinds = {KINDS[n] for p in parts for n in PART_KINDS[p]}
        return {(k, self._namespaces[k.plural] if k.namespaced else None) for k in kinds}

    def ensure(self, parts: Sequence[str]) -> None:
        """Informers for exactly the kinds of ``parts`` (those served): new ones start, others stop."""
        want = self._where(parts)
        for where in [w for w in self._running if w not in want]:
            self._running.pop(where)[1].set()
        for where in sorted(want - self._running.keys(), key=lambda w: (w[0].plural, w[0].group)):
            stop = threading.Event()
            informer = OwnedInformer(self._api, where[0], where[1], changed=self._changed, log=self._log)
            self._running[where] = informer, stop
            self.lists += 1
            threading.Thread(target=informer.run, args=(stop,), daemon=True, name="topolink-owned").start()

    def synced(self) -> bool:
        """Every informer holds its first list (until then a sync waits: the list queues one)."""
        return all(i.synced.is_set() for i, _ in self._running.values())

    def stop(self) -> None:
        for _, stop in self._running.values():
            stop.set()
        self._running.clear()

    # -- the sync's side (one thread) ------------------------------------------------------------------------
    def objects(self, kind: Kind, namespace: str | None) -> list[Obj] | None:
        """The controller's objects of ``kind`` in ``namespace``: the store with the sync's writes over it, less
        what it deleted that the store still holds; None where no informer keeps them (the sync lists)."""
        ns = namespace if kind.namespaced else None
        held = self._running.get((kind, ns))
        view = held[0].cache.view() if held is not None else None
        if view is None:
            return None
        now, named = self._clock(), {str((o.get("metadata") or {}).get("name", "")): o for o in view}
        for gone in [g for g in self._gone if g[:2] == (kind, ns)]:
            rv, until = self._gone[gone]
            if (obj := named.get(gone[2])) is None or until <= now or resource_version(obj) != rv:
                del self._gone[gone]  # the store caught up, or the object changed since
        return [o for n, o in named.items() if (kind, ns, n) not in self._gone]

    def stored(self, kind: Kind, reply: Obj) -> None:
        """The server's reply to an apply: over the store until the watch reaches it."""
        held = self._running.get((kind, (reply.get("metadata") or {}).get("namespace") if kind.namespaced else None))
        if held is not None and held[0].cache.mutated([reply]):
            self._changed()  # the store went past the write already: sync again

    def deleted(self, kind: Kind, obj: Obj) -> None:
        """An object the sync deleted: not shown while the store holds it as it was."""
        meta = obj.get("metadata") or {}
        self._gone[kind, meta.get("namespace") if kind.namespaced else None, meta.get("name", "")] = (
            resource_version(obj), self._clock() + MUTATION_TTL_S)
