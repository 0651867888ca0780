"""The shipped ValidatingAdmissionPolicy in a real API server, for every setting the agent has: the agent,
configured as the DaemonSet configures it (``TOPOLINK_*`` variables from the ConfigMap the policy reads as its
parameters, through the real flag parser), publishes with a ServiceAccount token bound to a Pod on its Node,
and every write it makes is allowed; the writes a stolen token would try (labels outside the prefix, another
Node, finalizers, owners and annotations, slices and features of another node or driver) are denied by the
policy itself: the ServiceAccount's RBAC is the union of every use in ``exporter.kube.PERMISSIONS``, so a
refusal here is the policy's, never RBAC's.

The API server runs with ``DRADeviceTaintRules`` on for this module (restored after), and NFD's NodeFeature
CRD is installed in a minimal form (its objects unvalidated), so that every kind the agent writes exists.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import topology as t
from exporter.kube import (
    POLICY_SETTINGS,
    KubePublishConfig,
    LightkubeNodeApi,
    add_kube_args,
    config_from_args,
    policy_params,
    policy_rules,
    sinks_from_config,
)
from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, agent_token, create_node, wait_until
from tests.chart_support import unhashed
from tests.kube_support import discover_profile
from tests.test_daemonset import kustomize
from topology import replace

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
NS = "topolink"
GATES = ("--feature-gates=DRADeviceTaintRules=true", "--runtime-config=resource.k8s.io/v1beta2=true")
SHIPPED = ("Namespace", "ServiceAccount", "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
NFD_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "nodefeatures.nfd.k8s-sigs.io"},
           "spec": {"group": "nfd.k8s-sigs.io", "scope": "Namespaced",
                    "names": {"kind": "NodeFeature", "listKind": "NodeFeatureList", "plural": "nodefeatures",
                              "singular": "nodefeature"},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
PATHS = {"Namespace": "/api/v1/namespaces", "ServiceAccount": f"/api/v1/namespaces/{NS}/serviceaccounts",
         "ConfigMap": f"/api/v1/namespaces/{NS}/configmaps",
         "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
         "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
         "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
         "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
         "ValidatingAdmissionPolicyBinding":
             "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
         "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def apply(http: httpx.Client, obj: dict[str, Any], manager: str = "tests") -> httpx.Response:
    name = obj["metadata"]["name"]
    return http.patch(f"{PATHS[obj['kind']]}/{name}", params={"fieldManager": manager, "force": "true"},
                      json=obj, headers=APPLY)


def grant_every_use(http: httpx.Client) -> None:
    subject = [{"kind": "ServiceAccount", "name": "topolink", "namespace": NS}]
    for kind, uses, namespaced in (("ClusterRole", ("node-labels", "resource-slices", "device-taint-rules",
                                                    "node-condition", "node-taint"), False),
                                   ("Role", ("node-feature",), True)):
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                "metadata": {"name": "topolink-every-use"}, "rules": policy_rules(uses, namespaced=namespaced)}
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding",
                   "metadata": {"name": "topolink-every-use"}, "subjects": subject,
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "topolink-every-use"}}
        for obj in (role, binding):
            assert apply(http, obj).status_code in (200, 201)


@pytest.fixture(scope="module")
def cluster(kube_apiserver: ApiServer) -> Iterator[ApiServer]:
    kube_apiserver.restart(GATES)
    try:
        with kube_apiserver.admin() as http:
            # the settings by their plain name (not kustomize's hash-suffixed one): each case applies its own data
            for obj in [NFD_CRD, *(d for d in unhashed(kustomize("default")) if d["kind"] in SHIPPED)]:
                assert apply(http, obj).status_code in (200, 201), obj["kind"]
            grant_every_use(http)
            wait_until("NodeFeatures served", lambda: http.get("/apis/nfd.k8s-sigs.io/v1alpha1").status_code == 200)
            create_node(http, "policy-probe")
            create_node(http, "policy-probe-other")
            probe = agent_token(http, "policy-probe").token
            wait_until("the policy in force", lambda: refused(label_other_node(
                kube_apiserver, probe, "policy-probe-other")), timeout=30, every=0.2)
        yield kube_apiserver
    finally:
        kube_apiserver.restart(())


def as_agent(server: ApiServer, token: str) -> httpx.Client:
    client = server.admin()
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def label_other_node(server: ApiServer, token: str, other: str) -> httpx.Response:
    with as_agent(server, token) as http:
        return http.patch(f"/api/v1/nodes/{other}", params={"fieldManager": "topolink", "force": "true"},
                          headers=APPLY, json={"apiVersion": "v1", "kind": "Node", "metadata": {
                              "name": other, "labels": {"gpu.topology/gpu.count": "1"}}})


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> t.Snapshot:
    return discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx-h100"))


def degraded(snap: t.Snapshot) -> t.Snapshot:
    """GPU 0's PCIe link trained to 8 of its 16 lanes: a DeviceTaintRule for it."""
    g = snap.gpus[0]
    pcie = replace(g.pcie or t.PcieLinkState(), current_width=8, max_width=16)
    return replace(snap, gpus=(replace(g, pcie=pcie), *snap.gpus[1:]))


