"""Watch this node's ResourceSlices of our driver and wake the agent when someone else deletes one.

Kubelet deletes every node-local slice when it starts (and the garbage collector does when the Node goes),
so without a watch the pool would be missing until the next discovery interval. The watch only wakes the
agent; the sink's next pass lists, plans and writes as always, so a missed event costs an interval, never
correctness. Deletions the sink made itself are not reported back to it. Needs ``list`` and ``watch`` on
resourceslices (``PERMISSIONS["resource-slices"]``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ._api import MANAGED_BY, Kind, KubeApi, Obj
from ._errors import Forbidden, InvalidObject, NotFound, PublishError
from ._retry import Backoff

log = logging.getLogger(__name__)

# Failures that another try will not mend: RBAC without watch, a server without the resource.
_FINAL = (Forbidden, NotFound, InvalidObject)


def deleted_by_others(typ: str, obj: Obj, *, node: str, driver: str, ours: Callable[[str], bool]) -> str | None:
    """The name of our slice that this event deletes, unless the sink deleted it itself."""
    spec = obj.get("spec") or {}
    name = str((obj.get("metadata") or {}).get("name", ""))
    if typ != "DELETED" or spec.get("driver") != driver or spec.get("nodeName") != node or ours(name):
        return None
    return name


def watch_slices(api: KubeApi, kind: Callable[[], Kind], *, node: str, driver: str, ours: Callable[[str], bool],
                 expected: Callable[[], frozenset[str]], wake: Callable[[str], None], stop: threading.Event,
                 backoff: Backoff | None = None) -> None:
    """Blocks until ``stop`` is set or the watch cannot be had at all (RBAC, no such resource: then a deleted
    slice waits for the next discovery pass, as without a watch). Each time the watch is opened, first the
    slices are listed and compared with ``expected`` (what the sink last published), so a deletion while no
    watch was open (before the first, or while a failed one was backing off) wakes the agent too."""
    backoff = backoff or Backoff(base=1.0, cap=60.0)
    failures = 0
    while not stop.is_set():
        try:
            k = kind()
            present = {str(o["metadata"]["name"]) for o in api.list(k, MANAGED_BY)
                       if (o.get("spec") or {}).get("driver") == driver and o["spec"].get("nodeName") == node}
            missing = sorted(expected() - present)
            if missing:
                wake(f"resourceslice {missing[0]} missing")
            for typ, obj in api.watch(k, MANAGED_BY, {"spec.nodeName": node}):
                failures = 0
                if stop.is_set():
                    return
                name = deleted_by_others(typ, obj, node=node, driver=driver, ours=ours)
                if name is not None:
                    wake(f"resourceslice {name} deleted")
            failures += 1  # a stream that ends by itself is treated as a failure: back off, then again
        except _FINAL as exc:
            log.warning("resource-slices: not watching (%s); a deleted slice is re-created on the next pass", exc)
            return
        except PublishError as exc:
            failures += 1
            log.warning("resource-slices: watch failed (%s); watching again", exc)
        stop.wait(backoff.delay(min(failures, 8), None))
