"""Pure label logic: hysteresis, degradation rules, unknown facts keep their values, the plan, the file sink,
and the documented reference generated from the code."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import topology as t
from exporter._core._health import CLASSES, EDGES, classify, degradation
from exporter.kube import (
    FeatureFileSink,
    LabelConfig,
    NodeView,
    catalogue,
    desired_labels,
    plan_node_labels,
    reference_markdown,
)
from exporter.kube._desired._labels import LabelConflict, Labeler
from exporter.kube._desired._labels import desired_labels as _desired
from tests.docs_support import marked
from tests.probe_snapshots import G0, G1, G2, G3, four_gpu_box
from topology import replace

P = "gpu.topology"


def host_copy(gpu: str, value: float) -> t.Measurement:
    return t.Measurement(test="host_to_device_memcpy_ce", subjects=("numa0", gpu), direction="a->b", value=value,
                         unit="bytes_per_second", source=t.Source.MEASURED, method="ce")


@pytest.mark.parametrize("edge", EDGES)
def test_five_percent_noise_at_an_edge_never_flips_a_class(edge: float) -> None:
    rng = random.Random(7)
    for start in (edge * 1.05, edge * 0.95):
        label = classify(start, None)
        for _ in range(2000):
            assert classify(edge * rng.uniform(0.95, 1.05), label) == label


def test_a_real_drop_shows_on_the_first_pass() -> None:
    assert classify(0.35, "full") == "low"
    assert classify(0.6, "full") == "reduced"
    assert classify(0.9, "low") == "full"
    assert classify(0.7, None) == "reduced" and set(CLASSES) == {"low", "reduced", "full"}


def test_width_below_max_is_degraded_gen_at_idle_is_not() -> None:
    box = four_gpu_box()
    idle = replace(box.gpus[0].pcie, current_gen=1)
    narrow = replace(box.gpus[1].pcie, current_width=8)
    gpus = (replace(box.gpus[0], pcie=idle), replace(box.gpus[1], pcie=narrow), *box.gpus[2:])
    snap = replace(box, gpus=gpus)
    assert degradation(snap) == {G1: ("pcie-width",)}
    slow = t.with_measurements(snap, (host_copy(G0, 3e9),))  # Gen1 under load: far below Gen4 x16
    assert degradation(slow) == {G0: ("pcie-slow",), G1: ("pcie-width",)}
    labels = desired_labels(slow, LabelConfig(), {})
    assert labels[f"{P}/degraded"] == "true" and labels[f"{P}/degraded-reason"] == "pcie-slow.pcie-width"


def test_an_inactive_nvlink_where_the_island_has_more_is_degraded() -> None:
    box = four_gpu_box()
    links = tuple(replace(lk, count=3) if {lk.a, lk.b} == {G2, G3} else lk for lk in box.links)
    assert degradation(replace(box, links=links)) == {}  # both ends lost one: the pair is uniform
    third = t.Link(a=G0, b=G2, kind=t.LinkKind.NVLINK, count=1, nvlink_version=4, bytes_per_second=25e9)
    lopsided = replace(box, links=(*box.links, third))
    assert set(degradation(lopsided)) == {G1, G3}


def test_unknown_facts_keep_their_previous_values_and_nothing_is_removed() -> None:
    box = four_gpu_box()
    before = desired_labels(box, LabelConfig(), {})
    problem = t.Problem(source="nvml", subject="node", message="NVML failed",
                        unknown=(t.node_fact(t.Aspect.NVLINKS),))
    no_links = replace(box, links=(), problems=(problem,))
    after = desired_labels(no_links, LabelConfig(), before)
    assert after[f"{P}/nvlink-islands"] == before[f"{P}/nvlink-islands"] == "2"
    assert after[f"{P}/interconnect"] == "nvlink-pairs"
    assert set(after) == set(before)


def test_the_bandwidth_class_reads_its_previous_value_from_the_node() -> None:
    box = t.with_measurements(four_gpu_box(), (host_copy(G0, 0.74 * 31.5e9),))
    assert desired_labels(box, LabelConfig(), {})[f"{P}/bw-host-gpu"] == "reduced"
    assert desired_labels(box, LabelConfig(), {f"{P}/bw-host-gpu": "full"})[f"{P}/bw-host-gpu"] == "full"
    # not measured this pass: the label stays as the Node has it
    assert desired_labels(four_gpu_box(), LabelConfig(), {f"{P}/bw-host-gpu": "low"})[f"{P}/bw-host-gpu"] == "low"


def test_quick_figures_are_shown_not_classed_and_the_labels_name_the_profile() -> None:
    """A quick-profile figure reads below full's on fast links: it is never classed against the theoretical
    rate as if it were full's; the node's labels say which profiles its figures came from. A host copy far
    below the link (pcie-slow) counts in any profile."""
    def of(profile: str, ratio: float) -> t.Measurement:
        m = host_copy(G0, ratio * 31.5e9)
        return replace(m, conditions=(("profile", profile),))

    quick = desired_labels(t.with_measurements(four_gpu_box(), (of("quick", 0.3),)), LabelConfig(), {})
    assert f"{P}/bw-host-gpu" not in quick and quick[f"{P}/probe-profile"] == "quick"
    before = {f"{P}/bw-host-gpu": "full"}  # a class from before: a quick figure does not keep it either
    quick = desired_labels(t.with_measurements(four_gpu_box(), (of("quick", 0.3),)), LabelConfig(), before)
    assert f"{P}/bw-host-gpu" not in quick
    full = desired_labels(t.with_measurements(four_gpu_box(), (of("full", 0.3),)), LabelConfig(), {})
    assert full[f"{P}/bw-host-gpu"] == "low" and full[f"{P}/probe-profile"] == "full"
    both = t.with_measurements(four_gpu_box(), (of("quick", 0.3), replace(of("full", 0.8), subjects=(
        "numa1", G2))))
    labels = desired_labels(both, LabelConfig(), {})
    assert labels[f"{P}/bw-host-gpu"] == "full" and labels[f"{P}/probe-profile"] == "full.quick"
    odd = desired_labels(t.with_measurements(four_gpu_box(), (of("My Profile!", 0.8),)), LabelConfig(), {})
    assert odd[f"{P}/probe-profile"] == "other"  # a saved snapshot's words never make an invalid value


def test_conflicting_labelers_raise() -> None:
    def a(*_: object) -> dict[str, str | None]:
        return {"x": "1"}

    def b(*_: object) -> dict[str, str | None]:
        return {"x": "2"}

    two = (Labeler(name="a", fn=a, needs=(), keys=(("x", ""),)), Labeler(name="b", fn=b, needs=(), keys=(("x", ""),)))
    import exporter.kube._desired._labels as mod

    saved = mod.LABELERS
    mod.LABELERS = two
    try:
        with pytest.raises(LabelConflict):
            _desired(four_gpu_box(), LabelConfig(), {})
    finally:
        mod.LABELERS = saved


def _node(labels: dict[str, str], owned: set[str], others: set[str] = set()) -> NodeView:  # noqa: B006
    return NodeView(name="n", uid="u", labels=labels, owned=frozenset(owned), others=frozenset(others))


def test_plan_sends_nothing_in_steady_state_and_removes_only_provably_ours() -> None:
    cfg = LabelConfig(compat=True)
    desired = desired_labels(four_gpu_box(), cfg, {})
    assert plan_node_labels(_node(desired | {"x/y": "1"}, set(desired)), desired, cfg, True).apply is None
    stale_ours, stale_foreign = f"{P}/gdr", f"{P}/nvlink-gen"
    observed = {k: v for k, v in desired.items() if k not in (stale_ours, stale_foreign)}
    observed |= {stale_ours: "ready", stale_foreign: "9", f"{P}/made-by-hand": "1"}
    want = {k: v for k, v in observed.items() if k not in (stale_ours, stale_foreign, f"{P}/made-by-hand")}
    plan = plan_node_labels(_node(observed, set(observed) - {stale_foreign}), want, cfg, True)
    assert plan.remove == {stale_ours} and plan.apply == want
    assert plan_node_labels(_node(observed, set(observed)), want, cfg, False).remove == frozenset()
    assert stale_ours in catalogue(cfg) and f"{P}/made-by-hand" not in catalogue(cfg)


def test_compat_keys_are_left_to_their_owner() -> None:
    cfg = LabelConfig(compat=True)
    desired = {"nvidia.com/nvswitch.present": "false", f"{P}/gpu.count": "4"}
    node = _node({"nvidia.com/nvswitch.present": "true"}, set(), {"nvidia.com/nvswitch.present"})
    plan = plan_node_labels(node, desired, cfg, True)
    assert plan.skipped == {"nvidia.com/nvswitch.present"} and plan.apply == {f"{P}/gpu.count": "4"}


def test_feature_file_is_atomic_kept_and_rewritten_only_on_change(tmp_path: Path) -> None:
    path = tmp_path / "features.d" / "topolink"
    sink = FeatureFileSink(path, LabelConfig())
    assert sink.publish(four_gpu_box()).written == 1
    text = path.read_text()
    assert f"{P}/gpu.count=4\n" in text and not list(path.parent.glob(".*"))
    assert sink.publish(four_gpu_box()).written == 0 and path.read_text() == text


def test_the_documented_reference_is_generated_from_the_code() -> None:
    _, section = marked("kube-reference")
    assert section == reference_markdown()
    assert re.search(r"\| `gpu.topology/nvlink-domain` \|", section)


def test_public_surface_is_exactly_all() -> None:
    from exporter import kube

    for name in kube.__all__:  # names load on first use; each must resolve
        getattr(kube, name)
    public = {n for n in vars(kube) if not n.startswith("_")}
    assert public == set(kube.__all__)


def test_every_degradation_reason_at_once_still_makes_valid_label_and_taint_values() -> None:
    """A GPU whose fabric reports every unhealthy bit and whose PCIe link is narrow has four reasons, 67 characters
    joined (hypothesis found it): the label, the device taint and the node taint keep those that fit, in order, then
    ``more``."""
    from exporter.kube import desired_rules
    from exporter.kube._desired._node_condition import verdict

    box = four_gpu_box()
    fabric = t.FabricInfo(state=t.FabricState.NOT_SUPPORTED, health_mask=-47)
    narrow = replace(box.gpus[0].pcie, current_width=-1, max_width=1)
    snap = replace(box, gpus=(replace(box.gpus[0], fabric=fabric, pcie=narrow, minor=0),
                                          *box.gpus[1:]))
    reasons = sorted(set(degradation(snap)[G0]))
    assert len(".".join(reasons)) > 63
    (rule,) = desired_rules(snap, "n1", P, "gpu.nvidia.com", "v1alpha3")
    node = verdict(snap)
    assert node is not None
    for value in (desired_labels(snap, LabelConfig(), {})[f"{P}/degraded-reason"], rule["spec"]["taint"]["value"],
                  node.taint_value):
        kept = value.split(".")
        assert len(value) <= 63 and kept[-1] == "more" and kept[:-1] == reasons[:len(kept) - 1] and len(kept) > 1
