"""The DeviceTaintRule applier (opt-in): a rule per degraded GPU of the NVIDIA GPU DRA driver, removed on
recovery, only on complete knowledge."""

from __future__ import annotations

import logging

from topology import Snapshot

from ..._core._sink import PublishResult
from .._api._api import MANAGED_BY, RESOURCE_GROUP, TAINT_RULE_VERSIONS, KubeApi, Obj, taint_rule_kind
from .._api._errors import PublishError
from .._desired._taints import desired_rules, rule_spec
from ._slice_sink import pick_version

log = logging.getLogger(__name__)


def _name(o: Obj) -> str:
    return str(o["metadata"]["name"])


class DeviceTaintRuleSink:
    """Opt-in: a DeviceTaintRule per degraded GPU of the NVIDIA GPU DRA driver, removed on recovery."""

    name = "device-taint-rules"

    def __init__(self, api: KubeApi, node: str, prefix: str, gpu_driver: str = "gpu.nvidia.com") -> None:
        self._api, self._node, self._prefix, self._driver = api, node, prefix, gpu_driver
        self._version: str | None = None

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            if self._version is None:
                self._version = pick_version(self._api, RESOURCE_GROUP, TAINT_RULE_VERSIONS, "devicetaintrules")
            kind = taint_rule_kind(self._version)
            mine = {f"{self._prefix}/node": self._node} | MANAGED_BY
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
                    self._api.create(kind, obj)
                    written += 1
                elif rule_spec(current[name]) != rule_spec(obj):
                    self._api.apply(kind, obj)
                    written += 1
            return PublishResult(written=written) if written else PublishResult(unchanged=len(want))
        except PublishError as exc:
            log.debug("%s: %s", self.name, exc)  # the agent logs the failed publish, once
            return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}")
