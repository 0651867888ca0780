"""The Node condition sink (opt-in): ``GPUTopologyDegraded`` on this node's status, and with the operator's
consent the ``NoSchedule`` taint for a degraded topology; a write only when either differs from what the Node
has, so a steady node costs one read a pass."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from topology import Snapshot

from ..._core._sink import PublishResult
from .._api._api import Obj
from .._api._errors import PublishError
from .._desired._node_condition import CONDITION, condition, desired_taints, same_condition, verdict

log = logging.getLogger(__name__)


@runtime_checkable
class NodeStatusApi(Protocol):
    def get_node_object(self, name: str) -> Obj: ...

    def apply_node_condition(self, name: str, condition: Mapping[str, object]) -> None: ...

    def replace_node_taints(self, name: str, taints: Sequence[Mapping[str, object]],
                            resource_version: str) -> None: ...

    def clear_node_condition(self, name: str) -> None: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeConditionSink:
    """The condition on this Node's status; with ``taint``, the NoSchedule taint while it is degraded."""

    name = "node-condition"

    def __init__(self, api: NodeStatusApi, node: str, prefix: str, *, taint: bool = False) -> None:
        self._api, self._node, self._prefix, self._taint = api, node, prefix, taint

    def publish(self, snapshot: Snapshot) -> PublishResult:
        v = verdict(snapshot)
        if v is None:
            return PublishResult()
        try:
            node = self._api.get_node_object(self._node)
            conditions = (node.get("status") or {}).get("conditions") or []
            have = next((c for c in conditions if c.get("type") == CONDITION), None)
            written = 0
            if self._taint:  # first: its patch is tested against the resourceVersion read, which the apply moves
                taints = desired_taints((node.get("spec") or {}).get("taints") or [], v, self._prefix)
                if taints is not None:
                    self._api.replace_node_taints(self._node, taints, node["metadata"]["resourceVersion"])
                    written += 1
            if not same_condition(have, v):
                self._api.apply_node_condition(self._node, condition(v, _now(), have))
                written += 1
            return PublishResult(written=written) if written else PublishResult(unchanged=1 + self._taint)
        except PublishError as exc:
            log.debug("%s: %s", self.name, exc)
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")
