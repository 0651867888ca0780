"""The fleet controller: while it holds the Lease, two informers (Nodes with our labels, our driver's
ResourceSlices) feed one coalescing queue, and each sync computes what the fleet wants (``_fleet._wanted``, the
code ``topolink cluster`` runs) and writes only the difference (``_sync``) from what it made, as informers of its own
kinds keep it (``_owned``: one list each when it starts leading, then watches; a change of its objects queues a
sync too). A resync every ``resync_s`` asks the server again which kinds it serves (a part whose CRDs are not
served is said once, and its informers started, and its objects written, once they are) and syncs. A failed sync
is tried again on the backoff (Retry-After a floor): nothing is given up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from .._api._api import Kind, KubeApi, Obj, slice_kind
from .._api._errors import PublishError
from .._api._retry import Backoff
from .._desired._claims import ClaimClass
from .._fleet._claims_read import claim_classes
from .._fleet._levels import HOSTNAME
from .._fleet._wanted import Parts, wanted
from ._events import NotAdmitted, Recorder
from ._informer import Informer
from ._lease import LeaderElector, LeaseTimes
from ._limit import TokenBucket, WriteGate
from ._owned import Owned
from ._pending import (
    REASON,
    asked,
    explain,
    exposition,
    in_use,
    keep_claim,
    keep_device_slice,
    keep_pod,
    metrics,
    pod_note,
)
from ._queue import SyncQueue
from ._sync import served_parts, sync

NODES = Kind("", "v1", "Node", "nodes")
PODS = Kind("", "v1", "Pod", "pods", namespaced=True)
CLAIMS = Kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", namespaced=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    parts: Parts = field(default_factory=Parts)
    driver: str = "gpu.topology"  # the agents' ResourceSlice driver
    namespace: str = "topolink"  # the Lease's
    lease_name: str = "topolink-controller"
    identity: str = "topolink-controller"
    times: LeaseTimes = field(default_factory=LeaseTimes)
    resync_s: float = 300.0
    delay_s: float = 1.0  # a sync waits this long after the last change it follows: changes in between join it
    delay_max_s: float = 5.0  # ... and at most this long after the first (changes that never stop)
    write_qps: float = 20.0  # the sync's writes: a token bucket (_limit), kube-controller-manager's client's
    write_burst: int = 30
    explain: bool = True  # pending pods of our templates told why (an Event), free groups counted (a metric)


class Controller:
    def __init__(self, api: KubeApi, cfg: ControllerConfig, log: Callable[[str], None],
                 lease_api: KubeApi | None = None) -> None:
        """``lease_api``: a client of its own for the Lease (default ``api``), whose backoff a failing sync does
        not share: renewals go on while the sync backs off."""
        self._api, self._cfg, self._log = api, cfg, log
        self._lease_api = lease_api or api
        self._writes = TokenBucket(cfg.write_qps, cfg.write_burst)  # the sync's writes; never the Lease's
        self._said: dict[str, str] = {}  # part -> what was last said of it ('' served)
        self._notes: tuple[str, ...] = ()  # what the last sync left out, and why (said when it changes)
        self.syncs = 0  # syncs done (tests wait on it)
        # the last sync's classes: class -> its nodes, and class -> its groups (where its slices were read)
        self._known: tuple[dict[str, list[str]], dict[str, ClaimClass]] | None = None
        self.free: list[tuple[str, str, int, int]] = []  # (class, kind, size, free groups): the metric
        self.leading = False
        self.owned: Owned | None = None  # the informers of its own kinds, while it leads
        self._gate: WriteGate  # each lead's: its lost event and its queue

    def metrics_text(self) -> str:
        """The ``/metrics`` body: what the last sync and the last look at the pending pods counted."""
        known = self._known
        return exposition(self.free if self.leading else [], known[0] if known and self.leading else {}, self.leading)

    def _keep_node(self, obj: Obj) -> Obj | None:
        prefix = self._cfg.parts.claim.prefix
        labels = (obj.get("metadata") or {}).get("labels") or {}
        named = {*self._cfg.parts.levels, self._cfg.parts.slurm_node_label, HOSTNAME}
        kept = {k: v for k, v in labels.items() if k.startswith(prefix + "/") or k in named}
        return kept if f"{prefix}/gpu.count" in kept or f"{prefix}/claim-class" in kept else None

    def _keep_slice(self, obj: Obj) -> Obj | None:
        spec = obj.get("spec") or {}
        if spec.get("driver") != self._cfg.driver:
            return None
        return {"spec": {k: spec[k] for k in ("nodeName", "driver", "pool", "devices") if k in spec}}

    def _say(self, served: dict[str, str]) -> list[str]:
        for part, missing in served.items():
            if self._said.get(part) != missing:
                self._log(f"{part}: not written: the server does not serve {missing} (install its CRDs, or switch "
                          f"it off with --no-{part})" if missing else f"{part}: served: kept current")
                self._said[part] = missing
        return [p for p, missing in served.items() if not missing]

    def _namespaces(self) -> dict[str, str]:
        parts = self._cfg.parts
        return {"resourceclaimtemplates": parts.claim.namespace, "configmaps": parts.namespace}

    def _sync_once(self, nodes: Informer, slices: Informer, served: list[str], owned: Owned) -> None:
        parts, prefix = self._cfg.parts, self._cfg.parts.claim.prefix
        labels = nodes.items()
        members: dict[str, list[str]] = {}
        for name, held in labels.items():
            if cls := held.get(f"{prefix}/claim-class"):
                members.setdefault(cls, []).append(name)
        by_node: dict[str, list[Obj]] = {}
        for obj in slices.items().values():
            by_node.setdefault(obj["spec"].get("nodeName", ""), []).append(obj)
        read = claim_classes(members, lambda node: by_node.get(node, []), self._cfg.driver)
        self._known = members, {c.id: c for c in read.classes}
        want = wanted(labels, read.classes, parts, on=served)
        result = sync(self._api, want.objects, served, self._namespaces(), leading=self._gate, observed=owned)
        self.syncs += 1
        notes = (*read.problems, *want.notes)
        if notes != self._notes:
            self._notes = notes
            for note in notes:
                self._log(f"left out: {note}")
        if result.applied or result.deleted or result.left_alone:
            self._log(f"sync: applied {len(result.applied)}, deleted {len(result.deleted)}, unchanged "
                      f"{result.unchanged}" + "".join(f"; left alone: {w}" for w in result.left_alone))

    def _explain_once(self, pods: Informer, claims: Informer, devices: list[Informer], events: Recorder) -> None:
        """An Event on each pending pod whose claims of our templates are unallocated (one a pod, naming each such
        claim); the free groups counted."""
        if self._known is None:
            return
        members, classes = self._known
        held = claims.items()
        used = in_use(held.values(), [s for d in devices for s in d.items().values()])
        self.free = metrics(classes.values(), self._cfg.parts.gpus, used)
        pending = []
        for pod in pods.items().values():
            if not pod["unschedulable"]:
                continue
            pending.append(pod["uid"])
            waiting = [(entry, explain(ask, template, classes=classes, members=members, used=used,
                                       label=self._cfg.parts.claim.class_label))
                       for entry, template, claim in pod["claims"]
                       if (ask := asked(template)) is not None
                       and not (claim and held.get(f"{pod['namespace']}/{claim}", {}).get("allocated"))]
            if not waiting:
                continue
            note = pod_note(waiting)  # one Event a pod, naming each claim that waits
            try:
                if events.warn(pod, REASON, note):
                    self._log(f"pod {pod['namespace']}/{pod['name']}: {note}")
            except NotAdmitted:  # at the write limit with a newer look queued (or no longer leading): it says the rest
                return
            except PublishError as exc:  # said at the next change or resync
                self._log(f"pod {pod['namespace']}/{pod['name']}: no Event: {exc}")
        events.forget(pending)

    def _explaining(self, lost: threading.Event, explain_queue: SyncQueue) -> list[Informer]:
        """The pod, claim and device informers, and the thread that explains pending pods from them."""
        cfg, add = self._cfg.parts.claim, explain_queue.add
        pods = Informer(self._api, PODS, keep=lambda o: keep_pod(o, cfg.namespace), changed=add, log=self._log,
                        fields={"metadata.namespace": cfg.namespace})
        claims = Informer(self._api, CLAIMS, keep=keep_claim, changed=add, log=self._log)
        devices = [Informer(self._api, slice_kind("v1"), keep=lambda o: keep_device_slice(o, cfg), changed=add,
                            log=self._log, fields={"spec.driver": driver})
                   for driver in dict.fromkeys((cfg.gpu_driver, cfg.nic_driver))]
        events = Recorder(self._api, self._cfg.identity,  # its writes share the sync's bucket, as one client's
                          admit=WriteGate(self._writes, lost, explain_queue.pending, self._log,
                                          rest="the next look at the pending pods says the rest"))

        def loop() -> None:
            while explain_queue.get(lost):
                if all(i.synced.is_set() for i in (pods, claims, *devices)):
                    self._explain_once(pods, claims, devices, events)
        threading.Thread(target=loop, daemon=True, name="topolink-explain").start()
        return [pods, claims, *devices]

    def lead(self, lost: threading.Event) -> None:
        """Informers, resync and syncs until ``lost``."""
        self.leading = True
        try:
            self._lead(lost)
        finally:
            self.leading, self._known, self.free = False, None, []

    def _lead(self, lost: threading.Event) -> None:
        queue, backoff, explain_queue = (SyncQueue(self._cfg.delay_s, most=self._cfg.delay_max_s), Backoff(),
                                         SyncQueue(self._cfg.delay_s))
        self._gate = WriteGate(self._writes, lost, queue.pending, self._log)  # a newer change: stop at the limit
        nodes = Informer(self._api, NODES, keep=self._keep_node, changed=queue.add, log=self._log)
        slices = Informer(self._api, slice_kind("v1"), keep=self._keep_slice, changed=queue.add, log=self._log,
                          fields={"spec.driver": self._cfg.driver})
        more = self._explaining(lost, explain_queue) if self._cfg.explain else []
        for informer in (nodes, slices, *more):
            threading.Thread(target=informer.run, args=(lost,), daemon=True, name="topolink-informer").start()

        recheck = threading.Event()  # ask the server again which kinds it serves

        def resync() -> None:
            while not lost.wait(self._cfg.resync_s):
                recheck.set()
                queue.add(0.0)
        threading.Thread(target=resync, daemon=True, name="topolink-resync").start()
        self.owned = owned = Owned(self._api, self._namespaces(), changed=queue.add, log=self._log)
        try:
            self._loop(queue, backoff, explain_queue, (nodes, slices, owned), recheck=recheck, lost=lost)
        finally:
            owned.stop()

    def _loop(self, queue: SyncQueue, backoff: Backoff, explain_queue: SyncQueue,
              watched: tuple[Informer, Informer, Owned], *, recheck: threading.Event, lost: threading.Event) -> None:
        nodes, slices, owned = watched
        served: list[str] | None = None
        while queue.get(lost):
            if not (nodes.synced.is_set() and slices.synced.is_set()):
                continue  # the first sync waits for both lists (each list queues one)
            if (due := backoff.wait_s()) > 0:  # failing: a change does not bring the next try forward
                queue.add(due)
                continue
            try:
                if served is None or recheck.is_set():
                    recheck.clear()
                    served = self._say(served_parts(self._api, self._cfg.parts.on()))
                    owned.ensure(served)
                if not owned.synced():
                    continue  # each informer's first list queues a sync
                self._sync_once(nodes, slices, served, owned)
                backoff.succeeded()
                explain_queue.add(0.0)  # the classes may have changed: the pending pods again
            except (PublishError, ValueError) as exc:  # ValueError: a fleet whose names would meet (never seen)
                wait = backoff.failed(exc, getattr(exc, "retry_after", None))
                self._log(f"sync: {exc}; again in {wait:.1f} s")
                queue.add(wait)

    def run(self, stop: threading.Event) -> None:
        cfg = self._cfg
        elector = LeaderElector(self._lease_api, name=cfg.lease_name, namespace=cfg.namespace, identity=cfg.identity,
                                times=cfg.times, log=self._log)
        elector.run(stop, self.lead)

