"""Watch this node's ResourceSlices of our driver: keep the sink's cache fresh, and wake the agent when someone
else deletes or changes one.

Kubelet deletes every node-local slice when it starts, and the garbage collector does when the Node goes, so
without a watch the pool would be missing until the next discovery interval. The watch is the informer
pattern cut to one node: list with field selectors (``spec.nodeName``, ``spec.driver``: only this node's
slices cross the network), then watch from the list's resourceVersion with bookmarks (a quiet node's
resourceVersion stays recent), and when the server ends the stream at its timeout, watch again from the
last resourceVersion seen. Every way it can fail is handled: 410 Gone (as a status or as an ``ERROR`` event
in the stream: the resourceVersion is older than the server keeps, as after it restarted) lists again at
once; any other failure backs off, then watches again from the last resourceVersion (the server replays what
was missed, or answers 410); RBAC without watch or a server without the resource gives up (slices then wait
for the next pass, as without a watch). Each restart is counted by reason. The cache is fresh from the
moment the server accepts a watch until one fails. Needs ``list`` and ``watch`` on resourceslices
(``PERMISSIONS["resource-slices"]``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping

from .._api._api import MANAGED_BY, Kind, KubeApi, resource_version
from .._api._errors import Expired, Forbidden, InvalidObject, NotFound, PublishError
from .._api._retry import Backoff
from ._slice_cache import SliceCache

log = logging.getLogger(__name__)

# Failures that another try will not mend: RBAC without watch, a server without the resource.
_FINAL = (Forbidden, NotFound, InvalidObject)
# Why a watch was opened again: the server ended it (its timeout), its resourceVersion had expired (410:
# listed again), or it failed (backed off, then resumed).
RESTART_REASONS = ("closed", "expired", "error")


def slice_fields(node: str, driver: str) -> dict[str, str]:
    return {"spec.nodeName": node, "spec.driver": driver}


def watch_slices(api: KubeApi, kind: Callable[[], Kind], *, fields: Mapping[str, str], cache: SliceCache,
                 wake: Callable[[str], None], stop: threading.Event, restarts: Counter[str],
                 backoff: Backoff | None = None) -> None:
    """Blocks until ``stop`` is set or the watch cannot be had at all."""
    backoff = backoff or Backoff(base=1.0, cap=60.0)
    failures = 0
    rv: str | None = None
    while not stop.is_set():
        try:
            k = kind()
            if rv is None:
                items, rv = api.list_versioned(k, MANAGED_BY, fields)
                for missing in cache.replace(items):
                    wake(missing)
            for typ, obj in api.watch(k, MANAGED_BY, fields, rv or None):
                failures = 0
                if stop.is_set():
                    return
                if typ == "OPEN":
                    cache.fresh()
                    continue
                rv = resource_version(obj) or rv
                if typ in ("ADDED", "MODIFIED", "DELETED") and (why := cache.event(typ, obj)) is not None:
                    wake(why)
            restarts["closed"] += 1  # the server's timeout: on from where it stopped, at once
            continue
        except Expired as exc:
            restarts["expired"] += 1
            failures += 1
            rv = None
            cache.stale()
            log.info("resource-slices: watch expired (%s); listing again", exc)
            if failures == 1:
                continue  # the usual case: list again at once; expired again straight after: back off
        except _FINAL as exc:
            cache.stale()
            log.warning("resource-slices: not watching (%s); a deleted slice is re-created on the next pass", exc)
            return
        except PublishError as exc:
            restarts["error"] += 1
            failures += 1
            cache.stale()
            log.warning("resource-slices: watch failed (%s); watching again", exc)
        stop.wait(backoff.delay(min(failures, 8), None))
