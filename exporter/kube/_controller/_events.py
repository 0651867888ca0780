"""Events on pods (``events.k8s.io/v1``, as kube-scheduler writes them), deduplicated as client-go's event
recorder does: a note said of a pod once is one Event object; the same note again within ``REPEAT_S`` writes
nothing, and after it the same object's ``series`` (count, last observed) is updated rather than a new object
made. A new note for the pod is a new Event. What was said of a pod no longer pending is forgotten.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from .._api._api import Kind, KubeApi
from ._sync import MANAGED_BY

EVENTS = Kind("events.k8s.io", "v1", "Event", "events", namespaced=True)
REPORTER = "topolink-controller"  # the project's name for it: its field manager and managed-by label
REPEAT_S = 1800.0  # client-go's series heartbeat: an isomorphic event is observed again at most this often


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Recorder:
    def __init__(self, api: KubeApi, instance: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._api, self._instance, self._clock = api, instance, clock
        self._said: dict[str, tuple[str, float, dict[str, Any], int]] = {}  # pod uid -> (note, when, event, count)

    def warn(self, pod: dict[str, Any], reason: str, note: str) -> bool:
        """Say ``note`` of the pod (a store entry: name, namespace, uid); True when something was written."""
        uid, now = pod["uid"], self._clock()
        said = self._said.get(uid)
        if said is not None and said[0] == note:
            if now - said[1] < REPEAT_S:
                return False
            count = said[3] + 1
            event = said[2] | {"series": {"count": count, "lastObservedTime": _stamp()}}
            self._api.apply(EVENTS, event)
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
        self._api.apply(EVENTS, event)
        self._said[uid] = (note, now, event, 1)
        return True

    def forget(self, pending: Iterable[str]) -> None:
        """Keep only what was said of the pods (uids) still pending."""
        keep = set(pending)
        for uid in [u for u in self._said if u not in keep]:
            del self._said[uid]
