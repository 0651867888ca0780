"""The node condition and the opt-in node taint with the real control plane: what Kubernetes does with them.
The agent's sink sets ``GPUTopologyDegraded`` and ``<prefix>/degraded:NoSchedule`` on a Node made Ready without a
kubelet (``tests/ready_nodes.py``); the real kube-scheduler then places no pod without a toleration there, a pod
that tolerates it is bound there, the node-lifecycle controller keeps the Node Ready (a condition of ours is not
``Ready``) and evicts nothing (the taint is not ``NoExecute``); once the links are whole the taint is gone, the
condition says ``False`` and the waiting pod is bound."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import topology as t
from exporter.kube import CONDITION, Conflict, LightkubeNodeApi, NodeConditionSink
from tests.apiserver import ApiServer
from tests.apiserver_agent import create_node, wait_until
from tests.kube_support import discover_profile
from tests.ready_nodes import ReadyNodes
from topology import replace

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
NODE = "cp-gpu-degraded"
KEY = "gpu.topology/degraded"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def http(kube_control_plane: ApiServer) -> Iterator[httpx.Client]:
    with kube_control_plane.admin() as client:
        yield client


def narrowed(snap: t.Snapshot) -> t.Snapshot:
    """GPU 0's PCIe link trained to 8 of its 16 lanes."""
    g = snap.gpus[0]
    pcie = replace(g.pcie or t.PcieLinkState(), current_width=8, max_width=16)
    return replace(snap, gpus=(replace(g, pcie=pcie), *snap.gpus[1:]), node=NODE)


def pod(name: str, tolerate: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": {"kubernetes.io/hostname": NODE},
                            "containers": [{"name": "c", "image": "example.invalid/none"}]}
    if tolerate:
        spec["tolerations"] = [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def node_state(http: httpx.Client) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    node = http.get(f"/api/v1/nodes/{NODE}").json()
    return {c["type"]: c for c in node["status"].get("conditions", [])}, node["spec"].get("taints") or []


def test_the_scheduler_keeps_untolerating_pods_off_a_degraded_node_and_the_node_stays_ready(
        kube_control_plane: ApiServer, http: httpx.Client, tmp_path: Path) -> None:
    ready = ReadyNodes(http)
    try:
        ready.add(NODE, {"kubernetes.io/hostname": NODE})
        whole = replace(discover_profile("hgx-h100", tmp_path / "hgx"), node=NODE)
        sink = NodeConditionSink(LightkubeNodeApi.connect(kubeconfig=str(kube_control_plane.kubeconfig())), NODE,
                                 "gpu.topology", taint=True)
        assert sink.publish(narrowed(whole)).written == 2
        assert sink.publish(narrowed(whole)).written == 0  # steady: one read, no write
        conditions, taints = node_state(http)
        assert conditions[CONDITION]["status"] == "True" and conditions[CONDITION]["reason"] == "PCIeWidth"
        assert [(x["key"], x["effect"]) for x in taints] == [(KEY, "NoSchedule")]

        for name, tolerate in (("cp-plain", False), ("cp-tolerant", True)):
            assert http.post(PODS, json=pod(name, tolerate)).status_code == 201
        assert wait_until("the tolerating pod bound", lambda: http.get(f"{PODS}/cp-tolerant").json()["spec"]
                          .get("nodeName"), timeout=60) == NODE
        unschedulable = wait_until("the plain pod unschedulable", lambda: next(
            (c for c in http.get(f"{PODS}/cp-plain").json()["status"].get("conditions", [])
             if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None), timeout=60)
        assert "had untolerated taint" in unschedulable["message"]  # ours: the only taint the Node has
        # the node-lifecycle controller leaves the Node Ready (its Lease is fresh; our condition is not one it
        # reads) and adds no taint of its own; ours is not NoExecute, so the bound pod stays
        conditions, taints = node_state(http)
        assert conditions["Ready"]["status"] == "True" and [x["key"] for x in taints] == [KEY]
        assert http.get(f"{PODS}/cp-tolerant").json()["spec"]["nodeName"] == NODE

        assert sink.publish(whole).written == 2
        conditions, taints = node_state(http)
        assert conditions[CONDITION]["status"] == "False" and taints == []
        assert wait_until("the plain pod bound once the links are whole", lambda: http.get(f"{PODS}/cp-plain")
                          .json()["spec"].get("nodeName"), timeout=60) == NODE
        assert node_state(http)[0]["Ready"]["status"] == "True"
    finally:
        ready.close()
        for name in ("cp-plain", "cp-tolerant"):
            http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})


