"""A DaemonSet rolled out before its RBAC (a common Helm or Argo ordering), against the real kube-apiserver: the
slice watch is refused, says the fix and backs off, and once the ClusterRole and its binding arrive it watches
again without a restart (the next event wakes the agent)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from exporter.kube import Backoff, LightkubeApi, ResourceSliceSink, SliceConfig, policy_rules
from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, agent_token, create_node, node_slices, wait_until
from tests.kmock_support import a100_node

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
NODE = "rbac-late"
ACCOUNT = "rbac-late"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def grant(http: httpx.Client, name: str) -> None:
    """The resource-slices sink's ClusterRole, bound to the agent's ServiceAccount."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": policy_rules(["resource-slices"])}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "topolink"}]}
    assert http.post(f"{RBAC}/clusterroles", json=role).status_code == 201
    assert http.post(f"{RBAC}/clusterrolebindings", json=binding).status_code == 201


def test_a_watch_refused_before_its_rbac_watches_once_granted(kube_apiserver: ApiServer, tmp_path: Path) -> None:
    with kube_apiserver.admin() as http:
        create_node(http, NODE)
        identity = agent_token(http, NODE, account=ACCOUNT)
        api = LightkubeApi.connect(kubeconfig=str(kube_apiserver.kubeconfig(identity.token, tmp_path / "kc")))
        sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
        stop, woken = threading.Event(), list[str]()
        watch = threading.Thread(target=sink.watch, args=(stop, woken.append, Backoff(cap=0.2)), daemon=True)
        watch.start()
        try:
            wait_until("the watch refused, and tried again", lambda: sink.watch_restarts()["refused"] >= 2)
            assert "403" in sink.watch_error()
            assert "grant the agent's ServiceAccount list and watch on resourceslices" in sink.watch_error()
            refused = sink.publish(a100_node(NODE))
            assert not refused.ok and "Forbidden" in refused.detail  # the pass is refused too, and says so
            assert watch.is_alive()  # never given up

            grant(http, "topolink-rbac-late")
            wait_until("the watch back, no restart", lambda: sink.watch_error() == "" and sink.cache.synced())
            assert sink.publish(a100_node(NODE)).written == 1
            (name,) = [s["metadata"]["name"] for s in node_slices(http, NODE)]
            assert http.delete(f"{SLICES}/{name}").status_code == 200  # kubelet at its start
            deleted, ours = f"resourceslice {name} deleted", f"resourceslice {name} added"
            wait_until("the agent woken by the watch", lambda: deleted in woken)
            # the event of our own create, when it came before the create's reply, woke it too (a sync for nothing)
            assert woken in ([deleted], [ours, deleted]), woken
        finally:
            stop.set()
            sink.wake_watch()
            sink.publish(a100_node(NODE))  # an event for a watch reading its stream: it returns
            watch.join(20)
            for kind in ("clusterrolebindings", "clusterroles"):
                http.delete(f"{RBAC}/{kind}/topolink-rbac-late")
        assert not watch.is_alive()
