"""A scripted API server for one node's ResourceSlices, in memory, for driving the slice sink's pass and its watch
in any order without threads or sleeps: integer resourceVersions, an event log that every watch replays from its
resourceVersion, and the faults of a real server queued for the next watches.

Each watch plays the events after its resourceVersion (a watch list: the state as ADDED events, then the bookmark
annotated ``k8s.io/initial-events-end``, then the events after), then ends as at the server's timeout, which moves
the clock on by :data:`TIMEOUT_S`. ``during_write`` runs inside the next create, apply or delete, after the server
changed its state and before the reply reaches the sink: whatever it does (kubelet deleting, the watch stepping)
happens while the write is in flight.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.kube._api._api import INITIAL_EVENTS_END, SILENT_S, Kind, NodeView, Obj
from exporter.kube._api._errors import BackingOff, Conflict, Expired, NotFound, Silent, Unavailable

TIMEOUT_S = 300.0  # the server ends each stream after this (the least the client asks for)
# The answer of the next watch: a 410 at once; a bookmark then a 410; accepted and then silent (what the client
# sees once its read times out); a watch list broken part-way (after its first ADDED event); a 500; not sent (the
# client backs off)
FAULTS = ("410", "bookmark-410", "silent", "break-list", "500", "backing-off")


@dataclass
class ScriptedServer:
    node: str = "n1"
    now: float = 0.0
    rv: int = 100
    objects: dict[str, Obj] = field(default_factory=dict)
    log: list[tuple[int, str, Obj]] = field(default_factory=list)
    oldest: int = 0  # the server keeps events after this only: a watch from before it gets 410
    faults: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=lambda: ["v1"])
    requests: list[str] = field(default_factory=list)
    during_write: Callable[[], None] | None = None
    answered: list[Callable[[], None]] = field(default_factory=list)  # the client's backoff reset: ``answer()``

    def clock(self) -> float:
        return self.now

    # -- the server's own changes ---------------------------------------------------------------------
    def _change(self, typ: str, obj: Obj) -> Obj:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if typ == "DELETED":
            self.objects.pop(obj["metadata"]["name"], None)
        else:
            self.objects[obj["metadata"]["name"]] = obj
        self.log.append((self.rv, typ, obj))
        return copy.deepcopy(obj)

    def delete_as_kubelet(self, name: str) -> None:
        self._change("DELETED", self.objects[name])

    def compact(self) -> None:
        """The server keeps no event before now (as after a restart of its watch cache): old watches get 410."""
        self.oldest = self.rv

    def answer(self) -> None:
        """The server answers a pass's request after failing: the client calls back whoever asked."""
        for callback in self.answered:
            callback()

    def _in_flight(self) -> None:
        hook, self.during_write = self.during_write, None
        if hook is not None:
            hook()

    # -- KubeApi ------------------------------------------------------------------------------------------
    def served_versions(self, group: str) -> Sequence[str]:
        self.requests.append("DISCOVERY")
        return list(self.versions)

    def served_resources(self, group: str, version: str) -> frozenset[str]:
        return frozenset({"resourceslices"})

    def server_minor(self) -> int:
        return 36

    def get_node(self, name: str) -> NodeView:
        return NodeView(name=name, uid=f"uid-{name}", labels={}, owned=frozenset(), others=frozenset())

    def list_nodes(self) -> Sequence[NodeView]:
        return [self.get_node(self.node)]

    def apply_node_labels(self, name: str, labels: Mapping[str, str]) -> None:
        raise AssertionError("not a label test")

    def _check(self, kind: Kind) -> None:
        if kind.version not in self.versions:
            raise NotFound(f"{kind.api_version}: 404 the server could not find the requested resource")

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        return copy.deepcopy(self.objects.get(name))

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        return self.list_versioned(kind, labels, fields or {})[0]

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str]) -> tuple[list[Obj], str]:
        self._check(kind)
        self.requests.append("LIST")
        return [copy.deepcopy(o) for _, o in sorted(self.objects.items())], str(self.rv)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        self.requests.append(f"CREATE {obj['metadata']['name']}")
        if obj["metadata"]["name"] in self.objects:
            raise Conflict("409 exists")
        reply = self._change("ADDED", obj)
        self._in_flight()
        return reply

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        name = obj["metadata"]["name"]
        self.requests.append(f"APPLY {name}")
        reply = self._change("MODIFIED" if name in self.objects else "ADDED", obj)
        self._in_flight()
        return reply

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self.requests.append(f"DELETE {name}")
        if name not in self.objects:
            raise NotFound(f"404 {name}")
        self._change("DELETED", self.objects[name])
        self._in_flight()

    def on_answer(self, callback: Callable[[], None]) -> None:
        self.answered.append(callback)

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False) -> Iterator[tuple[str, Obj]]:
        fault = self.faults.pop(0) if self.faults else None
        if fault == "backing-off":
            raise BackingOff("watch resourceslices: not sent", 30.0)
        self.requests.append("WATCHLIST" if initial else f"WATCH {resource_version}")
        self._check(kind)
        if fault == "500":
            raise Unavailable("watch resourceslices: 500")
        yield "OPEN", {}
        if fault == "410" or (not initial and int(resource_version or 0) < self.oldest):
            raise Expired(f"watch resourceslices: 410 too old resource version: {resource_version}")
        if fault == "bookmark-410":
            yield "BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}}
            raise Expired("watch resourceslices: 410 too old resource version")
        since = int(resource_version or 0)
        if initial:
            yield from self._state(fault)
            since = self.rv
        if fault == "silent":
            self.now += SILENT_S  # the client's read timed out: nothing came for this long
            raise Silent(f"watch resourceslices: nothing for {SILENT_S:.0f} s")
        yield from self._events(since)
        self.now += TIMEOUT_S

    def _state(self, fault: str | None) -> Iterator[tuple[str, Obj]]:
        for i, (_, obj) in enumerate(sorted(self.objects.items())):
            if fault == "break-list" and i == 1:
                break
            yield "ADDED", copy.deepcopy(obj)
        if fault == "break-list":  # after its first ADDED event, if any
            raise Unavailable("watch resourceslices: RemoteProtocolError: peer closed connection")
        yield "BOOKMARK", {"metadata": {"resourceVersion": str(self.rv), "annotations": {INITIAL_EVENTS_END: "true"}}}

    def _events(self, since: int) -> Iterator[tuple[str, Obj]]:
        i = 0
        while i < len(self.log):  # events logged while the stream is read are sent too
            rv, typ, obj = self.log[i]
            i += 1
            if rv > since:
                yield typ, copy.deepcopy(obj)


def names(objs: Sequence[Any] | None) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs or [])
