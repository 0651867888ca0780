"""The DeviceTaintRule applier (opt-in): a rule per degraded GPU of the NVIDIA GPU DRA driver, removed on
recovery, only on complete knowledge."""

from __future__ import annotations

import logging

from topology import Snapshot

from ..._core._sink import PublishResult
from .._api._api import MANAGED_BY, RESOURCE_GROUP, TAINT_RULE_VERSIONS, KubeApi, Obj, taint_rule_kind
from .._api._errors import PublishError, retry_floor
from .._desired._taints import desired_rules, rule_spec
from ._adopt import Adopter, NotOurs
from ._slice_sink import pick_version

log = logging.getLogger(__name__)


def _name(o: Obj) -> str:
    return str(o["metadata"]["name"])


def _labelled(o: Obj) -> bool:
    labels = o.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


class DeviceTaintRuleSink:
    """Opt-in: a DeviceTaintRule per degraded GPU of the NVIDIA GPU DRA driver, removed on recovery."""

    name = "device-taint-rules"

    def __init__(self, api: KubeApi, node: str, prefix: str, gpu_driver: str = "gpu.nvidia.com") -> None:
        self._api, self._node, self._prefix, self._driver = api, node, prefix, gpu_driver
        self._version: str | None = None
        self._adopter = Adopter(self.name)

    def _ours(self, have: Obj) -> bool:
        """Ours by every mark but the labels: a rule on our GPU driver's pool of this node, with our taint."""
        spec = have.get("spec") or {}
        selector, taint = spec.get("deviceSelector") or {}, spec.get("taint") or {}
        return (selector.get("driver") == self._driver and selector.get("pool") == self._node
                and taint.get("key") == f"{self._prefix}/degraded")

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            if self._version is None:
                self._version = pick_version(self._api, RESOURCE_GROUP, TAINT_RULE_VERSIONS, "devicetaintrules")
            kind = taint_rule_kind(self._version)
            # selected by the node label alone: a rule that lost our managed-by label is still seen (and labelled
            # again); one that lost both is found by the 409 its create gets
            mine = {f"{self._prefix}/node": self._node}
            current = {_name(o): o for o in self._api.list(kind, mine)
                       if o.get("metadata", {}).get("labels", {}).get(f"{self._prefix}/node") == self._node}
            want = {_name(o): o for o in desired_rules(snapshot, self._node, self._prefix, self._driver,
                                                       self._version)}
            written = 0
            for name in sorted(set(current) - set(want)) if snapshot.complete else ():
                self._api.delete(kind, name)
                written += 1
            for name, obj in sorted(want.items()):
                if name not in current:
                    if not self._adopter.still_foreign(self._api, kind, name):
                        self._adopter.create(self._api, kind, obj, self._ours)
                        written += 1
                elif rule_spec(current[name]) != rule_spec(obj) or not _labelled(current[name]):
                    self._api.apply(kind, obj)
                    written += 1
            return PublishResult(written=written) if written else PublishResult(unchanged=len(want))
        except NotOurs as exc:
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")  # once: skipped from now on
        except PublishError as exc:
            log.debug("%s: %s", self.name, exc)  # the agent logs the failed publish, once
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}", retry_after=retry_floor(exc))
