"""The ValidatingAdmissionPolicy in ``daemonset/base``, evaluated by a real CEL implementation (the
``common-expression-language`` package) on admission requests shaped as the API server builds them:
``request`` (an AdmissionRequest with ``userInfo.extra``), ``object`` (null on DELETE), ``oldObject``
(null on CREATE; for a PATCH, the stored object while ``object`` is the patched one), ``params`` (the
ConfigMap ``topolink-agent``), ``variables``. ``tests/test_apiserver_policy.py`` runs the same policy in a
real API server against the agent's own writes.

Evaluation follows the API server: a false match condition skips the policy; variables are bound in
order; any validation that is false or fails to evaluate denies (``failurePolicy: Fail``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.kube import KubePublishConfig, policy_params

cel = pytest.importorskip("cel")

BASE = Path(__file__).resolve().parents[1] / "daemonset" / "base"
POLICY = BASE / "admission-policy.yaml"
DEFAULTS = policy_params(KubePublishConfig())
NODES_ONLY = "the agent may update only the Node it runs on, its labels only when it labels Nodes (labelsVia node)"
OUR_LABELS = "the agent may change only labels under its prefix (labelPrefix) and the opt-in keys it owns"
LABELS_ONLY = "the agent may change a Node's labels and (nodeTaint) its own NoSchedule taint, nothing else"
OUR_SLICES = "the agent may write only ResourceSlices of its driver (draDriver) for the Node it runs on"
SLICE_META = "a ResourceSlice of the agent is owned by its Node alone and gets no finalizers or annotations"
OUR_FEATURES = "the agent may write only NodeFeatures for the Node it runs on, with labels under its prefix only"
FEATURE_META = "a NodeFeature of the agent is owned by its Pod alone and gets no finalizers or annotations"
OUR_RULES = "the agent may write only DeviceTaintRules for devices of the GPU driver in its node's pool"
RULE_META = "a DeviceTaintRule of the agent gets no owners, finalizers or annotations"
AGENT = "system:serviceaccount:topolink:topolink"
NODE_CLAIM = "authentication.kubernetes.io/node-name"
OWN, OTHER = "gpu-node-1", "gpu-node-2"


def load() -> tuple[dict[str, Any], dict[str, Any]]:
    policy, binding = yaml.safe_load_all(POLICY.read_text())
    return policy, binding


def admit(request: dict[str, Any], obj: dict[str, Any] | None, old: dict[str, Any] | None,
          params: dict[str, str] | None = None) -> str | None:
    """None when admitted, else the denial message; ``params``: the ConfigMap's data (default: the agent's
    defaults)."""
    spec = load()[0]["spec"]
    ctx: dict[str, Any] = {"request": request, "object": obj, "oldObject": old,
                           "params": {"apiVersion": "v1", "kind": "ConfigMap", "data": params or DEFAULTS}}
    if not all(cel.evaluate(c["expression"], ctx) is True for c in spec["matchConditions"]):
        return None
    variables: dict[str, Any] = {}
    for v in spec["variables"]:
        variables[v["name"]] = cel.evaluate(v["expression"], {**ctx, "variables": variables})
    ctx["variables"] = variables
    for rule in spec["validations"]:
        try:
            ok = cel.evaluate(rule["expression"], ctx)
        except (ValueError, TypeError, RuntimeError) as exc:
            return f"evaluation error: {exc}"
        if ok is not True:
            return str(rule["message"])
    return None


def request(group: str, resource: str, kind: str, operation: str, name: str, *, user: str = AGENT,
            node: str | None = OWN, namespace: str = "", version: str = "v1") -> dict[str, Any]:
    user_info: dict[str, Any] = {"username": user, "uid": "u-1",
                                 "groups": ["system:serviceaccounts", "system:serviceaccounts:topolink",
                                            "system:authenticated"]}
    if node is not None:  # a pod-bound token carries the pod's and the node's name and uid
        user_info["extra"] = {NODE_CLAIM: [node], "authentication.kubernetes.io/node-uid": ["n-uid"],
                              "authentication.kubernetes.io/pod-name": ["topolink-abcde"],
                              "authentication.kubernetes.io/pod-uid": ["p-uid"]}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    req: dict[str, Any] = {"uid": "r-1", "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                           "name": name, "operation": operation, "userInfo": user_info, "dryRun": False}
    if namespace:
        req["namespace"] = namespace
    return req


def node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": "n-uid", "resourceVersion": "7",
                            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
                                       **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": dict(spec),
            "status": {"nodeInfo": {"kubeletVersion": "v1.36.0"}}}


def patch_node(name: str, change: dict[str, str | None], *, user: str = AGENT, claim: str | None = OWN,
               old: dict[str, Any] | None = None) -> str | None:
    """A server-side apply to a Node arrives as UPDATE with the stored and the patched object."""
    before = old or node(name, {"gpu.topology/gpu.count": "8"})
    after = copy.deepcopy(before)
    for k, v in change.items():
        if v is None:
            after["metadata"]["labels"].pop(k, None)
        else:
            after["metadata"]["labels"][k] = v
    return admit(request("", "nodes", "Node", "UPDATE", name, user=user, node=claim), after, before)


def test_own_node_our_labels_added_changed_removed() -> None:
    assert patch_node(OWN, {"gpu.topology/nvlink-islands": "1"}) is None
    assert patch_node(OWN, {"gpu.topology/gpu.count": "4"}) is None
    assert patch_node(OWN, {"gpu.topology/gpu.count": None}) is None
    assert patch_node(OWN, {}) is None  # an apply that changes nothing


def test_other_node_denied() -> None:
    assert patch_node(OTHER, {"gpu.topology/gpu.count": "4"}) == NODES_ONLY


@pytest.mark.parametrize("change", [{"nvidia.com/gpu.present": "false"}, {"nvidia.com/gpu.present": None},
                                    {"node-role.kubernetes.io/control-plane": ""},
                                    {"gpu.topology.evil/x": "1"}, {"gpu.topologyx/y": "1"}])
def test_someone_elses_label_denied(change: dict[str, str | None]) -> None:
    assert patch_node(OWN, change) == OUR_LABELS
    assert patch_node(OWN, {"gpu.topology/gpu.count": "4", **change}) is not None


def test_own_node_nothing_but_labels() -> None:
    before = node(OWN)
    after = copy.deepcopy(before)
    after["spec"]["taints"] = [{"key": "x", "effect": "NoSchedule"}]
    assert admit(request("", "nodes", "Node", "UPDATE", OWN), after, before) == LABELS_ONLY
    after = copy.deepcopy(before)
    after["metadata"]["annotations"] = {"x": "y"}
    assert admit(request("", "nodes", "Node", "UPDATE", OWN), after, before) is not None
    assert admit(request("", "nodes", "Node", "DELETE", OWN), None, before) is not None
    assert admit(request("", "nodes", "Node", "CREATE", OTHER), node(OTHER), None) is not None


def test_no_node_name_claim_denies_everything() -> None:
    message = "the agent's token names no node (authentication.kubernetes.io/node-name); it may change nothing"
    assert patch_node(OWN, {"gpu.topology/gpu.count": "4"}, claim=None) == message
    assert admit(request("resource.k8s.io", "resourceslices", "ResourceSlice", "CREATE", "s", node=None),
                 rslice(OWN), None) == message
    assert admit(request("nfd.k8s-sigs.io", "nodefeatures", "NodeFeature", "CREATE", "f", node=None,
                         namespace="topolink"), feature(OWN), None) == message


def test_other_users_are_not_restricted() -> None:
    for user in ("system:node:gpu-node-2", "system:serviceaccount:topolink:topolink-prune",
                 "system:serviceaccount:node-feature-discovery:nfd-master", "kubernetes-admin"):
        assert patch_node(OWN, {"nvidia.com/gpu.present": None}, user=user, claim=None) is None


def rslice(node_name: str | None, driver: str = "gpu.topology") -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": node_name or "all", "generation": 1,
                                                       "resourceSliceCount": 1}, "devices": []}
    if node_name is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node_name
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{driver}-x", "labels": {"app.kubernetes.io/managed-by": "topolink"}},
            "spec": spec}


def slice_op(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> str | None:
    name = (obj or old or {})["metadata"]["name"]
    return admit(request("resource.k8s.io", "resourceslices", "ResourceSlice", operation, name), obj, old)


def test_our_slices_on_our_node() -> None:
    assert slice_op("CREATE", rslice(OWN), None) is None
    assert slice_op("UPDATE", rslice(OWN), rslice(OWN)) is None
    assert slice_op("DELETE", None, rslice(OWN)) is None


@pytest.mark.parametrize(("operation", "obj", "old"), [
    ("CREATE", rslice(OWN, "gpu.nvidia.com"), None),
    ("CREATE", rslice(OTHER), None),
    ("CREATE", rslice(None), None),
    ("UPDATE", rslice(OWN), rslice(OTHER)),
    ("UPDATE", rslice(OTHER), rslice(OWN)),
    ("UPDATE", rslice(OWN), rslice(OWN, "gpu.nvidia.com")),
    ("DELETE", None, rslice(OTHER)),
    ("DELETE", None, rslice(OWN, "gpu.nvidia.com")),
], ids=["other-driver", "other-node", "all-nodes", "steal", "give-away", "take-driver", "delete-other-node",
        "delete-other-driver"])
def test_other_slices_denied(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
    assert slice_op(operation, obj, old) == OUR_SLICES


def feature(node_name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": f"topolink-features-for-{node_name}", "namespace": "topolink",
                         "labels": {"nfd.node.kubernetes.io/node-name": node_name,
                                    "app.kubernetes.io/managed-by": "topolink"}},
            "spec": {"labels": labels if labels is not None else {"gpu.topology/gpu.count": "8"}, **spec}}


NFD = DEFAULTS | {"labelsVia": "nodefeature"}


def feature_op(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> str | None:
    name = (obj or old or {})["metadata"]["name"]
    return admit(request("nfd.k8s-sigs.io", "nodefeatures", "NodeFeature", operation, name, namespace="topolink",
                         version="v1alpha1"), obj, old, NFD)


def test_node_features() -> None:
    assert feature_op("CREATE", feature(OWN), None) is None
    assert feature_op("UPDATE", feature(OWN, {"gpu.topology/gpu.count": "4"}), feature(OWN)) is None
    assert feature_op("DELETE", None, feature(OWN)) is None
    denied = OUR_FEATURES
    assert feature_op("CREATE", feature(OTHER), None) == denied
    assert feature_op("CREATE", feature(OWN, {"nvidia.com/gpu.present": "true"}), None) == denied
    assert feature_op("CREATE", feature(OWN, features={"flags": {}}), None) == denied
    assert feature_op("UPDATE", feature(OWN), feature(OTHER)) == denied
    assert feature_op("DELETE", None, feature(OTHER)) == denied
    unlabelled = feature(OWN)
    del unlabelled["metadata"]["labels"]
    assert feature_op("CREATE", unlabelled, None) == denied


def test_binding_denies_with_the_policy() -> None:
    policy, binding = load()
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"],
                               "paramRef": {"name": "topolink-agent", "namespace": "topolink",
                                            "parameterNotFoundAction": "Deny"}}
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    assert policy["spec"]["failurePolicy"] == "Fail"
