"""The agent's DaemonSet rolled out by the real controllers: kubectl applies the default overlay, or Helm
installs the chart, on an API server with kube-scheduler and kube-controller-manager beside it, and the
DaemonSet controller makes the agent's pods on exactly the nodes its affinity selects (NFD's or GFD's GPU
labels), none elsewhere.

There is no kubelet: no container runs and no pod becomes Ready by itself. The test plays the kubelet's part
for readiness only (it reports the pods Ready), so the rolling update shows what the controller decides:
with two nodes and ``maxUnavailable: 10%`` (one pod), it replaces one old pod, then waits until the new one
is Ready before it deletes the other. The test also confirms a deleted pod gone (a kubelet's other part), or
it would stay Terminating and no new pod would take its node."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import wait_until
from tests.ready_nodes import ReadyNodes

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
KUBECTL = Path(sys.executable).parent / "kubectl"
NS = "topolink"
PODS = f"/api/v1/namespaces/{NS}/pods"
DAEMONSET = f"/apis/apps/v1/namespaces/{NS}/daemonsets/topolink"
SELECTOR = "app.kubernetes.io/name=topolink,app.kubernetes.io/component=node-agent"
GPU_NODES = {"ro-gpu-nfd": {"feature.node.kubernetes.io/pci-10de.present": "true"},
             "ro-gpu-gfd": {"nvidia.com/gpu.present": "true"}}
OTHER_NODES = {"ro-cpu": {}, "ro-amd": {"feature.node.kubernetes.io/pci-1002.present": "true"},
               "ro-gpu-false": {"nvidia.com/gpu.present": "false"}}


@pytest.fixture
def http(kube_control_plane: ApiServer) -> Iterator[httpx.Client]:
    with kube_control_plane.admin() as client:
        yield client


@pytest.fixture(params=["kustomize", "helm"])
def installed(request: pytest.FixtureRequest, http: httpx.Client,
              kube_control_plane: ApiServer) -> Iterator[ReadyNodes]:
    """The default overlay applied by kubectl, or the chart installed by Helm (helm-sdkpy), on three nodes
    without a GPU label and two with one."""
    nodes = ReadyNodes(http)
    add_runtime_class(http)
    for name, labels in {**GPU_NODES, **OTHER_NODES}.items():
        nodes.add(name, labels)
    if request.param == "helm":
        helm = pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is not installed: scripts/test.sh installs it")
        config = helm.Configuration(namespace=NS, kubeconfig=str(kube_control_plane.kubeconfig()))
        asyncio.run(helm.Install(config).run("topolink", str(REPO / "daemonset/chart"), create_namespace=True,
                                             values={"pruneOnUninstall": False},  # its Job needs a kubelet
                                             wait=False))
    else:
        overlay(kube_control_plane, "apply", "default")
    yield nodes
    remove_agents(http)
    if request.param == "helm":
        asyncio.run(helm.Uninstall(config).run("topolink", wait=True))
    overlay(kube_control_plane, "delete", "default")
    remove_nodes(http, nodes, [*GPU_NODES, *OTHER_NODES])


def overlay(server: ApiServer, verb: str, name: str) -> None:
    """``kubectl apply -k`` or ``delete -k`` of one overlay of daemonset/ (a delete waits until its objects are
    gone, the namespace too)."""
    more = ["--ignore-not-found", "--timeout=90s"] if verb == "delete" else []
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(server.kubeconfig()), verb, "-k",
                          str(REPO / "daemonset/overlays" / name), *more], capture_output=True, text=True, timeout=120,
                         check=False)
    assert verb == "delete" or out.returncode == 0, out.stderr


def remove_nodes(http: httpx.Client, nodes: ReadyNodes, names: list[str]) -> None:
    """Stop holding the nodes' Leases, delete them, stop renewing."""
    for name in names:
        nodes.forget(name)
        http.delete(f"/api/v1/nodes/{name}")
    nodes.close()


def add_runtime_class(http: httpx.Client) -> None:
    """The runtime class the DaemonSet names: the GPU Operator (or the NVIDIA container toolkit) makes it."""
    runtime = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
               "handler": "nvidia"}
    assert http.post("/apis/node.k8s.io/v1/runtimeclasses", json=runtime).status_code in (201, 409)


def remove_agents(http: httpx.Client) -> None:
    """The DaemonSet and the fleet controller's Deployment, then every pod of their namespace: no kubelet confirms
    a graceful deletion, so they are deleted with no grace period (again, until none is left: the Deployment's
    ReplicaSet may make one more before the garbage collector takes it), or the namespace could not go."""
    http.delete(DAEMONSET, params={"propagationPolicy": "Background"})
    http.delete(f"/apis/apps/v1/namespaces/{NS}/deployments/topolink-controller",
                params={"propagationPolicy": "Background"})

    def none_left() -> bool:
        http.delete(PODS, params={"gracePeriodSeconds": "0"})
        sets = http.get(f"/apis/apps/v1/namespaces/{NS}/replicasets").json().get("items", [])
        return not sets and not http.get(PODS).json().get("items")
    wait_until("every pod of the namespace gone", none_left, timeout=60, every=0.5)


