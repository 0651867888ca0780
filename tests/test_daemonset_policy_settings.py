"""The admission policy's parameters are the agent's settings, and each setting moves what it allows: the
same real CEL evaluation as ``tests/test_daemonset_policy.py``, with the ConfigMap's data as ``params``; and
the metadata a stolen token would use to block a deletion (finalizers, owners, annotations) is denied."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from exporter.kube import POLICY_SETTINGS
from exporter.kube._desired._compat import COMPAT
from tests.test_daemonset_policy import (
    BASE,
    DEFAULTS,
    FEATURE_META,
    LABELS_ONLY,
    NODES_ONLY,
    OTHER,
    OUR_FEATURES,
    OUR_LABELS,
    OUR_RULES,
    OUR_SLICES,
    OWN,
    POLICY,
    RULE_META,
    SLICE_META,
    admit,
    cel,
    feature,
    feature_op,
    load,
    node,
    request,
    rslice,
    slice_op,
)


def test_the_policys_parameters_are_the_agents_settings() -> None:
    """One table: the ConfigMap the policy reads holds the agent's defaults under the keys of POLICY_SETTINGS,
    the DaemonSet hands each to the agent as TOPOLINK_<SETTING>, and the policy reads no other key."""
    lines = (BASE.parent / "settings" / "agent-settings.env").read_text().splitlines()
    settings = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert settings == DEFAULTS
    generator = yaml.safe_load((BASE.parent / "settings" / "kustomization.yaml").read_text())["configMapGenerator"]
    assert generator == [{"name": "topolink-agent", "envs": ["agent-settings.env"]}]
    assert set(DEFAULTS) == {key for _, key in POLICY_SETTINGS}
    agent = yaml.safe_load((BASE / "daemonset.yaml").read_text())["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom") for e in agent["env"]}
    for dest, key in POLICY_SETTINGS:
        assert env[f"TOPOLINK_{dest.upper()}"] == {"configMapKeyRef": {"name": "topolink-agent", "key": key}}
    read = set(re.findall(r"params\.data\.(\w+)", POLICY.read_text()))
    assert read <= set(DEFAULTS) and read


def test_the_opt_in_keys_are_the_agents_table() -> None:
    (variable,) = [v for v in load()[0]["spec"]["variables"] if v["name"] == "compatKeys"]
    for on, keys in (("true", list(COMPAT)), ("false", [])):
        params = {"data": DEFAULTS | {"compatLabels": on}}
        assert list(cel.evaluate(variable["expression"], {"params": params})) == keys


@pytest.mark.parametrize(("field", "value"), [
    ("finalizers", ["example.com/block-deletion"]),
    ("ownerReferences", [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "u"}]),
    ("annotations", {"node.alpha.kubernetes.io/ttl": "0"}),
])
def test_a_node_gets_no_finalizers_owners_or_annotations(field: str, value: Any) -> None:
    before = node(OWN)
    after = copy.deepcopy(before)
    after["metadata"][field] = value
    assert admit(request("", "nodes", "Node", "UPDATE", OWN), after, before) == LABELS_ONLY


@pytest.mark.parametrize(("params", "allowed", "denied"), [
    ({"labelPrefix": "topo.example.com"}, {"topo.example.com/gpu.count": "8"}, {"gpu.topology/gpu.count": "4"}),
    ({"compatLabels": "true"}, {"nvidia.com/gpu.clique": "c.1", "nvidia.com/nvlink.version": "4"},
     {"nvidia.com/gpu.present": "false"}),
    ({"compatLabels": "false"}, {"gpu.topology/gpu.count": "4"}, {"nvidia.com/gpu.clique": "c.1"}),
], ids=["prefix", "compat-on", "compat-off"])
def test_label_settings(params: dict[str, str], allowed: dict[str, str], denied: dict[str, str]) -> None:
    data = DEFAULTS | params
    before = node(OWN)
    for change, verdict in ((allowed, None), (denied, OUR_LABELS)):
        after = copy.deepcopy(before)
        after["metadata"]["labels"].update(change)
        assert admit(request("", "nodes", "Node", "UPDATE", OWN), after, before, data) == verdict


@pytest.mark.parametrize("via", ["nodefeature", "file", "none"])
def test_no_node_writes_unless_labels_go_to_the_node(via: str) -> None:
    before = node(OWN)
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["gpu.topology/gpu.count"] = "4"
    assert admit(request("", "nodes", "Node", "UPDATE", OWN), after, before, DEFAULTS | {"labelsVia": via}) == \
        NODES_ONLY
    verdict = None if via == "nodefeature" else OUR_FEATURES
    assert admit(request("nfd.k8s-sigs.io", "nodefeatures", "NodeFeature", "CREATE", "f", namespace="topolink"),
                 feature(OWN), None, DEFAULTS | {"labelsVia": via}) == verdict


def test_slice_settings() -> None:
    other = DEFAULTS | {"draDriver": "topo.example.com"}
    create = request("resource.k8s.io", "resourceslices", "ResourceSlice", "CREATE", "s")
    assert admit(create, rslice(OWN, "topo.example.com"), None, other) is None
    assert admit(create, rslice(OWN), None, other) == OUR_SLICES
    assert admit(create, rslice(OWN), None, DEFAULTS | {"resourceSlices": "false"}) == OUR_SLICES


def owned_by(obj: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": kind, "name": name, "uid": "x"}]
    return out


def with_meta(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(meta)
    return out


def test_slice_metadata() -> None:
    mine = owned_by(rslice(OWN), "Node", OWN)
    assert slice_op("CREATE", mine, None) is None
    assert slice_op("UPDATE", mine, rslice(OWN)) is None
    for bad in (owned_by(rslice(OWN), "Node", OTHER), owned_by(rslice(OWN), "Pod", OWN),
                with_meta(mine, finalizers=["example.com/hold"]), with_meta(mine, annotations={"a": "b"})):
        assert slice_op("CREATE", bad, None) == SLICE_META
        assert slice_op("UPDATE", bad, mine) == SLICE_META
    held = with_meta(mine, finalizers=["example.com/hold"])  # someone else's finalizer stays as it was
    assert slice_op("UPDATE", held, held) is None
    assert slice_op("DELETE", None, held) is None


def test_feature_metadata() -> None:
    mine = owned_by(feature(OWN), "Pod", "topolink-abcde")
    assert feature_op("CREATE", mine, None) is None
    assert feature_op("CREATE", owned_by(feature(OWN), "Pod", "someone-else"), None) == FEATURE_META
    assert feature_op("CREATE", owned_by(feature(OWN), "DaemonSet", "topolink-abcde"), None) == FEATURE_META
    assert feature_op("UPDATE", with_meta(mine, finalizers=["x/y"]), mine) == FEATURE_META


def rule(pool: str, driver: str = "gpu.nvidia.com", key: str = "gpu.topology/degraded",
         node_label: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
            "metadata": {"name": f"topolink-{pool}-gpu-1",
                         "labels": {"app.kubernetes.io/managed-by": "topolink",
                                    "gpu.topology/node": node_label or pool}},
            "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": "gpu-1"},
                     "taint": {"key": key, "value": "pcie-width", "effect": "NoSchedule"}}}


def rule_op(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None, on: bool = True) -> str | None:
    name = (obj or old or {})["metadata"]["name"]
    return admit(request("resource.k8s.io", "devicetaintrules", "DeviceTaintRule", operation, name,
                         version="v1beta2"), obj, old, DEFAULTS | {"deviceTaintRules": "true" if on else "false"})


def test_device_taint_rules() -> None:
    assert rule_op("CREATE", rule(OWN), None) is None
    assert rule_op("UPDATE", rule(OWN), rule(OWN)) is None
    assert rule_op("DELETE", None, rule(OWN)) is None
    assert rule_op("CREATE", rule(OWN), None, on=False) == OUR_RULES
    for bad in (rule(OTHER), rule(OWN, driver="gpu.topology"), rule(OWN, key="gpu.topology/other"),
                rule(OWN, node_label=OTHER), rule(OWN, key="example.com/degraded")):
        assert rule_op("CREATE", bad, None) == OUR_RULES
    assert rule_op("DELETE", None, rule(OTHER)) == OUR_RULES
    assert rule_op("CREATE", owned_by(rule(OWN), "Node", OWN), None) == RULE_META
    assert rule_op("CREATE", with_meta(rule(OWN), finalizers=["x/y"]), None) == RULE_META
