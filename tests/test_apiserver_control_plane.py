"""The control-plane tier itself: the real scheduler binds pods to Nodes made Ready without a kubelet, and the
real garbage collector removes what a deleted Node owned."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, wait_until
from tests.ready_nodes import ReadyNodes

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]


@pytest.fixture
def http(kube_control_plane: ApiServer) -> Iterator[httpx.Client]:
    with kube_control_plane.admin() as client:
        yield client


@pytest.fixture
def nodes(http: httpx.Client) -> Iterator[ReadyNodes]:
    ready = ReadyNodes(http)
    yield ready
    ready.close()


def _pod(name: str, selector: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "example.invalid/none"}]}}


def test_the_scheduler_binds_a_pod_to_the_one_ready_node_it_selects(http: httpx.Client, nodes: ReadyNodes) -> None:
    nodes.add("cp-node-a", {"pool": "a"})
    nodes.add("cp-node-b", {"pool": "b"})
    resp = http.post("/api/v1/namespaces/default/pods", json=_pod("cp-pod", {"pool": "b"}))
    assert resp.status_code == 201, resp.text
    bound = wait_until("the pod bound", lambda: http.get("/api/v1/namespaces/default/pods/cp-pod")
                       .json()["spec"].get("nodeName"), timeout=60)
    assert bound == "cp-node-b"


def test_the_garbage_collector_deletes_a_slice_its_node_owned(http: httpx.Client, nodes: ReadyNodes) -> None:
    node = nodes.add("cp-node-gc", wait=False)
    owner = {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"],
             "controller": True}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
              "metadata": {"name": "cp-node-gc-slice", "ownerReferences": [owner]},
              "spec": {"driver": "gpu.topology", "nodeName": "cp-node-gc",
                       "pool": {"name": "cp-node-gc", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "gpu0"}]}}
    assert http.post(SLICES, json=slice_).status_code == 201
    nodes.forget("cp-node-gc")
    assert http.delete("/api/v1/nodes/cp-node-gc").status_code == 200
    wait_until("the slice collected", lambda: http.get(f"{SLICES}/cp-node-gc-slice").status_code == 404, timeout=60)