# (id, settings other than the defaults). Each case after the first has a prefix and driver of its own, so the
# first write it gets through proves the policy reads its parameters (they reach admission a moment later).
CASES = [
    ("defaults", {}),
    ("label-prefix", {"labelPrefix": "topo.example.com", "draDriver": "topo.example.com"}),
    ("compat-labels", {"compatLabels": "true"}),
    ("labels-via-nodefeature", {"labelsVia": "nodefeature"}),
    ("labels-via-file", {"labelsVia": "file"}),
    ("no-resource-slices", {"resourceSlices": "false"}),
    ("device-taint-rules", {"deviceTaintRules": "true"}),
    ("node-condition", {"nodeCondition": "true"}),
    ("node-taint", {"nodeCondition": "true", "nodeTaint": "true"}),
    ("node-taint-labels-via-file", {"nodeCondition": "true", "nodeTaint": "true", "labelsVia": "file"}),
]


def settings(i: int, extra: dict[str, str]) -> dict[str, str]:
    own = {"labelPrefix": f"case{i}.topology.example", "draDriver": f"case{i}.topology.example"} if i else {}
    return policy_params(KubePublishConfig()) | own | extra


def agent_config(data: dict[str, str], node: str, pod: tuple[str, str], tmp: Path,
                 taints: str) -> KubePublishConfig:
    """As the DaemonSet runs the agent: each ConfigMap key as its TOPOLINK_* variable, through the flags."""
    env = {f"TOPOLINK_{dest.upper()}": data[key] for dest, key in POLICY_SETTINGS}
    parser = argparse.ArgumentParser()
    add_kube_args(parser, environ=env)
    args = parser.parse_args(["--node-name", node, "--nfd-namespace", NS, "--device-taints", taints,
                              "--features-file", str(tmp / "features")])
    return config_from_args(args, {"POD_NAME": pod[0], "POD_UID": pod[1]})


@pytest.mark.parametrize("taints", ["on", "off"], ids=["device-taints", "no-device-taints"])
@pytest.mark.parametrize("setting", CASES, ids=[c for c, _ in CASES])
def test_every_write_of_the_agent_is_allowed_and_nothing_else(cluster: ApiServer, h100: t.Snapshot, tmp_path: Path,
                                                              setting: tuple[str, dict[str, str]], taints: str) -> None:
    case, extra = setting
    data = settings(CASES.index(setting) * 2 + (taints == "off"), extra)
    node = f"policy-{case}-{taints}"
    with cluster.admin() as http:
        create_node(http, node)
        create_node(http, f"{node}-other")
        identity = agent_token(http, node)
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "topolink-agent", "namespace": NS},
                      "data": data}
        assert apply(http, config_map).status_code == 200
    cfg = agent_config(data, node, (identity.pod, identity.pod_uid), tmp_path, taints)
    api = LightkubeNodeApi.connect(kubeconfig=str(cluster.kubeconfig(identity.token)))
    sinks = sinks_from_config(cfg, api)
    snap = replace(degraded(h100) if cfg.device_taint_rules or cfg.node_taint else h100, node=node)

    def published() -> list[Any]:
        results = [s.publish(snap) for s in sinks]
        return results if all(r.ok for r in results) else []

    first = wait_until("every write allowed", published, timeout=15, every=0.2)
    assert all(r.written >= 1 for r in first), list(zip([s.name for s in sinks], first, strict=True))
    assert all(r.ok and r.written == 0 for r in (s.publish(snap) for s in sinks))
    denied(cluster, identity.token, node, data)


