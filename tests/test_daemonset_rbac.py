"""The other half of "RBAC is exactly what the code calls": every request the real client (lightkube over
HTTP, kmock as the API server) sends for each use is allowed by ``exporter.kube.PERMISSIONS[use]``, and
every permission there is used. ``tests/test_daemonset.py`` checks the shipped manifests against the same
table."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import random
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import topology as t
from exporter.kube import (
    PERMISSIONS,
    Backoff,
    DeviceTaintRuleSink,
    KubePublishConfig,
    LabelConfig,
    LightkubeApi,
    NodeFeatureSink,
    NodeLabelSink,
    ResourceSliceSink,
    SliceConfig,
    prune,
)

kmock_lib = pytest.importorskip("kmock")
pytestmark = pytest.mark.asyncio

NODE = "node-a"
NODES = kmock_lib.resource("", "v1", "nodes")
SLICES = kmock_lib.resource("resource.k8s.io", "v1", "resourceslices")
RULES = kmock_lib.resource("resource.k8s.io", "v1", "devicetaintrules")
FEATURES = kmock_lib.resource("nfd.k8s-sigs.io", "v1alpha1", "nodefeatures")
Calls = set[tuple[str, str, str]]


def snap(width: int = 16) -> t.Snapshot:
    from tests.probe_snapshots import four_gpu_box

    box = four_gpu_box()
    gpus = tuple(dataclasses.replace(g, minor=i, uuid=f"GPU-{i}", name="NVIDIA A100") for i, g in enumerate(box.gpus))
    g = gpus[1]
    narrow = dataclasses.replace(g.pcie, current_width=width) if g.pcie else None
    return dataclasses.replace(box, node=NODE, gpus=(gpus[0], dataclasses.replace(g, pcie=narrow), *gpus[2:]))


@pytest.fixture
def api(kmock: Any) -> LightkubeApi:
    owned = {"manager": "topolink", "operation": "Apply", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu.topology/gpu.count": {}}}}}
    kmock.objects[NODES, None, NODE] = {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": NODE, "uid": "uid-a", "labels": {},
                                                     "managedFields": [owned]}}
    for res, kind in ((SLICES, "ResourceSlice"), (RULES, "DeviceTaintRule"), (FEATURES, "NodeFeature")):
        kmock.resources[res] = {"kind": kind, "namespaced": res is FEATURES,
                                "verbs": ["get", "list", "create", "update", "delete", "patch"]}
    return LightkubeApi.connect(server=str(kmock.url).rstrip("/"), backoff=Backoff(sleep=lambda _: None,
                                                                                    rng=random.Random(1)))


def calls(kmock: Any, since: int = 0) -> Calls:
    """(apiGroup, resource, verb) of each resource request; discovery and /version need no RBAC rule."""
    out: Calls = set()
    for r in list(kmock)[since:]:
        if r.resource is None or not r.resource.plural:
            continue
        method = r.method.value.upper()
        if method == "GET":
            verb = "watch" if r.params.get("watch") in ("true", "1") else "get" if r.name else "list"
        elif method == "DELETE":
            verb = "delete" if r.name else "deletecollection"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
        out.add((r.resource.group or "", r.resource.plural, verb))
    return out


def allowed(use: str) -> Calls:
    return {(p.group, p.resource, v) for p in PERMISSIONS[use] for v in p.verbs}


def created(kmock: Any) -> dict[str, Any]:
    """The body of the latest create, as a plain object to store back in another shape."""
    post = [r for r in kmock if r.method.value.upper() == "POST"][-1]
    return copy.deepcopy(dict(post.data))


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def exercise(kmock: Any, *steps: Callable[[], Any]) -> Calls:
    start = len(list(kmock))
    for step in steps:
        result = await run(step)
        assert getattr(result, "ok", True), result
    return calls(kmock, start)


async def test_node_labels(kmock: Any, api: LightkubeApi) -> None:
    sink = NodeLabelSink(api, NODE, LabelConfig())
    assert await exercise(kmock, lambda: sink.publish(snap()), lambda: sink.publish(snap(8))) == allowed(
        "node-labels")


async def test_node_feature(kmock: Any, api: LightkubeApi) -> None:
    sink = NodeFeatureSink(api, NODE, "topolink", LabelConfig())
    assert await exercise(kmock, lambda: sink.publish(snap()), lambda: sink.publish(snap(8))) == allowed(
        "node-feature")


async def test_resource_slices(kmock: Any, api: LightkubeApi) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    seen = await exercise(kmock, lambda: sink.publish(snap()))
    stale = created(kmock)
    stale["metadata"]["name"] += "-stale"  # a slice of our pool the pool no longer counts
    kmock.objects[SLICES, None, stale["metadata"]["name"]] = stale
    seen |= await exercise(kmock, lambda: sink.publish(snap(8)))
    seen |= await watched(kmock, sink)
    assert seen == allowed("resource-slices")


async def watched(kmock: Any, sink: ResourceSliceSink) -> Calls:
    """The requests of the slice watch as it opens (a list, then the watch), its thread stopped after."""
    start, stop = len(list(kmock)), threading.Event()
    task = asyncio.create_task(asyncio.to_thread(sink.watch, stop, lambda why: None))
    await asyncio.sleep(0.3)
    seen = calls(kmock, start)
    stop.set()
    async with httpx.AsyncClient(base_url=str(kmock.url)) as http:  # one event for the blocked thread to read
        await http.post("/apis/resource.k8s.io/v1/resourceslices", json={
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "poke"},
            "spec": {"driver": "other.example.com", "nodeName": NODE,
                     "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}})
    await asyncio.wait_for(task, timeout=10)
    return seen


async def test_device_taint_rules(kmock: Any, api: LightkubeApi) -> None:
    sink = DeviceTaintRuleSink(api, NODE, "gpu.topology", "gpu.nvidia.com")
    seen = await exercise(kmock, lambda: sink.publish(snap(8)))
    edited = created(kmock)
    edited["spec"]["taint"]["value"] = "edited"  # changed behind our back: applied back
    kmock.objects[RULES, None, edited["metadata"]["name"]] = edited
    seen |= await exercise(kmock, lambda: sink.publish(snap(8)), lambda: sink.publish(snap()))
    assert seen == allowed("device-taint-rules")


async def test_prune_whole_cluster(kmock: Any, api: LightkubeApi) -> None:
    cfg = KubePublishConfig(node=NODE, labels_via="nodefeature", device_taint_rules=True, device_taints=False)
    for sink in (NodeLabelSink(api, NODE, LabelConfig()), NodeFeatureSink(api, NODE, "topolink", LabelConfig()),
                 ResourceSliceSink(api, NODE, SliceConfig(), taints=False),
                 DeviceTaintRuleSink(api, NODE, "gpu.topology", "gpu.nvidia.com")):
        assert (await run(sink.publish, snap(8))).ok
    seen = await exercise(kmock, lambda: prune(cfg, None, api))
    assert seen == allowed("prune") - {("", "nodes", "get")}
    seen = await exercise(kmock, lambda: prune(cfg, NODE, api))
    assert seen <= allowed("prune")
