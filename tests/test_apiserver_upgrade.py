"""A changed setting rolls the agents: Helm upgrades the chart with ``settings.labelsVia=nodefeature`` (the
pod template carries a checksum of the settings ConfigMap), or kubectl applies the nfd overlay over the default
one (the settings ConfigMap's generated name carries a hash of its data), on an API server with
kube-controller-manager beside it. The DaemonSet controller replaces every agent pod, and each new pod reads the
new setting, resolved as the kubelet resolves its ``configMapKeyRef`` at container start.

Without the checksum (or the hash) the pod template does not change, the controller replaces nothing, and the
running agents keep ``labelsVia=node``, without the permission it needs: this test then fails at "every pod
replaced". As in tests/test_apiserver_rollout.py, the test plays the kubelet's part for readiness and for
confirming a deleted pod gone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import wait_until
from tests.ready_nodes import ReadyNodes
from tests.test_apiserver_rollout import (
    DAEMONSET,
    NS,
    PODS,
    _report_ready,
    add_runtime_class,
    agent_pods,
    node_of,
    overlay,
    remove_agents,
    remove_nodes,
)

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
CHART = str(REPO / "daemonset/chart")
# Nodes of this module's own (the rollout tests' names may still be going): one by NFD's label, one by GFD's.
GPU_NODES = {"up-gpu-nfd": {"feature.node.kubernetes.io/pci-10de.present": "true"},
             "up-gpu-gfd": {"nvidia.com/gpu.present": "true"}}


@pytest.fixture
def http(kube_control_plane: ApiServer) -> Iterator[httpx.Client]:
    with kube_control_plane.admin() as client:
        yield client


def _setting(http: httpx.Client, pod: dict[str, Any], variable: str) -> str:
    """The value the kubelet hands the agent container as ``variable``: its ConfigMap key, read now."""
    (agent,) = [c for c in pod["spec"]["containers"] if c["name"] == "agent"]
    (ref,) = [e["valueFrom"]["configMapKeyRef"] for e in agent["env"] if e["name"] == variable]
    config = http.get(f"/api/v1/namespaces/{NS}/configmaps/{ref['name']}").raise_for_status().json()
    return str(config["data"][ref["key"]])


def _roll(http: httpx.Client, old: set[str]) -> list[dict[str, Any]]:
    """Play the kubelet until the controller has replaced every old pod: confirm deleted pods gone, report new
    ones Ready (``maxUnavailable`` holds the next replacement until then). The new pods."""

    def replaced() -> list[dict[str, Any]] | None:
        pods = agent_pods(http)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                http.delete(f"{PODS}/{pod['metadata']['name']}", params={"gracePeriodSeconds": "0"})
            elif pod["metadata"]["name"] not in old and pod["spec"].get("nodeName"):
                _report_ready(http, pod)
        new = [p for p in pods if p["metadata"]["name"] not in old and not p["metadata"].get("deletionTimestamp")]
        left = [p for p in pods if p["metadata"]["name"] in old]
        return new if len(new) == len(GPU_NODES) and not left else None

    return list(wait_until("every pod replaced", replaced, timeout=120))


@pytest.mark.parametrize("tool", ["helm", "kustomize"])
def test_a_changed_setting_rolls_the_agents(tool: str, http: httpx.Client, kube_control_plane: ApiServer) -> None:
    nodes = ReadyNodes(http)
    add_runtime_class(http)
    for name, labels in GPU_NODES.items():
        nodes.add(name, labels)
    helm: Any = None
    if tool == "helm":
        helm = pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is not installed: scripts/test.sh installs it")
        config = helm.Configuration(namespace=NS, kubeconfig=str(kube_control_plane.kubeconfig()))
        asyncio.run(helm.Install(config).run("topolink", CHART, create_namespace=True, wait=False,
                                             values={"pruneOnUninstall": False}))  # its Job needs a kubelet
    else:
        overlay(kube_control_plane, "apply", "default")
    try:
        first = wait_until("a pod per GPU node", lambda: (p := agent_pods(http)) and len(p) == len(GPU_NODES) and
                           all(x["spec"].get("nodeName") for x in p) and p, timeout=90)
        for pod in first:
            _report_ready(http, pod)
            assert _setting(http, pod, "TOPOLINK_LABELS_VIA") == "node"
        wait_until("both available", lambda: http.get(DAEMONSET).json().get("status", {}).get("numberAvailable")
                   == len(GPU_NODES), timeout=60)
        if helm is not None:  # what docs/operator.md says: helm upgrade --reuse-values --set settings.labelsVia=...
            values = asyncio.run(helm.GetValues(config).run("topolink")) or {}
            asyncio.run(helm.Upgrade(config).run("topolink", CHART, values={**values, "settings": {
                **values.get("settings", {}), "labelsVia": "nodefeature"}}, wait=False))
        else:
            overlay(kube_control_plane, "apply", "nfd")
        new = _roll(http, {p["metadata"]["name"] for p in first})
        assert sorted(node_of(p) for p in new) == sorted(GPU_NODES)  # bound or not yet: the controller's choice
        assert {_setting(http, p, "TOPOLINK_LABELS_VIA") for p in new} == {"nodefeature"}
    finally:
        remove_agents(http)
        if helm is not None:
            asyncio.run(helm.Uninstall(config).run("topolink", wait=True))
        else:
            overlay(kube_control_plane, "delete", "nfd")
            overlay(kube_control_plane, "delete", "default")
        # The admission plugin drops the policy binding from its cache a moment after the delete: until then a
        # Node write (a delete too) finds a binding without its parameters and is refused.
        probe = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "upgrade-probe"}}
        wait_until("the policy binding gone from admission", lambda: http.post(
            "/api/v1/nodes", params={"dryRun": "All"}, json=probe).status_code == 201, timeout=60)
        remove_nodes(http, nodes, list(GPU_NODES))
        wait_until("the nodes gone", lambda: all(http.get(f"/api/v1/nodes/{n}").status_code == 404
                                                 for n in GPU_NODES), timeout=60)
