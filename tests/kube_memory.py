"""An in-memory stand-in for the calls the fleet controller makes (``KubeApi``'s get, list, create, apply, delete
and served_resources), over dicts: the controller's unit tests (tests/test_controller*.py) and the in-process
benchmark (benchmarks/controller.py) both use it. The real API server tier is tests/test_apiserver_controller.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from exporter.kube import Conflict, Kind
from exporter.kube._controller._sync import MANAGER

__all__ = ["MemoryApi"]


class MemoryApi:
    """The calls the controller makes, over dicts: resourceVersions checked on apply as the server checks them,
    managedFields naming the writer."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.rv = 0

    def _key(self, kind: Kind, name: str, ns: str | None) -> tuple[str, str, str]:
        return f"{kind.plural}.{kind.group}", ns or "", name

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        found = self.objects.get(self._key(kind, name, namespace))
        return json.loads(json.dumps(found)) if found else None

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None,
             fields: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        return [json.loads(json.dumps(o)) for (plural, ns, _), o in self.objects.items()
                if plural == f"{kind.plural}.{kind.group}" and (namespace is None or ns == namespace)
                and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())]

    def put(self, kind: Kind, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        self.rv += 1
        meta = obj["metadata"] | {"resourceVersion": str(self.rv), "managedFields": [{"manager": manager}]}
        made = obj | {"metadata": meta}
        self.objects[self._key(kind, meta["name"], meta.get("namespace"))] = made
        return made

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        if self.get(kind, obj["metadata"]["name"], obj["metadata"].get("namespace")):
            raise Conflict("exists")
        self.writes.append(("create", obj["metadata"]["name"]))
        return self.put(kind, obj, MANAGER)

    def apply(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        there = self.get(kind, meta["name"], meta.get("namespace"))
        held = there["metadata"]["resourceVersion"] if there else None
        if "resourceVersion" in meta and held != meta["resourceVersion"]:
            raise Conflict("the object has been modified")
        self.writes.append(("apply", meta["name"]))
        return self.put(kind, obj, MANAGER)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self.writes.append(("delete", name))
        del self.objects[self._key(kind, name, namespace)]

    def served_resources(self, group: str, version: str) -> frozenset[str]:
        return frozenset() if group == "kai.scheduler" else frozenset(
            {"deviceclasses", "resourceclaimtemplates", "topologies", "resourceflavors", "hypernodes", "configmaps"})
