"""Leader election over a ``coordination.k8s.io/v1`` Lease, with client-go's ``leaderelection`` semantics.

* A candidate reads the Lease every ``retry`` seconds (jittered by 1.2, client-go's ``JitterFactor``); it takes
  it when there is none (create), when it holds it already, or when the holder's record has not changed for
  ``duration`` seconds *as this candidate observed it* (its own clock: no clock is compared across machines).
* The leader renews every ``retry`` seconds; when no renewal succeeded for ``renew_deadline`` seconds it stops
  leading (``renew_deadline`` < ``duration``: it stops before any other candidate may take over).
* Writes carry the resourceVersion read (server-side apply with a precondition): of two candidates, one wins,
  the other gets 409 and stays a candidate.
* A leader that stops cleanly releases the Lease (``ReleaseOnCancel``: holder cleared, duration 1 s), so the other
  replica takes over at its next try rather than after ``duration``.

Defaults are client-go's and kube-controller-manager's: 15 s, 10 s, 2 s.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._api._api import Kind, KubeApi
from .._api._errors import Conflict, PublishError

LEASE = Kind("coordination.k8s.io", "v1", "Lease", "leases", namespaced=True)
JITTER = 1.2


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTimes:
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0

    def __post_init__(self) -> None:
        if not self.duration > self.renew_deadline > JITTER * self.retry > 0:
            raise ValueError(f"lease times: duration ({self.duration} s) > renew deadline ({self.renew_deadline} s) "
                             f"> {JITTER} x retry ({self.retry} s) > 0, as client-go requires")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, api: KubeApi, *, name: str, namespace: str, identity: str, times: LeaseTimes,
                 log: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._api, self._name, self._ns, self.identity = api, name, namespace, identity
        self._times, self._log, self._clock = times, log, clock
        self._observed: tuple[Any, ...] | None = None  # (holder, renewTime, transitions) as last read
        self._observed_at = 0.0
        self._spec: dict[str, Any] = {}

    def _try(self) -> bool:
        """One try to take or renew the Lease; True while this candidate holds it."""
        lease = self._api.get(LEASE, self._name, self._ns)
        now, stamp = self._clock(), _now()
        if lease is None:
            first = {"holderIdentity": self.identity, "leaseDurationSeconds": int(self._times.duration),
                     "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}
            self._api.create(LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": self._name, "namespace": self._ns}, "spec": first})
            self._spec, self._observed, self._observed_at = first, (self.identity, stamp, 0), now
            return True
        spec: dict[str, Any] = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity") or ""
        held_for = float(spec.get("leaseDurationSeconds") or self._times.duration)
        if holder and holder != self.identity and self._observed_at + held_for > now:
            return False
        mine = holder == self.identity
        new: dict[str, Any] = {
            "holderIdentity": self.identity, "leaseDurationSeconds": int(self._times.duration),
            "acquireTime": spec.get("acquireTime") if mine else stamp, "renewTime": stamp,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)}
        meta = {"name": self._name, "namespace": self._ns, "resourceVersion": lease["metadata"]["resourceVersion"]}
        self._api.apply(LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                                "spec": new})
        self._spec, self._observed = new, (self.identity, stamp, new["leaseTransitions"])
        self._observed_at = now
        return True

    def _attempt(self) -> bool:
        try:
            return self._try()
        except Conflict:
            return False  # another candidate wrote first
        except PublishError as exc:
            self._log(f"lease {self._ns}/{self._name}: {exc}")
            return False

    def _wait(self, stop: threading.Event) -> bool:
        return stop.wait(random.uniform(self._times.retry, self._times.retry * (1 + JITTER)))

    def run(self, stop: threading.Event, lead: Callable[[threading.Event], None]) -> None:
        """Until ``stop``: take the Lease, run ``lead(lost)`` in a thread of its own while holding it (``lost``
        is set when leadership ends: the lead must stop writing), and take part again after losing it."""
        while not stop.is_set():
            if not self._attempt():
                self._wait(stop)
                continue
            self._log(f"leading: lease {self._ns}/{self._name} taken by {self.identity}")
            lost = threading.Event()
            worker = threading.Thread(target=lead, args=(lost,), name="topolink-lead", daemon=True)
            worker.start()
            renewed = self._clock()
            while not stop.wait(self._times.retry):
                if not worker.is_alive():  # the lead ended on its own (a bug): lead again from the start
                    self._log("the lead stopped: stop leading")
                    break
                if self._attempt():
                    renewed = self._clock()
                elif (self._clock() - renewed >= self._times.renew_deadline
                      or (self._observed or ("",))[0] != self.identity):
                    self._log(f"lost lease {self._ns}/{self._name}: not renewed for "
                              f"{self._clock() - renewed:.1f} s: stop leading")
                    break
            lost.set()
            worker.join()
            if stop.is_set():
                self.release()

    def release(self) -> None:
        """Hand the Lease back (holder cleared, duration 1 s), if this candidate still holds it."""
        try:
            lease = self._api.get(LEASE, self._name, self._ns)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = dict(lease["spec"]) | {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _now()}
            meta = {"name": self._name, "namespace": self._ns, "resourceVersion": lease["metadata"]["resourceVersion"]}
            self._api.apply(LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                                    "spec": spec})
            self._log(f"released lease {self._ns}/{self._name}")
        except PublishError as exc:
            self._log(f"lease {self._ns}/{self._name}: not released: {exc}")
