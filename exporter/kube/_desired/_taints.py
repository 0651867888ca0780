"""DeviceTaintRules for degraded GPUs, pure: the NVIDIA GPU DRA driver's device ``gpu-<minor>`` in the
pool named after the node, tainted ``NoSchedule`` with the degradation reasons as the value."""

from __future__ import annotations

from topology import Aspect, Snapshot

from ..._core._health import degradation
from .._api._api import MANAGED_BY, Obj
from ._names import is_label_value, joined_value, object_name


def desired_rules(snap: Snapshot, node: str, prefix: str, driver: str, version: str) -> list[Obj]:
    k = snap.knowledge()
    bad = degradation(snap)
    out: list[Obj] = []
    for g in snap.gpus:
        if g.id not in bad or g.minor is None or not k.knows_all(g.id, Aspect.NVLINKS, Aspect.PCIE_LINK):
            continue
        device = f"gpu-{g.minor}"
        labels = {**MANAGED_BY, **({f"{prefix}/node": node} if is_label_value(node) else {})}
        out.append({
            "apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceTaintRule",
            "metadata": {"name": object_name("topolink", node, device), "labels": labels},
            "spec": {"deviceSelector": {"driver": driver, "pool": node, "device": device},
                     "taint": {"key": f"{prefix}/degraded", "value": joined_value(bad[g.id]), "effect": "NoSchedule"}},
        })
    return out


def rule_spec(obj: Obj) -> tuple[object, ...]:
    spec = obj.get("spec", {})
    taint = spec.get("taint", {})
    return (spec.get("deviceSelector"), taint.get("key"), taint.get("value"), taint.get("effect"))
