"""The Node condition sink (opt-in): ``GPUTopologyDegraded`` on this node's status, and with the operator's
consent the ``NoSchedule`` taint for a degraded topology; a write when either differs from what the Node has, and
the condition's heartbeat (``--condition-heartbeat``), so a steady node costs one read a pass and a write every
few minutes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from topology import Snapshot

from ..._core._sink import PublishResult
from .._api._api import Obj
from .._api._errors import Conflict, PublishError, retry_floor
from .._desired._node_condition import CONDITION, Verdict, condition, desired_taints, same_condition, verdict

log = logging.getLogger(__name__)


@runtime_checkable
class NodeStatusApi(Protocol):
    def get_node_object(self, name: str) -> Obj: ...

    def apply_node_condition(self, name: str, condition: Mapping[str, object]) -> None: ...

    def replace_node_taints(self, name: str, taints: Sequence[Mapping[str, object]],
                            resource_version: str) -> None: ...

    def clear_node_condition(self, name: str) -> None: ...


# client-go's ``retry.DefaultRetry``: a conflict (the Node changed since it was read) is read again and retried
CONFLICT_TRIES = 5
HEARTBEAT_S = 300.0  # the condition written again at least this often with nothing changed (--condition-heartbeat)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stale(have: Mapping[str, object] | None, now: datetime, heartbeat_s: float) -> bool:
    """The condition's ``lastHeartbeatTime`` is ``heartbeat_s`` old or more (or unreadable): write it again."""
    beat = have.get("lastHeartbeatTime") if have is not None else None
    try:
        at = datetime.strptime(str(beat), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return True
    return (now - at).total_seconds() >= heartbeat_s


class NodeConditionSink:
    """The condition on this Node's status, written when it differs and at least every ``heartbeat_s`` (as
    node-problem-detector re-syncs its conditions: a stale ``lastHeartbeatTime`` says the agent is gone); with
    ``taint``, the NoSchedule taint while it is degraded. ``clock``: now, as an aware datetime."""

    name = "node-condition"

    def __init__(self, api: NodeStatusApi, node: str, prefix: str, *, taint: bool = False,
                 heartbeat_s: float = HEARTBEAT_S, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._api, self._node, self._prefix, self._taint = api, node, prefix, taint
        self._heartbeat_s, self._clock = heartbeat_s, clock

    def publish(self, snapshot: Snapshot) -> PublishResult:
        v = verdict(snapshot)
        if v is None:
            return PublishResult()
        written, failed, floor = 0, "", None
        try:
            node = self._api.get_node_object(self._node)
            if self._taint:  # first: its patch is tested against the resourceVersion read, which the apply moves
                try:
                    written, node = self._taints(node, v)
                except PublishError as exc:  # the condition is still written: it does not depend on the taint
                    failed, floor = f"{type(exc).__name__}: {exc}", retry_floor(exc)
            conditions = (node.get("status") or {}).get("conditions") or []
            have = next((c for c in conditions if c.get("type") == CONDITION), None)
            now = self._clock()
            if not same_condition(have, v) or _stale(have, now, self._heartbeat_s):
                self._api.apply_node_condition(self._node, condition(v, _stamp(now), have))
                written += 1
        except PublishError as exc:
            failed, floor = f"{type(exc).__name__}: {exc}", retry_floor(exc)
        if failed:
            log.debug("%s: %s", self.name, failed)
            return PublishResult(written=written, failed=1, detail=failed, retry_after=floor)
        return PublishResult(written=written) if written else PublishResult(unchanged=1 + self._taint)

    def _taints(self, node: Obj, v: Verdict) -> tuple[int, Obj]:
        """The taint set as ``v`` says, read again and retried on a conflict (client-go's ``RetryOnConflict``);
        the writes made and the Node as last read."""
        for attempt in range(CONFLICT_TRIES):
            taints = desired_taints((node.get("spec") or {}).get("taints") or [], v, self._prefix)
            if taints is None:
                return 0, node
            try:
                self._api.replace_node_taints(self._node, taints, node["metadata"]["resourceVersion"])
                return 1, node
            except Conflict:
                if attempt == CONFLICT_TRIES - 1:
                    raise
                node = self._api.get_node_object(self._node)
        raise AssertionError("unreachable")
