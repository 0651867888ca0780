"""An in-memory API server for the fleet controller's tests: objects with resourceVersions (one counter, as etcd's
revision), lists and watches by label and field selector and namespace, a watch that delivers every change after
the resourceVersion it starts from (and ends when asked to, as a server's timeout does), the requests counted by
verb and resource, and a switch that holds back the events of chosen resources (a watch that lags).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from exporter.kube._api._api import Kind
from exporter.kube._api._errors import NotFound

FLEET = Path(__file__).resolve().parent / "data" / "fleet" / "gb200-racks-topograph.json"
Obj = dict[str, Any]


def _field(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _copy(obj: Obj) -> Obj:
    return json.loads(json.dumps(obj))  # type: ignore[no-any-return]


class WatchedApi:
    def __init__(self, served: frozenset[str] = frozenset({"deviceclasses", "resourceclaimtemplates", "topologies",
                                                           "resourceflavors", "hypernodes", "configmaps"})) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (resource.group, namespace, name) -> object
        self.log: list[tuple[int, str, str, Obj]] = []  # (rv, resource.group, type, object)
        self.requests: Counter[tuple[str, str]] = Counter()  # (verb, resource.group)
        self.writes: list[tuple[str, str, str]] = []  # (verb, resource.group, name) of every apply and delete
        self.held: set[str] = set()  # resource.group whose events the watches hold back
        self.served, self.rv = served, 0
        self._cond = threading.Condition()

    @staticmethod
    def _res(kind: Kind) -> str:
        return f"{kind.plural}.{kind.group}"

    def seed_fleet(self, prefix: str = "gpu.topology") -> None:
        """The saved GB200-racks fleet's Nodes and ResourceSlices."""
        from exporter.kube._api._api import slice_kind
        from exporter.kube._controller._controller import NODES

        for obj in json.loads(FLEET.read_text().replace("gpu.topology", prefix))["items"]:
            self.put(NODES if obj["kind"] == "Node" else slice_kind("v1"), obj, "agent")

    def put(self, kind: Kind, obj: Obj, manager: str) -> Obj:
        with self._cond:
            self.rv += 1
            meta = obj["metadata"] | {"resourceVersion": str(self.rv), "managedFields": [{"manager": manager}]}
            made = _copy(obj | {"metadata": meta})
            where = (self._res(kind), meta.get("namespace") or "", meta["name"])
            typ = "MODIFIED" if where in self.objects else "ADDED"
            self.objects[where] = made
            self.log.append((self.rv, self._res(kind), typ, made))
            self._cond.notify_all()
            return _copy(made)

    def remove(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        with self._cond:
            gone = self.objects.pop((self._res(kind), namespace or "", name), None)
            if gone is None:
                raise NotFound(f"delete {kind.kind} {name}: 404")
            self.rv += 1
            self.log.append((self.rv, self._res(kind), "DELETED",
                             gone | {"metadata": gone["metadata"] | {"resourceVersion": str(self.rv)}}))
            self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self.held.clear()
            self._cond.notify_all()

    # -- the port ------------------------------------------------------------------------------------------
    def served_resources(self, group: str, version: str) -> frozenset[str]:
        return frozenset() if group == "kai.scheduler" else self.served

    @staticmethod
    def _matches(obj: Obj, labels: Mapping[str, str], fields: Mapping[str, str] | None, ns: str | None) -> bool:
        meta = obj["metadata"]
        return ((ns is None or meta.get("namespace") == ns)
                and all((meta.get("labels") or {}).get(k) == v for k, v in labels.items())
                and all(_field(obj, k) == v for k, v in (fields or {}).items()))

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        self.requests["get", self._res(kind)] += 1
        with self._cond:
            found = self.objects.get((self._res(kind), namespace or "", name))
            return _copy(found) if found else None

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str], *,
                       namespace: str | None = None) -> tuple[list[Obj], str]:
        self.requests["list", self._res(kind)] += 1
        with self._cond:
            return [_copy(o) for (res, _, _), o in sorted(self.objects.items())
                    if res == self._res(kind) and self._matches(o, labels, fields, namespace)], str(self.rv)

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        return self.list_versioned(kind, labels, fields or {}, namespace=namespace)[0]

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False, *,
              namespace: str | None = None) -> Iterator[tuple[str, Obj]]:
        """Every change after ``resource_version``; ends after 0.2 s with none (the caller opens it again)."""
        self.requests["watch", self._res(kind)] += 1
        yield "OPEN", {}
        at, res = int(resource_version or 0), self._res(kind)
        while True:
            with self._cond:
                due = [] if res in self.held else [(rv, typ, o) for rv, r, typ, o in self.log
                                                   if rv > at and r == res and self._matches(o, labels, fields,
                                                                                             namespace)]
                if not due and not self._cond.wait(0.2):
                    return
            for rv, typ, obj in due:
                at = rv
                yield typ, _copy(obj)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        self.requests["create", self._res(kind)] += 1
        return self.put(kind, obj, "topolink-controller")

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        self.requests["apply", self._res(kind)] += 1
        self.writes.append(("apply", self._res(kind), obj["metadata"]["name"]))
        return self.put(kind, obj, "topolink-controller")

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self.requests["delete", self._res(kind)] += 1
        self.writes.append(("delete", self._res(kind), name))
        self.remove(kind, name, namespace)

    def on_answer(self, callback: Any) -> None:
        pass