def refused(resp: httpx.Response) -> bool:
    return resp.status_code == 403 and "ValidatingAdmissionPolicy 'topolink-agent-own-node'" in resp.text


def denied(server: ApiServer, token: str, node: str, data: dict[str, str]) -> None:
    """What a stolen token tries, each refused by the policy."""
    prefix, driver = data["labelPrefix"], data["draDriver"]

    def node_apply(name: str, **meta: Any) -> httpx.Response:
        return http.patch(f"/api/v1/nodes/{name}", params={"fieldManager": "topolink", "force": "true"},
                          headers=APPLY, json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, **meta}})

    def new_slice(on: str, drv: str, **meta: Any) -> httpx.Response:
        return http.post(SLICES, json={"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                       "metadata": {"name": f"stolen-{on}-{time.monotonic_ns()}", **meta},
                                       "spec": {"driver": drv, "nodeName": on, "devices": [],
                                                "pool": {"name": on, "generation": 1, "resourceSliceCount": 1}}})

    def node_json_patch(name: str, patch: list[dict[str, Any]], status: bool = False) -> httpx.Response:
        return http.patch(f"/api/v1/nodes/{name}" + ("/status" if status else ""), json=patch,
                          headers={"Content-Type": "application/json-patch+json"})

    condition = {"type": "GPUTopologyDegraded", "status": "True", "reason": "Stolen", "message": "x"}
    with as_agent(server, token) as http:
        attempts = {
            "its Node NotReady": node_json_patch(node, [{"op": "add", "path": "/status/conditions", "value": [{
                "type": "Ready", "status": "False", "reason": "Stolen", "message": "x"}]}], status=True),
            "another node's condition": node_json_patch(f"{node}-other", [
                {"op": "add", "path": "/status/conditions", "value": [condition]}], status=True),
            "its Node's capacity": node_json_patch(node, [
                {"op": "add", "path": "/status/capacity", "value": {"example.com/gpu": "8"}}], status=True),
            "a NoExecute taint": node_json_patch(node, [{"op": "add", "path": "/spec/taints", "value": [
                {"key": f"{prefix}/degraded", "value": "x", "effect": "NoExecute"}]}]),
            "another taint": node_json_patch(node, [{"op": "add", "path": "/spec/taints", "value": [
                {"key": "example.com/stolen", "effect": "NoSchedule"}]}]),
            "its Node unschedulable": node_json_patch(node, [{"op": "add", "path": "/spec/unschedulable",
                                                              "value": True}]),
            "another node's taint": node_json_patch(f"{node}-other", [{"op": "add", "path": "/spec/taints", "value": [
                {"key": f"{prefix}/degraded", "value": "x", "effect": "NoSchedule"}]}]),
            "label outside the prefix": node_apply(node, labels={"node-role.kubernetes.io/control-plane": ""}),
            "another node's label": node_apply(f"{node}-other", labels={f"{prefix}/gpu.count": "1"}),
            "a finalizer on its Node": node_apply(node, finalizers=["example.com/block"]),
            "an owner of its Node": node_apply(node, ownerReferences=[
                {"apiVersion": "v1", "kind": "Namespace", "name": NS, "uid": "0d5fc7b8-1111-4f3e-9d3c-3b1b6f0f3f3f"}]),
            "an annotation on its Node": node_apply(node, annotations={"example.com/x": "y"}),
            "a slice for another node": new_slice(f"{node}-other", driver),
            "a slice of another driver": new_slice(node, "gpu.nvidia.com"),
            "a slice with a finalizer": new_slice(node, driver, finalizers=["example.com/block"]),
            "a NodeFeature with a foreign label": http.post(
                f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures", json={
                    "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
                    "metadata": {"name": f"stolen-{node}", "labels": {"nfd.node.kubernetes.io/node-name": node}},
                    "spec": {"labels": {"nvidia.com/gpu.present": "false"}}}),
        }
    allowed = {what: f"{r.status_code} {r.text[:200]}" for what, r in attempts.items() if not refused(r)}
    assert allowed == {}
