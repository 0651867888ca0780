"""Shared by the tests that run kmock as the API server: its resources, the four-GPU A100 node they publish,
the objects the server starts with, and the event that lets a blocked watch thread see that it should stop."""

from __future__ import annotations

from typing import Any

import httpx
import kmock

import topology as t
from topology import replace

NODE = "node-a"
NODES = kmock.resource("", "v1", "nodes")
SLICES = kmock.resource("resource.k8s.io", "v1", "resourceslices")
RULES = kmock.resource("resource.k8s.io", "v1", "devicetaintrules")
FEATURES = kmock.resource("nfd.k8s-sigs.io", "v1alpha1", "nodefeatures")
OWNED = {"manager": "topolink", "operation": "Apply", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu.topology/gpu.count": {}}}}}


def a100_node(name: str = NODE, *, gpus: int = 4, gpu1_width: int = 16) -> t.Snapshot:
    """tests.probe_snapshots' four-GPU box as NVIDIA A100s with minors and UUIDs: the first ``gpus`` of them,
    GPU1's PCIe link trained to ``gpu1_width`` lanes (16: not degraded)."""
    from tests.probe_snapshots import four_gpu_box

    box = four_gpu_box()
    named = [replace(g, minor=i, uuid=f"GPU-{i}", name="NVIDIA A100") for i, g in enumerate(box.gpus)]
    g1 = named[1]
    if g1.pcie is not None:
        named[1] = replace(g1, pcie=replace(g1.pcie, current_width=gpu1_width))
    return replace(box, node=name, gpus=tuple(named[:gpus]))


def start_objects(server: Any, *, labels: dict[str, str] | None = None, managed: bool = True) -> None:
    """The Node (uid ``uid-a``, labels, one label applied by us when ``managed``) and our kinds, served."""
    meta: dict[str, Any] = {"name": NODE, "uid": "uid-a", "labels": dict(labels or {})}
    if managed:
        meta["managedFields"] = [OWNED]
    server.objects[NODES, None, NODE] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    for res, kind in ((SLICES, "ResourceSlice"), (RULES, "DeviceTaintRule"), (FEATURES, "NodeFeature")):
        server.resources[res] = {"kind": kind, "namespaced": res is FEATURES,
                                 "verbs": ["get", "list", "watch", "create", "update", "delete", "patch"]}


async def poke_watchers(server: Any, node: str = NODE) -> None:
    """Create a ResourceSlice of another driver: one event that a watch thread blocked in its read wakes on
    (to see its stop flag); ours never act on another driver's slice."""
    async with httpx.AsyncClient(base_url=str(server.url)) as http:
        await http.post("/apis/resource.k8s.io/v1/resourceslices", json={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "poke"},
            "spec": {"driver": "other.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}})
