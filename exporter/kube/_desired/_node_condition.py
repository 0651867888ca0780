"""The Node condition and the opt-in node taint for the GPU topology, pure: what node-level schedulers and
node-problem-detector's readers look at (``status.conditions`` and ``spec.taints``), where the labels and DRA
device taints are not read.

The condition ``GPUTopologyDegraded`` says, as node-problem-detector's conditions do, ``True`` with the reasons
when a GPU's links are degraded, ``Unknown`` when a fact the rule needs was not read, and ``False`` when every
GPU is whole. The taint ``<prefix>/degraded=<reasons>:NoSchedule`` is there only while the topology is known to be
degraded and gone only once it is known to be whole: unknown changes nothing. Never ``NoExecute``: a degraded
link slows a job, it does not make running pods wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topology import Aspect, Snapshot

from ..._core._health import degradation
from ._names import joined_value

CONDITION = "GPUTopologyDegraded"
_NEEDS = (Aspect.NVLINKS, Aspect.PCIE_LINK, Aspect.FABRIC)
# the degradation kinds as condition reasons (CamelCase, as Kubernetes' and node-problem-detector's are)
REASONS: Mapping[str, str] = {"nvlink-down": "NVLinkDown", "pcie-slow": "PCIeSlow", "pcie-width": "PCIeWidth",
                              "fabric-degraded-bw": "FabricDegradedBandwidth",
                              "fabric-route-unhealthy": "FabricRouteUnhealthy",
                              "fabric-config": "FabricIncorrectConfiguration"}


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str  # "True", "False" or "Unknown", as a NodeCondition's status
    reason: str
    message: str
    taint_value: str | None  # the taint's value when the node is known degraded; None otherwise


def _reason(kind: str) -> str:
    return REASONS.get(kind) or "".join(part[:1].upper() + part[1:] for part in kind.split("-"))


def verdict(snap: Snapshot) -> Verdict | None:
    """The condition for ``snap``; None on a node without GPUs (nothing to say)."""
    if not snap.gpus:
        return None
    bad = degradation(snap)
    if bad:
        kinds = sorted({kind for kinds in bad.values() for kind in kinds})
        gpus = ", ".join(f"{g} ({', '.join(bad[g])})" for g in sorted(bad))
        return Verdict("True", "".join(_reason(k) for k in kinds) if len(kinds) < 3 else "GPULinksDegraded",
                       f"degraded GPU links: {gpus}", joined_value(kinds))
    k = snap.knowledge()
    unread = sorted(g.id for g in snap.gpus if not k.knows_all(g.id, *_NEEDS))
    if unread:
        return Verdict("Unknown", "GPUTopologyUnknown",
                       f"the NVLinks or PCIe links of {len(unread)} GPUs were not read (first: {unread[0]})", None)
    return Verdict("False", "GPUTopologyWhole",
                   f"every GPU's NVLinks and PCIe links as expected ({len(snap.gpus)} GPUs)", None)


def condition(v: Verdict, now: str, previous: Mapping[str, object] | None) -> dict[str, object]:
    """The NodeCondition; ``lastTransitionTime`` kept from ``previous`` while the status stays."""
    since = previous.get("lastTransitionTime") if previous and previous.get("status") == v.status else None
    return {"type": CONDITION, "status": v.status, "reason": v.reason, "message": v.message,
            "lastHeartbeatTime": now, "lastTransitionTime": since or now}


def same_condition(have: Mapping[str, object] | None, v: Verdict) -> bool:
    return have is not None and (have.get("status"), have.get("reason"), have.get("message")) == (
        v.status, v.reason, v.message)


def taint_key(prefix: str) -> str:
    return f"{prefix}/degraded"


def desired_taints(current: Sequence[Mapping[str, object]], v: Verdict | None, prefix: str
                   ) -> list[dict[str, object]] | None:
    """The Node's taints with ours set or removed as ``v`` says; None when they stay as they are (unknown
    changes nothing; every other taint is kept as it is, in its place)."""
    key = taint_key(prefix)
    ours = [t for t in current if t.get("key") == key]
    if v is None or v.status == "Unknown":
        return None
    want: list[dict[str, object]] = [{"key": key, "value": v.taint_value, "effect": "NoSchedule"}] if v.taint_value \
        else []
    if [{"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")} for t in ours] == want:
        return None
    return [dict(t) for t in current if t.get("key") != key] + want
