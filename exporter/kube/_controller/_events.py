"""Events on pods (``events.k8s.io/v1``, as kube-scheduler writes them), deduplicated as client-go's event
recorder does: a note said of a pod once is one Event object; the same note again within ``REPEAT_S`` writes
nothing, and after it the same object's ``series`` (count, last observed) is updated rather than a new object
made. A new note for the pod is a new Event. What was said of a pod no longer pending is forgotten. The Event's name
is the pod's and a digest of its uid and the note: a new leader saying the same finds it made (409) and says
nothing more (an Event's fields but its series are immutable, and another leader's are not known here).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from .._api._api import Kind, KubeApi
from .._api._errors import Conflict
from ._sync import MANAGED_BY

EVENTS = Kind("events.k8s.io", "v1", "Event", "events", namespaced=True)
REPORTER = "topolink-controller"  # the project's name for it: its field manager and managed-by label
REPEAT_S = 1800.0  # client-go's series heartbeat: an isomorphic event is observed again at most this often


class NotAdmitted(Exception):
    """A write the write limit did not let through now (a newer change is queued, or leadership was lost)."""


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Recorder:
    def __init__(self, api: KubeApi, instance: str, clock: Callable[[], float] = time.monotonic,
                 admit: Callable[[], bool] = lambda: True) -> None:
        """``admit()``: asked before each write (the controller's write limit); False: write nothing now."""
        self._api, self._instance, self._clock, self._admit = api, instance, clock, admit
        # pod uid -> (note, when, the Event as written, or None: another leader's, count)
        self._said: dict[str, tuple[str, float, dict[str, Any] | None, int]] = {}

    def warn(self, pod: dict[str, Any], reason: str, note: str) -> bool:
        """Say ``note`` of the pod (a store entry: name, namespace, uid); True when something was written.
        :class:`NotAdmitted` when a write was due and ``admit()`` refused it: nothing is recorded, so the next
        call says it."""
        uid, now = pod["uid"], self._clock()
        said = self._said.get(uid)
        if said is not None and said[0] == note:
            if now - said[1] < REPEAT_S:
                return False
            if said[2] is None:  # another leader's Event: its fields are not known here, and are immutable
                self._said[uid] = (note, now, None, said[3])
                return False
            count = said[3] + 1
            if not self._admit():
                raise NotAdmitted(pod["uid"])
            self._api.apply(EVENTS, said[2] | {"series": {"count": count, "lastObservedTime": _stamp()}})
            self._said[uid] = (note, now, said[2], count)
            return True
        digest = hashlib.sha256(f"{uid}\n{note}".encode()).hexdigest()[:16]
        event = {"apiVersion": EVENTS.api_version, "kind": "Event",
                 "metadata": {"name": f"{pod['name'][:200]}.{digest}", "namespace": pod["namespace"],
                              "labels": {MANAGED_BY: REPORTER}},  # the admission policy: it updates only its own
                 "eventTime": _stamp(), "reportingController": REPORTER, "reportingInstance": self._instance[:128],
                 "action": "Scheduling", "reason": reason, "type": "Warning", "note": note[:1024],
                 "regarding": {"apiVersion": "v1", "kind": "Pod", "name": pod["name"], "namespace": pod["namespace"],
                               "uid": uid}}
        if not self._admit():
            raise NotAdmitted(uid)
        try:
            self._api.create(EVENTS, event)
        except Conflict:  # the same note on the same pod, written by the leader before: said already
            self._said[uid] = (note, now, None, 1)
            return False
        self._said[uid] = (note, now, event, 1)
        return True

    def forget(self, pending: Iterable[str]) -> None:
        """Keep only what was said of the pods (uids) still pending."""
        keep = set(pending)
        for uid in [u for u in self._said if u not in keep]:
            del self._said[uid]