def agent_pods(http: httpx.Client) -> list[dict[str, Any]]:
    return list(http.get(PODS, params={"labelSelector": SELECTOR}).raise_for_status().json()["items"])


def node_of(pod: dict[str, Any]) -> str:
    """The node the DaemonSet controller made the pod for (its affinity's matchFields, bound or not)."""
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (field,) = [f for term in terms["nodeSelectorTerms"] for f in term.get("matchFields", [])]
    return str(field["values"][0])


def _report_ready(http: httpx.Client, pod: dict[str, Any]) -> None:
    """The kubelet's part: the pod's containers run and pass their readiness probe."""
    status = {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]}}
    http.patch(f"{PODS}/{pod['metadata']['name']}/status", json=status,
               headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()


def test_the_controller_makes_pods_on_the_gpu_nodes_alone(http: httpx.Client, installed: ReadyNodes) -> None:
    pods = wait_until("a pod per GPU node", lambda: (p := agent_pods(http)) and len(p) >= len(GPU_NODES) and p,
                      timeout=90)
    assert sorted(node_of(p) for p in pods) == sorted(GPU_NODES)
    status = wait_until("the DaemonSet's status", lambda: http.get(DAEMONSET).json().get("status", {})
                        .get("desiredNumberScheduled"), timeout=60)
    assert status == len(GPU_NODES)
    bound = wait_until("the pods bound", lambda: all(p["spec"].get("nodeName") for p in agent_pods(http)) and
                       sorted(p["spec"]["nodeName"] for p in agent_pods(http)), timeout=90)
    assert bound == sorted(GPU_NODES)


def test_a_rolling_update_replaces_one_pod_at_a_time(http: httpx.Client, installed: ReadyNodes) -> None:
    old = wait_until("a pod per GPU node", lambda: (p := agent_pods(http)) and len(p) == len(GPU_NODES) and p,
                     timeout=90)
    for pod in old:
        _report_ready(http, pod)
    wait_until("both available", lambda: http.get(DAEMONSET).json().get("status", {}).get("numberAvailable") == 2,
               timeout=60)
    old_names = {p["metadata"]["name"] for p in old}
    patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/image",
              "value": "ghcr.io/topolink/topolink:0.1.1"}]
    http.patch(DAEMONSET, json=patch, headers={"Content-Type": "application/json-patch+json"}).raise_for_status()

    deleted: set[str] = set()

    def new_pods() -> list[dict[str, Any]]:
        """The new pods; and, as a kubelet would, the old pods the controller deleted are confirmed gone."""
        pods = agent_pods(http)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                deleted.add(pod["metadata"]["name"])
                http.delete(f"{PODS}/{pod['metadata']['name']}", params={"gracePeriodSeconds": "0"})
        return [p for p in pods
                if p["metadata"]["name"] not in old_names and not p["metadata"].get("deletionTimestamp")]

    (first,) = wait_until("the first new pod", new_pods, timeout=90)
    # One old pod is gone (or going) for it; the other stays while the new one is not Ready: maxUnavailable.
    status = wait_until("the controller's count", lambda: (s := http.get(DAEMONSET).json()["status"])
                        .get("updatedNumberScheduled") == 1 and s, timeout=60)
    assert status["numberUnavailable"] == 1
    staying = [p for p in agent_pods(http)
               if p["metadata"]["name"] in old_names and not p["metadata"].get("deletionTimestamp")]
    assert [node_of(p) for p in staying] == sorted(set(GPU_NODES) - {node_of(first)})
    assert len(new_pods()) == 1 and len(deleted) == 1
    _report_ready(http, first)
    second = wait_until("the second new pod", lambda: (p := new_pods()) and len(p) == 2 and p, timeout=90)
    assert sorted(node_of(p) for p in second) == sorted(GPU_NODES)


def test_the_garbage_collector_removes_the_pods_of_a_deleted_daemonset(http: httpx.Client,
                                                                       installed: ReadyNodes) -> None:
    """The uninstall's first step (``kubectl delete daemonset``): the pods go by their owner references."""
    pods = wait_until("a pod per GPU node", lambda: (p := agent_pods(http)) and len(p) == len(GPU_NODES) and p,
                      timeout=90)
    assert all(ref["kind"] == "DaemonSet" and ref["name"] == "topolink" and ref.get("controller")
               for p in pods for ref in p["metadata"]["ownerReferences"])
    http.delete(DAEMONSET, params={"propagationPolicy": "Background"}).raise_for_status()

    def gone() -> bool:
        left = agent_pods(http)
        for pod in left:  # the kubelet's part: a deleted pod confirmed gone
            if pod["metadata"].get("deletionTimestamp"):
                http.delete(f"{PODS}/{pod['metadata']['name']}", params={"gracePeriodSeconds": "0"})
        return not left

    wait_until("the pods collected", gone, timeout=90)
