"""The ResourceSlice sink: reconciles this node's slices as the DRA resourceslice controller does. Each sync compares
the desired slices (from the last discovery) with the actual ones (the cache's view: the watch's store with the
mutation cache of our writes over it; or one list of the sync's own while the store may be stale) and writes only
the difference; obsolete slices go only on complete knowledge. :meth:`ResourceSliceSink.watch` feeds the store
and queues a sync when the view changes (kubelet wiping the pool at its start). Why: ``docs/kube-sync.md``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from topology import Snapshot

from ..._core._sink import PublishResult
from .._api._api import MANAGED_BY, RESOURCE_GROUP, SLICE_VERSIONS, Kind, KubeApi, Obj, slice_kind
from .._api._errors import NotFound, PublishError, Unavailable, retry_floor
from .._api._retry import Backoff
from .._desired._slices import SliceConfig, build_slices, desired_devices, devices_of
from ._adopt import Adopter, NotOurs
from ._slice_cache import SliceCache
from ._slice_watch import EARLY_CLOSE_S, RESTART_REASONS, SliceWatch, slice_fields

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    delete: tuple[str, ...] = ()
    update: tuple[Obj, ...] = ()
    create: tuple[Obj, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.delete or self.update or self.create)


class NotServed(Unavailable):
    """The server does not serve the resource at all (a feature gate off): nothing to write or remove."""


def _name(o: Obj) -> str:
    return str(o["metadata"]["name"])


def _same_slice(have: Obj, want: Obj) -> bool:
    h, w = have.get("spec", {}), want["spec"]
    owners = [o.get("uid") for o in have.get("metadata", {}).get("ownerReferences") or []]
    labels = have.get("metadata", {}).get("labels") or {}
    return (devices_of(have) == devices_of(want) and h.get("nodeName") == w["nodeName"]
            and all(labels.get(k) == v for k, v in MANAGED_BY.items())
            and (h.get("pool") or {}).get("resourceSliceCount") == w["pool"]["resourceSliceCount"]
            and owners == [o["uid"] for o in want["metadata"]["ownerReferences"]])


def plan_slices(observed: Sequence[Obj], devices: Sequence[Obj], *, node: str, uid: str, cfg: SliceConfig,
                version: str, complete: bool) -> Plan:
    current = {_name(o): o for o in observed}
    generation = max((int(o["spec"]["pool"].get("generation", 0)) for o in observed), default=0)
    want = build_slices(devices, node=node, node_uid=uid, cfg=cfg, version=version, generation=generation)
    extra = tuple(sorted(set(current) - {_name(w) for w in want})) if complete else ()
    if not extra and all(_name(w) in current and _same_slice(current[_name(w)], w) for w in want):
        return Plan()
    want = build_slices(devices, node=node, node_uid=uid, cfg=cfg, version=version,
                        generation=generation + 1)  # consumers read the highest only
    return Plan(delete=extra, update=tuple(w for w in want if _name(w) in current),
                create=tuple(w for w in want if _name(w) not in current))


@dataclass(slots=True)
class _Discovered:
    version: str | None = None
    taints: bool | None = None
    uid: str | None = None  # the Node's, for the ownerReference: read again whenever it may have changed


class _WatchKind:
    """The watch's own choice of API version, its thread's alone (the sync worker keeps its own in ``_Discovered``)."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._version: str | None = None

    def __call__(self) -> Kind:
        if self._version is None:
            self._version = pick_version(self._api, RESOURCE_GROUP, SLICE_VERSIONS, "resourceslices")
        return slice_kind(self._version)

    def forget(self) -> None:
        self._version = None


def pick_version(api: KubeApi, group: str, preferred: Sequence[str], plural: str) -> str:
    """The first of ``preferred`` that serves ``plural``; :class:`NotServed` when none does."""
    served = set(api.served_versions(group))
    for v in preferred:
        if v in served and plural in api.served_resources(group, v):
            return v
    raise NotServed(f"{group} serves {plural} in none of {', '.join(preferred)} "
                    f"(versions served: {', '.join(sorted(served)) or 'none'})")