def test_prune_removes_the_condition_and_the_taint_and_nothing_else(kube_apiserver: ApiServer, tmp_path: Path) -> None:
    """One node's prune (the server is shared: every node's would reach other tests' nodes)."""
    from exporter.kube import KubePublishConfig, prune
    from tests.apiserver_agent import create_node

    node = "prune-marks"
    foreign = {"key": "example.com/maintenance", "value": "x", "effect": "NoSchedule"}
    with kube_apiserver.admin() as http:
        create_node(http, node, {"gpu.topology/gpu.count": "8"})
        assert http.patch(f"/api/v1/nodes/{node}", json=[{"op": "add", "path": "/spec/taints", "value": [foreign]}],
                          headers={"Content-Type": "application/json-patch+json"}).status_code == 200
        api = LightkubeNodeApi.connect(kubeconfig=str(kube_apiserver.kubeconfig()))
        whole = replace(discover_profile("hgx-h100", tmp_path / "hgx"), node=node)
        sink = NodeConditionSink(api, node, "gpu.topology", taint=True)
        assert sink.publish(replace(narrowed(whole), node=node)).written == 2
        done = prune(KubePublishConfig(node=node, resource_slices=False), node, api)
        assert done.node_marks == 1
        got = http.get(f"/api/v1/nodes/{node}").json()
        assert got["spec"]["taints"] == [foreign]
        assert CONDITION not in {c["type"] for c in got["status"].get("conditions", [])}
        assert prune(KubePublishConfig(node=node, resource_slices=False), node, api).node_marks == 0


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_the_condition_is_written_again_on_its_heartbeat_with_nothing_changed(kube_apiserver: ApiServer,
                                                                             tmp_path: Path) -> None:
    """As node-problem-detector: lastHeartbeatTime moves at least every heartbeat with nothing changed (a stale
    one says the agent is gone), lastTransitionTime stays."""
    node, clock = "heartbeat", Clock()
    with kube_apiserver.admin() as http:
        create_node(http, node)
        api = LightkubeNodeApi.connect(kubeconfig=str(kube_apiserver.kubeconfig()))
        sink = NodeConditionSink(api, node, "gpu.topology", heartbeat_s=300, clock=clock)
        whole = replace(discover_profile("hgx-h100", tmp_path / "hgx"), node=node)

        def ours() -> dict[str, Any]:
            conditions = http.get(f"/api/v1/nodes/{node}").json()["status"]["conditions"]
            return next(c for c in conditions if c["type"] == CONDITION)
        assert sink.publish(whole).written == 1
        first = ours()
        clock.now += timedelta(seconds=299)
        assert sink.publish(whole).written == 0  # steady, within the heartbeat: one read, no write
        clock.now += timedelta(seconds=1)
        assert sink.publish(whole).written == 1  # the heartbeat, nothing changed
        beat = ours()
        assert beat["lastHeartbeatTime"] == "2026-01-01T00:05:00Z" != first["lastHeartbeatTime"]
        assert beat["lastTransitionTime"] == first["lastTransitionTime"] and beat["status"] == "False"


def test_a_node_changed_between_the_read_and_the_taint_is_read_again(kube_apiserver: ApiServer,
                                                                    tmp_path: Path) -> None:
    """The taint patch's ``test`` of the resourceVersion read fails with 422 when someone changed the Node in
    between (kubelet's status, another controller's label): the conflict it is, read again and retried, and the
    condition is written in the same pass."""
    node = "taint-race"
    with kube_apiserver.admin() as http:
        create_node(http, node)

        class Racing(LightkubeNodeApi):
            """Someone labels the Node right after each of the first two reads."""
            reads = 0

            def get_node_object(self, name: str) -> dict[str, Any]:
                got = super().get_node_object(name)
                Racing.reads += 1
                if Racing.reads <= 2:
                    resp = http.patch(f"/api/v1/nodes/{name}", json={"metadata": {"labels": {"x": str(self.reads)}}},
                                      headers={"Content-Type": "application/merge-patch+json"})
                    assert resp.status_code == 200
                return got
        api = Racing.connect(kubeconfig=str(kube_apiserver.kubeconfig()))
        assert isinstance(api, Racing)
        stale = api.get_node_object(node)["metadata"]["resourceVersion"]  # the first race
        with pytest.raises(Conflict):
            api.replace_node_taints(node, [], stale)  # the server's 422, mapped
        sink = NodeConditionSink(api, node, "gpu.topology", taint=True)
        whole = replace(discover_profile("hgx-h100", tmp_path / "hgx"), node=node)
        result = sink.publish(narrowed(whole))
        assert result.ok and result.written == 2 and Racing.reads == 3  # read, raced, read again
        got = http.get(f"/api/v1/nodes/{node}").json()
        assert [t["key"] for t in got["spec"]["taints"]].count(KEY) == 1  # set once, beside admission's own
        assert CONDITION in {c["type"] for c in got["status"]["conditions"]}
