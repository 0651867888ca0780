"""``topolink prune --all-nodes`` removes the fleet controller's objects, and only its, on the real API server, run
with the prune overlay's own ServiceAccount and RBAC (as its Job and the chart's uninstall hook run it): every kind
the controller keeps (what it wants for the saved GB200-racks fleet, written as it writes them: its label, its field
manager), the Slurm ConfigMap in its namespace included; an object with its label that another manager wrote, and
one its field manager wrote without its label, stay. Then nothing with its label and its fields is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.kube._api._api import Kind
from exporter.kube._client._watch_stream import path_of
from exporter.kube._controller._sync import ours
from exporter.kube._fleet._claims_read import claim_classes
from exporter.kube._fleet._wanted import KINDS, Parts, kind_of, wanted
from tests.apiserver import ApiServer
from tests.apiserver_agent import agent_token
from tests.chart_support import kustomize
from tests.test_apiserver_controller import _install_crds

pytestmark = [pytest.mark.apiserver]
REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MANAGER, LABEL = "topolink-controller", "app.kubernetes.io/managed-by"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _apply(http: httpx.Client, kind: Kind, obj: dict[str, Any], manager: str) -> None:
    path = f"{path_of(kind, obj['metadata'].get('namespace'))}/{obj['metadata']['name']}"
    resp = http.patch(path, params={"fieldManager": manager, "force": "true"}, json=obj, headers=APPLY)
    assert resp.status_code in (200, 201), resp.text


def _controllers(http: httpx.Client, kind: Kind) -> set[str]:
    """Names (namespace/name) of the objects of ``kind`` with the controller's label and fields; the Slurm ConfigMap
    in the namespace prune is given (another test's controller on the shared server keeps one in its own)."""
    where = path_of(kind, "topolink" if kind == KINDS["ConfigMap"] else None)
    items = http.get(where, params={"labelSelector": f"{LABEL}={MANAGER}"}).json()["items"]
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in items
            if any(f.get("manager") == MANAGER for f in o["metadata"].get("managedFields", []))}


def _wanted() -> list[dict[str, Any]]:
    """What the controller wants for the saved fleet (its label added, as it writes them)."""
    items = json.loads(FLEET.read_text())["items"]
    nodes = {o["metadata"]["name"]: o["metadata"]["labels"] for o in items if o["kind"] == "Node"}
    members: dict[str, list[str]] = {}
    for name, labels in nodes.items():
        if cls := labels.get("gpu.topology/claim-class"):
            members.setdefault(cls, []).append(name)
    slices = [o for o in items if o["kind"] == "ResourceSlice"]
    read = claim_classes(members, lambda n: [s for s in slices if s["spec"]["nodeName"] == n], "gpu.topology")
    return [ours(o) for o in wanted(nodes, read.classes, Parts(namespace="topolink")).objects.values()]


def _prune_account(http: httpx.Client, server: ApiServer) -> Path:
    paths = {"Namespace": "/api/v1/namespaces", "ServiceAccount": "/api/v1/namespaces/topolink/serviceaccounts",
             "ClusterRole": f"{RBAC}/clusterroles", "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
             "Role": f"{RBAC}/namespaces/topolink/roles", "RoleBinding": f"{RBAC}/namespaces/topolink/rolebindings"}
    for obj in kustomize("prune"):
        if obj["kind"] in paths:
            resp = http.patch(f"{paths[obj['kind']]}/{obj['metadata']['name']}", json=obj, headers=APPLY,
                              params={"fieldManager": "tests", "force": "true"})
            assert resp.status_code in (200, 201), resp.text
    return server.kubeconfig(agent_token(http, "prune-controller-node", account="topolink-prune").token)


def test_prune_all_nodes_removes_the_controllers_objects_and_only_its(kube_apiserver: ApiServer) -> None:
    tag = "prc" + uuid.uuid4().hex[:5]
    hypernodes, classes = KINDS["HyperNode"], KINDS["DeviceClass"]
    with kube_apiserver.admin() as http:
        _install_crds(http)
        kubeconfig = _prune_account(http, kube_apiserver)
        made = _wanted()
        assert {kind_of(o) for o in made} == set(KINDS.values())  # every kind it keeps
        for obj in made:
            _apply(http, kind_of(obj), obj, MANAGER)
        labelled = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                    "metadata": {"name": f"{tag}-labelled", "labels": {LABEL: MANAGER}},
                    "spec": {"tier": 9, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "x"}}}]}}
        _apply(http, hypernodes, labelled, "someone-else")  # its label, another's fields
        unlabelled = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                      "metadata": {"name": f"{tag}-unlabelled", "labels": {LABEL: "someone"}},
                      "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
        _apply(http, classes, unlabelled, MANAGER)  # its fields, another's label
        before = {kind: _controllers(http, kind) for kind in KINDS.values()}
        assert all(before.values()) and "topolink/topolink-slurm-topology" in before[KINDS["ConfigMap"]]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG", "POD_"))}
        run = subprocess.run([sys.executable, "-m", "agent.cli", "prune", "--all-nodes", "--kubeconfig",
                              str(kubeconfig)], capture_output=True, text=True, timeout=120, check=False,
                             env={**env, "PYTHONPATH": str(REPO)})
        try:
            assert run.returncode == 0, run.stdout + run.stderr
            for kind, names in before.items():
                what = f"the fleet controller's {kind.kind}(s)" + (f" ({kind.group})" if kind.kind == "Topology"
                                                                    else "")
                assert f"{len(names)} {what} removed" in run.stdout, run.stdout
                assert _controllers(http, kind) == set(), kind  # the docs' check: nothing of its is left
            assert http.get(f"{path_of(hypernodes)}/{tag}-labelled").status_code == 200
            assert http.get(f"{path_of(classes)}/{tag}-unlabelled").status_code == 200
        finally:
            http.delete(f"{path_of(hypernodes)}/{tag}-labelled")
            http.delete(f"{path_of(classes)}/{tag}-unlabelled")
