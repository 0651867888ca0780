"""The node condition and taint as pure functions: ``True`` with the reasons when a GPU's links are degraded,
``Unknown`` when a fact the rule needs is unread, ``False`` when whole; the taint follows only what is known, and
every other taint stays as it is."""

from __future__ import annotations

import topology as t
from exporter.kube._desired._node_condition import condition, desired_taints, same_condition, verdict
from tests.test_labels_kube import four_gpu_box
from topology import replace

KEY = "gpu.topology/degraded"
OTHER = {"key": "example.com/maintenance", "value": "x", "effect": "NoExecute"}


def narrowed(box: t.Snapshot) -> t.Snapshot:
    g = box.gpus[0]
    pcie = replace(g.pcie or t.PcieLinkState(), current_width=8, max_width=16)
    return replace(box, gpus=(replace(g, pcie=pcie), *box.gpus[1:]))


def unread(box: t.Snapshot) -> t.Snapshot:
    problem = t.Problem(source="nvml", subject="node", message="NVML failed", unknown=(t.node_fact(t.Aspect.NVLINKS),))
    return replace(box, links=(), problems=(problem,))


def test_whole_degraded_and_unknown() -> None:
    box = four_gpu_box()
    whole, bad, unknown = verdict(box), verdict(narrowed(box)), verdict(unread(box))
    assert whole is not None and (whole.status, whole.reason, whole.taint_value) == ("False", "GPUTopologyWhole", None)
    assert bad is not None and (bad.status, bad.reason, bad.taint_value) == ("True", "PCIeWidth", "pcie-width")
    assert unknown is not None and (unknown.status, unknown.reason) == ("Unknown", "GPUTopologyUnknown")
    assert verdict(replace(box, gpus=())) is None


def test_the_transition_time_moves_only_with_the_status() -> None:
    bad = verdict(narrowed(four_gpu_box()))
    assert bad is not None
    first = condition(bad, "2026-01-01T00:00:00Z", None)
    again = condition(bad, "2026-01-01T01:00:00Z", first)
    assert again["lastTransitionTime"] == "2026-01-01T00:00:00Z" and same_condition(first, bad)
    whole = verdict(four_gpu_box())
    assert whole is not None and condition(whole, "2026-01-02T00:00:00Z", first)["lastTransitionTime"] == (
        "2026-01-02T00:00:00Z") and not same_condition(first, whole)


def test_the_taint_follows_what_is_known_and_keeps_the_others() -> None:
    box = four_gpu_box()
    bad, whole, unknown = verdict(narrowed(box)), verdict(box), verdict(unread(box))
    ours = {"key": KEY, "value": "pcie-width", "effect": "NoSchedule"}
    assert desired_taints([OTHER], bad, "gpu.topology") == [OTHER, ours]
    assert desired_taints([OTHER, ours], bad, "gpu.topology") is None  # already there: no write
    assert desired_taints([ours, OTHER], whole, "gpu.topology") == [OTHER]
    assert desired_taints([OTHER], whole, "gpu.topology") is None
    assert desired_taints([ours], unknown, "gpu.topology") is None
    assert desired_taints([], unknown, "gpu.topology") is None
    assert all(t_["effect"] != "NoExecute" for t_ in desired_taints([], bad, "gpu.topology") or [])
