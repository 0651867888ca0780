"""The uninstall leaves nothing of ours, and nothing of anyone else goes with it, on the real API server:
``topolink prune --all-nodes``, run with the prune overlay's own ServiceAccount and RBAC (as its Job and the
chart's uninstall hook run it), removes the DeviceClasses and ResourceClaimTemplates ``topolink cluster --apply``
made (our managed-by label, fields of our field manager), and keeps a DeviceClass another manager applied with
the same label and a template of another's. Then the check docs/operator.md ends its uninstall with finds
nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import agent_token
from tests.chart_support import kustomize

pytestmark = [pytest.mark.apiserver]

REPO = Path(__file__).resolve().parents[1]
RESOURCE = "/apis/resource.k8s.io/v1"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
OURS = {"app.kubernetes.io/managed-by": "topolink"}


def _apply(http: httpx.Client, path: str, obj: dict[str, Any], manager: str) -> None:
    resp = http.patch(f"{path}/{obj['metadata']['name']}", params={"fieldManager": manager, "force": "true"},
                      json=obj, headers=APPLY)
    assert resp.status_code in (200, 201), resp.text


def _device_class(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name, "labels": labels},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}


def _template(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "uninstall-ours", "count": 2}}]}}}}


def _names(http: httpx.Client, path: str) -> set[str]:
    return {o["metadata"]["name"] for o in http.get(path).raise_for_status().json()["items"]}


def _ours(http: httpx.Client, path: str) -> list[str]:
    """The objects at ``path`` with our label and fields of our field manager: what the docs' last step looks for
    (slices: of the driver prune ran for, the default; the shared server holds other tests' drivers' slices)."""
    params = {"labelSelector": "app.kubernetes.io/managed-by=topolink"}
    if path.endswith("/resourceslices"):
        params["fieldSelector"] = "spec.driver=gpu.topology"
    left = http.get(path, params=params).json()["items"]
    return [o["metadata"]["name"] for o in left
            if any(f.get("manager") == "topolink" for f in o["metadata"].get("managedFields", []))]


def _prune_account(http: httpx.Client, server: ApiServer) -> Path:
    """The prune overlay's ServiceAccount, roles and bindings as shipped; a kubeconfig with its token."""
    paths = {"Namespace": "/api/v1/namespaces", "ServiceAccount": "/api/v1/namespaces/topolink/serviceaccounts",
             "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
             "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
             "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/topolink/roles",
             "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/topolink/rolebindings"}
    for obj in kustomize("prune"):
        if obj["kind"] in paths:
            _apply(http, paths[obj["kind"]], obj, "tests")
    return server.kubeconfig(agent_token(http, "uninstall-node", account="topolink-prune").token)


def test_prune_all_nodes_removes_our_claim_objects_and_only_ours(kube_apiserver: ApiServer) -> None:
    with kube_apiserver.admin() as http:
        kubeconfig = _prune_account(http, kube_apiserver)
        _apply(http, f"{RESOURCE}/deviceclasses", _device_class("uninstall-ours", OURS), "topolink")
        _apply(http, f"{RESOURCE}/deviceclasses", _device_class("uninstall-same-label", OURS), "someone-else")
        _apply(http, f"{RESOURCE}/deviceclasses", _device_class("uninstall-theirs", {}), "someone-else")
        templates = f"{RESOURCE}/namespaces/default/resourceclaimtemplates"
        _apply(http, templates, _template("uninstall-ours", OURS), "topolink")
        _apply(http, templates, _template("uninstall-theirs", {}), "someone-else")

        # the shared server may hold claim objects earlier tests' `cluster --apply` made: those are ours too
        ours = {path: len(_ours(http, f"{RESOURCE}/{path}")) for path in ("deviceclasses", "resourceclaimtemplates")}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
        run = subprocess.run([sys.executable, "-m", "agent.cli", "prune", "--all-nodes", "--kubeconfig",
                              str(kubeconfig)], capture_output=True, text=True, timeout=120, check=False,
                             env={**env, "PYTHONPATH": str(REPO)})
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"{ours['deviceclasses']} DeviceClass(s) removed" in run.stdout, run.stdout
        assert f"{ours['resourceclaimtemplates']} ResourceClaimTemplate(s) removed" in run.stdout, run.stdout
        classes = _names(http, f"{RESOURCE}/deviceclasses")
        assert "uninstall-ours" not in classes and {"uninstall-same-label", "uninstall-theirs"} <= classes
        assert _names(http, templates) >= {"uninstall-theirs"} and "uninstall-ours" not in _names(http, templates)
        # the docs' last step: nothing of ours is left (our label, on every kind an uninstall removes)
        for path in (f"{RESOURCE}/deviceclasses", f"{RESOURCE}/resourceclaimtemplates", f"{RESOURCE}/resourceslices"):
            assert _ours(http, path) == [], path
        for name in ("uninstall-same-label", "uninstall-theirs"):
            http.delete(f"{RESOURCE}/deviceclasses/{name}")
        http.delete(f"{templates}/uninstall-theirs")
