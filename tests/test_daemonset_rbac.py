"""The other half of "RBAC is exactly what the code calls": every request the real client (lightkube over
HTTP, kmock as the API server) sends for each use is allowed by ``exporter.kube.PERMISSIONS[use]``, and
every permission there is used. ``tests/test_daemonset.py`` checks the shipped manifests against the same
table."""

from __future__ import annotations

import asyncio
import copy
import random
import threading
import time
from collections.abc import Callable
from typing import Any

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
from tests.kmock_support import NODE, RULES, SLICES, a100_node, poke_watchers, start_objects

pytestmark = pytest.mark.asyncio

Calls = set[tuple[str, str, str]]


def snap(width: int = 16) -> t.Snapshot:
    return a100_node(gpu1_width=width)


@pytest.fixture
def api(kmock: Any) -> LightkubeApi:
    start_objects(kmock)
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
    deadline = time.monotonic() + 10
    while not any(verb == "watch" for _, _, verb in calls(kmock, start)):  # listed, then the watch opened
        assert time.monotonic() < deadline, "the watch did not open within 10 s"
        await asyncio.sleep(0.02)
    seen = calls(kmock, start)
    stop.set()
    await poke_watchers(kmock)
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
    # the node condition's and taint's removal (nodes/status) needs the Node status client: the API server tier
    # checks it (tests/test_apiserver_node_condition.py); the claim objects' and the fleet controller's objects'
    # removal (none here, their CRDs not served) runs with exactly the shipped prune RBAC on the real server
    # (tests/test_apiserver_uninstall.py, tests/test_apiserver_prune_controller.py)
    claims = {(p.group, p.resource, verb) for p in PERMISSIONS["prune"] for verb in ("list", "delete")
              if p.resource in ("deviceclasses", "resourceclaimtemplates", "topologies", "resourceflavors",
                                "hypernodes", "configmaps")}
    assert seen <= allowed("prune")
    assert seen >= allowed("prune") - {("", "nodes", "get"), ("", "nodes/status", "patch")} - claims
    seen = await exercise(kmock, lambda: prune(cfg, NODE, api))
    assert seen <= allowed("prune")