class ResourceSliceSink:
    name = "resource-slices"

    def __init__(self, api: KubeApi, node: str, cfg: SliceConfig, taints: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._api, self._node, self._cfg = api, node, cfg
        self._d = _Discovered(taints=taints)
        self._fields = slice_fields(node, cfg.driver)
        self._cache = SliceCache(clock=clock)
        self._restarts: Counter[str] = Counter(dict.fromkeys(RESTART_REASONS, 0))
        self._adopter = Adopter(self.name)
        self._wake: Callable[[str], None] = lambda _why: None  # the watch's, once it runs
        self._watch: SliceWatch | None = None
        # What the watch asks of the sync worker (the thread that publishes, the only one to touch ``_d``): "uid"
        # (read the Node's uid again) or "version" (choose the API version again), taken at the next pass's start.
        self._requests: queue.SimpleQueue[str] = queue.SimpleQueue()

    def _ours(self, have: Obj) -> bool:
        """Ours by every mark but the label: our driver, our node, our pool."""
        spec = have.get("spec") or {}
        return (spec.get("driver") == self._cfg.driver and spec.get("nodeName") == self._node
                and (spec.get("pool") or {}).get("name") == self._node)

    def _setup(self) -> tuple[str, SliceConfig]:
        """The version and config to publish with: the sync worker's alone, after the watch's requests."""
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                break
            if request == "uid":
                self._d.uid = None
            else:
                self._d.version = None
        if self._d.version is None:
            self._d.version = pick_version(self._api, RESOURCE_GROUP, SLICE_VERSIONS, "resourceslices")
        if self._d.taints is None:
            self._d.taints = self._api.server_minor() >= 36  # DRADeviceTaints is on by default from beta
        return self._d.version, SliceConfig(driver=self._cfg.driver, taints=self._d.taints)

    def _observed(self, kind: Kind) -> list[Obj]:
        """This node's slices of our driver: the cache's view while the watch is alive, else one list of the
        pass's own (field selectors, not our label: one that lost it is still ours), not written to the cache."""
        cached = self._cache.view()
        if cached is not None:
            return cached
        return self._api.list_versioned(kind, {}, self._fields)[0]

    def publish(self, snapshot: Snapshot) -> PublishResult:
        """One sync: the desired slices (from ``snapshot``, the last discovery) against the actual ones (the cache's
        view, or a list of the pass's own), writing only the difference."""
        stored: list[Obj] = []
        deleted: list[str] = []
        try:
            version, cfg = self._setup()
            kind = slice_kind(version)
            observed = self._observed(kind)
            devices = desired_devices(snapshot, cfg, [d for o in observed for d in devices_of(o)])
            if self._d.uid is None:
                self._d.uid = self._api.get_node(self._node).uid
            plan = plan_slices(observed, devices, node=self._node, uid=self._d.uid, cfg=cfg, version=version,
                               complete=snapshot.complete)
            if plan.empty:
                return PublishResult(unchanged=len(observed))
            try:
                self._write(kind, plan, stored, deleted)
            finally:
                for why in self._cache.mutated(stored):  # the store already went past a write: sync again
                    self._wake(why)
            if cfg.taints and any(o.get("spec", {}).get("devices") and not devices_of(o)[0].get("taints")
                                  for o in stored):
                log.warning("%s: the server dropped device taints (DRADeviceTaints off): publishing without", self.name)
                self._d.taints = False
            return PublishResult(written=len(deleted) + len(stored))
        except NotOurs as exc:
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")  # once: skipped from now on
        except PublishError as exc:
            # a 404 or a conflict may say the Node's uid is out of date (a Node deleted and created again has a
            # new uid): read it afresh on the next pass (the slices are the watch's to set right); a server that
            # failed or was not asked says nothing of the Node, and a request more after an outage would be waste
            if not isinstance(exc, Unavailable):
                self._d.uid = None
            log.debug("%s: %s", self.name, exc)  # the agent logs the failed publish, once
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}", retry_after=retry_floor(exc))

    def _write(self, kind: Kind, plan: Plan, stored: list[Obj], deleted: list[str]) -> None:
        """The plan's requests; what the server did lands in ``stored`` (its replies) and ``deleted``. A slice to
        delete that is gone already (the store had not seen its delete yet) is what was wanted."""
        for name in plan.delete:
            try:
                self._api.delete(kind, name)
            except NotFound:
                continue
            deleted.append(name)
        stored += [self._api.apply(kind, o) for o in plan.update]
        stored += [self._adopter.create(self._api, kind, o, self._ours) for o in plan.create
                   if not self._adopter.still_foreign(self._api, kind, _name(o))]

    def watcher(self, stop: threading.Event, wake: Callable[[str], None],
                backoff: Backoff | None = None) -> SliceWatch:
        """The watch, to be stepped (:meth:`SliceWatch.step`) or run (:meth:`watch`)."""
        def changed(why: str) -> None:
            self._requests.put("uid")  # for the sync worker: the watch thread touches none of the sink's state
            wake(why)

        kind = _WatchKind(self._api)

        def pick() -> None:
            kind.forget()
            self._requests.put("version")

        self._wake = changed
        if self._watch is None:
            self._api.on_answer(self.wake_watch)  # the server answers after failing: the watch tries at once
        self._watch = SliceWatch(self._api, kind, fields=self._fields, cache=self._cache, wake=changed,
                                 restarts=self._restarts, backoff=backoff, stop=stop, early=EARLY_CLOSE_S, pick=pick)
        return self._watch

    def watch(self, stop: threading.Event, wake: Callable[[str], None], backoff: Backoff | None = None) -> None:
        """Until ``stop``: keep the store fresh, and call ``wake`` with a reason when the view of this node's slices
        changes (the Node's uid is then read again: the garbage collector deletes slices whose owner is gone)."""
        self.watcher(stop, wake, backoff).run()

    def wake_watch(self) -> None:
        """Ends the watch's wait now: the server answered after failing, or ``stop`` was set (the watch returns)."""
        if (watch := self._watch) is not None:
            watch.poke()

    @property
    def cache(self) -> SliceCache:
        """The watch's store and the sink's own writes over it."""
        return self._cache

    def watch_error(self) -> str:
        """Why the watch is refused, with the fix (a permission to grant); empty while it is not."""
        watch = self._watch
        return (watch.problem or "") if watch is not None else ""

    def watch_restarts(self) -> dict[str, int]:
        """Times the watch was opened again, by reason (every reason, from 0)."""
        return dict(self._restarts)
