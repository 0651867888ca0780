"""Every object we write, for every machine profile, validates strictly against Kubernetes 1.34-1.37; no
snapshot, however broken, yields an invalid label or slice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import topology as t
from exporter.kube import (
    InvalidObject,
    LabelConfig,
    SliceConfig,
    build_slices,
    desired_devices,
    desired_labels,
    desired_rules,
)
from exporter.kube._desired._names import is_attribute_name, is_dns_label, is_label_key, is_label_value
from exporter.kube._sinks._label_sinks import node_feature, render_feature_file
from tests.budget import examples
from tests.kube_support import K8S, PROFILES, TAINT_RULE_VERSION, discover_profile, validate
from tests.strategies import snapshots
from topology import replace

SLICE_VERSIONS = {"1.34": ("v1", "v1beta2", "v1beta1"), "1.35": ("v1", "v1beta2", "v1beta1"),
                  "1.36": ("v1", "v1beta2", "v1beta1"), "1.37": ("v1", "v1beta2")}


@pytest.fixture(scope="session")
def profile_snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Snapshot]:
    return {p: discover_profile(p, tmp_path_factory.mktemp(p)) for p in PROFILES}


def degrade(snap: t.Snapshot) -> t.Snapshot:
    """The first GPU trained to half its lanes: every profile then has a degraded GPU."""
    g = snap.gpus[0]
    pcie = replace(g.pcie or t.PcieLinkState(max_width=16, current_width=16), current_width=8,
                               max_width=16)
    return replace(snap, gpus=(replace(g, pcie=pcie), *snap.gpus[1:]))


def check_labels_ok(labels: dict[str, str]) -> None:
    for k, v in labels.items():
        assert is_label_key(k) and is_label_value(v), (k, v)


def check_slice_limits(obj: dict[str, Any]) -> None:
    devices = obj["spec"]["devices"]
    tainted = any(d.get("taints") or d.get("basic", {}).get("taints") for d in devices)
    assert len(devices) <= (64 if tainted else 128)
    for d in devices:
        body = d.get("basic", d)
        assert is_dns_label(d["name"])
        assert len(body["attributes"]) <= 32
        for name, value in body["attributes"].items():
            assert is_attribute_name(name), name
            assert len(value) == 1
            (kind, v), = value.items()
            assert kind in ("int", "bool", "string", "version")
            if kind in ("string", "version"):
                assert len(v) <= 64


@pytest.mark.parametrize("profile", PROFILES)
def test_every_object_of_every_profile_validates(profile: str, profile_snapshots: dict[str, t.Snapshot],
                                                 tmp_path: Path) -> None:
    snap = degrade(profile_snapshots[profile])
    labels = desired_labels(snap, LabelConfig(compat=True), {})
    check_labels_ok(labels)
    assert render_feature_file(labels)
    devices = desired_devices(snap, SliceConfig())
    assert len([d for d in devices if d["name"].startswith("gpu-")]) == len(snap.gpus)
    for k8s in K8S:
        validate({"apiVersion": "v1", "kind": "Node", "metadata": {"name": snap.node, "labels": labels}}, k8s)
        for version in SLICE_VERSIONS[k8s]:
            for obj in build_slices(devices, node=snap.node, node_uid="u", cfg=SliceConfig(), version=version,
                                    generation=3):
                validate(obj, k8s)
                check_slice_limits(obj)
        rules = desired_rules(snap, snap.node, "gpu.topology", "gpu.nvidia.com", TAINT_RULE_VERSION[k8s])
        # the GPU degraded here, and those the profile itself degrades (a fabric health mask, say)
        before = desired_rules(profile_snapshots[profile], snap.node, "gpu.topology", "gpu.nvidia.com",
                               TAINT_RULE_VERSION[k8s])
        expected = {f"gpu-{snap.gpus[0].minor}"} | {r["spec"]["deviceSelector"]["device"] for r in before}
        assert sorted(r["spec"]["deviceSelector"]["device"] for r in rules) == sorted(expected)
        for rule in rules:
            validate(rule, k8s)
    assert node_feature(snap.node, "nfd", labels, [])["spec"]["labels"] == labels


def test_many_devices_split_into_slices_of_at_most_64_when_tainted() -> None:
    devices = [{"name": f"gpu-{i}", "attributes": {"gpu.topology/type": {"string": "gpu"}},
                "taints": [{"key": "gpu.topology/topology-only", "value": "true", "effect": "NoSchedule"}]}
               for i in range(150)]
    slices = build_slices(devices, node="n", node_uid="u", cfg=SliceConfig(), version="v1", generation=1)
    assert [len(s["spec"]["devices"]) for s in slices] == [64, 64, 22]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    for s in slices:
        validate(s, "1.37")


@settings(max_examples=examples(60, 600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots)
def test_no_snapshot_yields_an_invalid_label_taint_or_slice(snap: t.Snapshot) -> None:
    from exporter.kube._desired._names import is_label_value
    from exporter.kube._desired._node_condition import verdict

    check_labels_ok(desired_labels(snap, LabelConfig(compat=True), {}))
    for rule in desired_rules(snap, "n1", "gpu.topology", "gpu.nvidia.com", "v1alpha3"):
        assert is_label_value(rule["spec"]["taint"]["value"]), rule["spec"]["taint"]
    node = verdict(snap)
    assert node is None or node.taint_value is None or is_label_value(node.taint_value), node
    try:
        objs = build_slices(desired_devices(snap, SliceConfig()), node=snap.node, node_uid="u", cfg=SliceConfig(),
                            version="v1", generation=1)
    except InvalidObject:
        return  # refused before any request: a node name the API would reject
    for obj in objs:
        check_slice_limits(obj)
        validate(obj, "1.37")
