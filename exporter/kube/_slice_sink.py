"""ResourceSlice and DeviceTaintRule appliers: list ours (one read), plan, write the difference.

Kubelet deletes every node-local slice when it starts: :meth:`ResourceSliceSink.watch` wakes the agent when
that happens, and each pass lists the pool, so a wiped slice is created again at once (on the next pass when
the watch is not permitted). Obsolete slices and taint rules go only on complete knowledge.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from topology import Snapshot

from .._sink import PublishResult
from ._api import MANAGED_BY, SLICE_VERSIONS, TAINT_RULE_VERSIONS, KubeApi, Obj, slice_kind, taint_rule_kind
from ._errors import PublishError, Unavailable
from ._retry import Backoff
from ._slice_watch import watch_slices
from ._slices import SliceConfig, build_slices, desired_devices, devices_of
from ._taints import desired_rules, rule_spec

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    delete: tuple[str, ...] = ()
    update: tuple[Obj, ...] = ()
    create: tuple[Obj, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.delete or self.update or self.create)


def _name(o: Obj) -> str:
    return str(o["metadata"]["name"])


def _same_slice(have: Obj, want: Obj) -> bool:
    h, w = have.get("spec", {}), want["spec"]
    owners = [o.get("uid") for o in have.get("metadata", {}).get("ownerReferences") or []]
    return (devices_of(have) == devices_of(want) and h.get("nodeName") == w["nodeName"]
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
    uid: str | None = None
    seen: dict[str, int] = field(default_factory=dict)


def pick_version(api: KubeApi, group: str, preferred: Sequence[str]) -> str:
    served = set(api.served_versions(group))
    for v in preferred:
        if v in served:
            return v
    raise Unavailable(f"{group} serves none of {', '.join(preferred)} (served: {', '.join(sorted(served)) or 'none'})")


class ResourceSliceSink:
    name = "resource-slices"

    def __init__(self, api: KubeApi, node: str, cfg: SliceConfig, taints: bool | None = None) -> None:
        self._api, self._node, self._cfg = api, node, cfg
        self._d = _Discovered(taints=taints)
        self._deleting: set[str] = set()  # names this sink deletes, so that the watch does not wake for them
        self._present: frozenset[str] = frozenset()  # names of the slices after the last publish

    def _setup(self) -> tuple[str, SliceConfig]:
        if self._d.version is None:
            self._d.version = pick_version(self._api, "resource.k8s.io", SLICE_VERSIONS)
        if self._d.taints is None:
            self._d.taints = self._api.server_minor() >= 36  # DRADeviceTaints is on by default from beta
        return self._d.version, SliceConfig(driver=self._cfg.driver, taints=self._d.taints)

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            version, cfg = self._setup()
            kind = slice_kind(version)
            observed = [o for o in self._api.list(kind, MANAGED_BY)
                        if o.get("spec", {}).get("driver") == cfg.driver and o["spec"].get("nodeName") == self._node]
            devices = desired_devices(snapshot, cfg, [d for o in observed for d in devices_of(o)])
            if self._d.uid is None:
                self._d.uid = self._api.get_node(self._node).uid
            plan = plan_slices(observed, devices, node=self._node, uid=self._d.uid, cfg=cfg, version=version,
                               complete=snapshot.complete)
            if plan.empty:
                self._present = frozenset(_name(o) for o in observed)
                return PublishResult(unchanged=len(observed))
            self._deleting = set(plan.delete)  # the events of earlier deletions have long arrived
            for name in plan.delete:
                self._api.delete(kind, name)
            stored = [self._api.apply(kind, o) for o in plan.update]
            stored += [self._api.create(kind, o) for o in plan.create]
            self._present = frozenset(_name(o) for o in [*plan.update, *plan.create])
            if cfg.taints and any(o.get("spec", {}).get("devices") and not devices_of(o)[0].get("taints")
                                  for o in stored):
                log.warning("%s: the server dropped device taints (DRADeviceTaints off): publishing without", self.name)
                self._d.taints = False
            return PublishResult(written=len(plan.delete) + len(stored))
        except PublishError as exc:
            self._d.uid = None  # a Node created again has a new uid
            log.warning("%s: %s", self.name, exc)
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")


    def watch(self, stop: threading.Event, wake: Callable[[str], None], backoff: Backoff | None = None) -> None:
        """Until ``stop``: call ``wake`` with a reason when someone else deletes one of this node's slices."""
        def ours(name: str) -> bool:
            if name in self._deleting:
                self._deleting.discard(name)
                return True
            return False

        watch_slices(self._api, lambda: slice_kind(self._setup()[0]), node=self._node, driver=self._cfg.driver,
                     ours=ours, expected=lambda: self._present, wake=wake, stop=stop, backoff=backoff)


class DeviceTaintRuleSink:
    """Opt-in: a DeviceTaintRule per degraded GPU of the NVIDIA GPU DRA driver, removed on recovery."""

    name = "device-taint-rules"

    def __init__(self, api: KubeApi, node: str, prefix: str, gpu_driver: str = "gpu.nvidia.com") -> None:
        self._api, self._node, self._prefix, self._driver = api, node, prefix, gpu_driver
        self._version: str | None = None

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            if self._version is None:
                self._version = pick_version(self._api, "resource.k8s.io", TAINT_RULE_VERSIONS)
            kind = taint_rule_kind(self._version)
            mine = {f"{self._prefix}/node": self._node} | MANAGED_BY
            current = {_name(o): o for o in self._api.list(kind, mine)
                       if o.get("metadata", {}).get("labels", {}).get(f"{self._prefix}/node") == self._node}
            want = {_name(o): o for o in desired_rules(snapshot, self._node, self._prefix, self._driver,
                                                       self._version)}
            written = 0
            for name in sorted(set(current) - set(want)) if snapshot.complete else ():
                self._api.delete(kind, name)
                written += 1
            for name, obj in sorted(want.items()):
                if name not in current:
                    self._api.create(kind, obj)
                    written += 1
                elif rule_spec(current[name]) != rule_spec(obj):
                    self._api.apply(kind, obj)
                    written += 1
            return PublishResult(written=written) if written else PublishResult(unchanged=len(want))
        except PublishError as exc:
            log.warning("%s: %s", self.name, exc)
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")
