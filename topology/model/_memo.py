"""What is derived from a snapshot, built once while the snapshot lives (``per_snapshot``).

A snapshot is immutable, so anything computed from it alone (its path index, the PCIe class and GPUDirect
verdict of every GPU and NIC pair, its NVLink islands) is the same every time it is asked. The agent asks
many times about one snapshot: every scrape of a new view (a probe pass or a sink's publish makes a view
around the same snapshot), the node labels, the ResourceSlices, the page. Building those pairs once per
snapshot keeps the G x N work to one pass, whoever asks.

Entries are kept by the snapshot's identity (never its value: hashing a snapshot at the limits reads all of
it) and dropped when the snapshot is collected (a weak reference's callback runs before its id can be reused).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import TypeVar, cast

from ._entities import Snapshot

T = TypeVar("T")

_LOCK = threading.RLock()  # a build may ask for another entry of the same snapshot
_BY_SNAPSHOT: dict[int, dict[Hashable, object]] = {}


def per_snapshot(snap: Snapshot, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` for this snapshot and key, built on the first request and kept while ``snap`` lives.
    ``build`` must depend on the snapshot (and what ``key`` names) alone, and what it returns must not hold the
    snapshot (the entry would then keep it alive for good)."""
    entries = _BY_SNAPSHOT.get(id(snap))
    if entries is not None and key in entries:
        return cast(T, entries[key])
    with _LOCK:  # one build per snapshot and key, even when two threads ask at once
        entries = _BY_SNAPSHOT.get(id(snap))
        if entries is None:
            entries = _BY_SNAPSHOT[id(snap)] = {}
            weakref.finalize(snap, _BY_SNAPSHOT.pop, id(snap), None)
        if key not in entries:
            entries[key] = build()
        return cast(T, entries[key])


def kept_snapshots() -> int:
    """How many snapshots have entries now (a test's view: entries go with their snapshot)."""
    return len(_BY_SNAPSHOT)
