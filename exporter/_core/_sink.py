"""The one protocol every sink of the agent loop implements: publish the served snapshot.

The agent calls ``publish`` after each discovery pass (and after probes join measurements) with the
snapshot it serves: facts the latest pass could not read are carried forward from earlier passes and
still listed as unknown in ``snapshot.problems``, so a sink keeps its previous value for exactly those
facts (``snapshot.knowledge().knows(subject, aspect)``) and never deletes on partial knowledge
(``snapshot.complete``). A sink never raises for a failure of what it writes to: it reports it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from topology import Snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishResult:
    """What one ``publish`` did: objects or keys written, left as they were, and failed."""

    written: int = 0
    unchanged: int = 0
    failed: int = 0
    detail: str = ""  # why it failed, for the log line and the metric's reason
    retry_after: float | None = None  # failed: no try again sooner (the server's Retry-After, the client's backoff)

    @property
    def ok(self) -> bool:
        return self.failed == 0


class Sink(Protocol):
    name: str

    def publish(self, snapshot: Snapshot) -> PublishResult: ...


@runtime_checkable
class WatchingSink(Protocol):
    """A sink that also learns of changes made by others to what it wrote (kubelet wiping ResourceSlices):
    ``watch`` blocks, in a thread of its own, until ``stop`` is set and ``wake_watch`` called (or its stream's next
    event comes), and calls ``wake`` with a reason when the agent should publish again now rather than at the next
    interval. ``watch_restarts`` counts the times its watch was opened again, by reason, every reason present from
    the start; ``watch_error`` says why the watch is refused and what fixes it (empty while it is not)."""

    name: str

    def publish(self, snapshot: Snapshot) -> PublishResult: ...

    def watch(self, stop: threading.Event, wake: Callable[[str], None]) -> None: ...

    def wake_watch(self) -> None: ...

    def watch_restarts(self) -> Mapping[str, int]: ...

    def watch_error(self) -> str: ...
