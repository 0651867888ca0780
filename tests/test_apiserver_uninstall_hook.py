"""``helm uninstall`` ends with ``topolink prune --all-nodes``: the chart's post-delete hook (a Job with its own
ServiceAccount and the prune RBAC, made from the prune overlay) runs after the release's objects, the agents'
DaemonSet among them, are gone, and Helm waits for it. On an API server with kube-controller-manager beside it
(the Job controller), the test plays the kubelet for the hook's pod: it runs the pod's own command line and
environment with a token of the pod's ServiceAccount (bound to the pod, as the kubelet requests one), then
reports the container's exit. What the agents had published (a label of our field manager on a Node, a
DeviceClass of ``topolink cluster --apply``) is gone when Helm returns, and so is the hook."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import pod_token, wait_until

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
NS = "topolink"
JOB = f"/apis/batch/v1/namespaces/{NS}/jobs/topolink-prune"
PODS = f"/api/v1/namespaces/{NS}/pods"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
NODE = "hook-gpu-node"
LABEL = "gpu.topology/gpu.count"


@pytest.fixture
def http(kube_control_plane: ApiServer) -> Iterator[httpx.Client]:
    with kube_control_plane.admin() as client:
        yield client


def _publish_as_the_agents_did(http: httpx.Client) -> None:
    http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    label = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {LABEL: "8"}}}
    assert http.patch(f"/api/v1/nodes/{NODE}", params={"fieldManager": "topolink"}, json=label,
                      headers=APPLY).status_code == 200
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": "hook-nvlink-8", "labels": {"app.kubernetes.io/managed-by": "topolink"}},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    assert http.patch(f"{DEVICE_CLASSES}/hook-nvlink-8", params={"fieldManager": "topolink", "force": "true"},
                      json=cls, headers=APPLY).status_code in (200, 201)


def _run_pod(http: httpx.Client, server: ApiServer, pod: dict[str, Any], tmp: Path) -> int:
    """The kubelet's part for the hook's one container: its args and env, the pod's token; the exit reported."""
    (container,) = pod["spec"]["containers"]
    def field(path: str) -> str:  # a fieldRef, as the kubelet resolves it (the Job's POD_NAMESPACE)
        value: Any = pod
        for part in path.split("."):
            value = value[part]
        return str(value)
    # the chart writes the settings as values; the namespace is a reference to the pod's own
    env = {e["name"]: e["value"] if "value" in e else field(e["valueFrom"]["fieldRef"]["fieldPath"])
           for e in container.get("env", [])}
    kubeconfig = server.kubeconfig(pod_token(http, pod), where=tmp / "kubeconfig")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    run = subprocess.run([sys.executable, "-m", "agent.cli", *container["args"], "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, timeout=120, check=False,
                         env={**base, **env, "PYTHONPATH": str(REPO)})
    print(run.stdout, run.stderr)
    phase = "Succeeded" if run.returncode == 0 else "Failed"
    status = {"status": {"phase": phase, "containerStatuses": [{
        "name": container["name"], "image": container["image"], "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": run.returncode, "reason": "Completed" if phase == "Succeeded"
                                 else "Error"}}}]}}
    http.patch(f"{PODS}/{pod['metadata']['name']}/status", json=status,
               headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    return run.returncode


def test_helm_uninstall_prunes_what_the_agents_published(http: httpx.Client, kube_control_plane: ApiServer,
                                                         tmp_path: Path) -> None:
    helm = pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is not installed: scripts/test.sh installs it")
    config = helm.Configuration(namespace=NS, kubeconfig=str(kube_control_plane.kubeconfig()))
    asyncio.run(helm.Install(config).run("topolink", str(REPO / "daemonset/chart"), create_namespace=True,
                                         wait=False))
    _publish_as_the_agents_did(http)
    outcome: list[object] = []

    def uninstall() -> None:
        try:
            outcome.append(asyncio.run(helm.Uninstall(config).run("topolink", wait=True, timeout=180)))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=uninstall)
    thread.start()
    try:
        pod = wait_until("the hook's pod", lambda: next(iter(http.get(PODS, params={
            "labelSelector": "job-name=topolink-prune"}).json()["items"]), None), timeout=120)
        assert http.get("/apis/apps/v1/namespaces/topolink/daemonsets/topolink").status_code == 404  # post-delete
        assert pod["spec"]["serviceAccountName"] == "topolink-prune"
        assert _run_pod(http, kube_control_plane, pod, tmp_path) == 0
    finally:
        thread.join(timeout=200)
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    assert LABEL not in http.get(f"/api/v1/nodes/{NODE}").json()["metadata"].get("labels", {})
    assert http.get(f"{DEVICE_CLASSES}/hook-nvlink-8").status_code == 404
    wait_until("the hook removed once it succeeded", lambda: http.get(JOB).status_code == 404, timeout=60)
    for path in ("/apis/rbac.authorization.k8s.io/v1/clusterroles/topolink-prune",
                 f"/api/v1/namespaces/{NS}/serviceaccounts/topolink-prune"):
        assert http.get(path).status_code == 404, path
    http.delete(PODS, params={"gracePeriodSeconds": "0"})
    # admission drops the deleted policy binding a moment later; until then a Node write is refused
    wait_until("the node deleted", lambda: http.delete(f"/api/v1/nodes/{NODE}").status_code in (200, 404), timeout=60)
