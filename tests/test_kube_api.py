"""Request-level behaviour against kmock as the API server: lightkube over HTTP, our sinks on top."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import kmock as kmock_lib
import pytest

import topology as t
from exporter.kube import (
    Backoff,
    DeviceTaintRuleSink,
    KubePublishConfig,
    LabelConfig,
    LightkubeApi,
    NodeFeatureSink,
    NodeLabelSink,
    ResourceSliceSink,
    SliceConfig,
    Unavailable,
    prune,
    sinks_from_config,
)
from tests.kmock_support import NODE, NODES, SLICES, a100_node, start_objects
from tests.kube_support import validate

pytestmark = pytest.mark.asyncio


def _snap(name: str = NODE) -> t.Snapshot:
    return a100_node(name)


def _degraded(snap: t.Snapshot) -> t.Snapshot:
    return a100_node(snap.node, gpu1_width=8)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def api(kmock: Any, sleeps: list[float]) -> LightkubeApi:
    start_objects(kmock, labels={"other/x": "1"})
    backoff = Backoff(sleep=sleeps.append, rng=random.Random(1))
    return LightkubeApi.connect(server=str(kmock.url).rstrip("/"), backoff=backoff)


def writes(kmock: Any) -> list[Any]:
    return [r for r in kmock if r.method.value.lower() in ("post", "put", "patch", "delete")]


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def test_labels_apply_once_then_zero_writes(kmock: Any, api: LightkubeApi) -> None:
    sink = NodeLabelSink(api, NODE, LabelConfig())
    first = await run(sink.publish, _snap())
    assert first.written == 1 and first.ok
    (patch,) = writes(kmock)
    assert patch.params == {"fieldManager": "topolink", "force": "true"}
    assert patch.headers["Content-Type"] == "application/apply-patch+yaml"
    body = patch.data
    assert set(body["metadata"]["labels"]) <= {k for k in body["metadata"]["labels"] if k.startswith("gpu.topology/")}
    validate(body, "1.37")
    before = len(list(kmock))
    second = await run(sink.publish, _snap())
    assert second.written == 0 and second.unchanged > 0
    assert len(list(kmock)) - before == 1  # one read, no write
    assert kmock.objects[NODES, None, NODE]["metadata"]["labels"]["other/x"] == "1"


async def test_slices_created_then_steady_then_recreated_after_a_wipe(kmock: Any, api: LightkubeApi) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=True)
    assert (await run(sink.publish, _snap())).written == 1
    (created,) = [r for r in writes(kmock) if r.method.value.lower() == "post"]
    validate(created.data, "1.37")
    assert created.data["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "uid-a", "controller": True}
    assert created.data["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    n = len(writes(kmock))
    reads_before = len(list(kmock))
    assert (await run(sink.publish, _snap())).written == 0
    assert len(writes(kmock)) == n and len(list(kmock)) - reads_before == 1
    name = created.data["metadata"]["name"]
    del kmock.objects[SLICES, None, name]  # kubelet wipes node-local slices when it starts
    assert (await run(sink.publish, _snap())).written == 1
    assert [r.method.value.lower() for r in writes(kmock)][n:] == ["post"]


async def test_a_change_bumps_the_pool_generation(kmock: Any, api: LightkubeApi) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    await run(sink.publish, _snap())
    assert (await run(sink.publish, _degraded(_snap()))).written == 1
    put = [r for r in writes(kmock) if r.method.value.lower() == "patch"][-1]
    assert put.data["spec"]["pool"]["generation"] == 2
    validate(put.data, "1.34")


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_backoff_then_success(kmock: Any, api: LightkubeApi, sleeps: list[float], status: int) -> None:
    kmock["patch", NODES][:1] << status << kmock_lib.headers({"Retry-After": "3"}) << {
        "kind": "Status", "apiVersion": "v1", "code": status, "message": "busy"}
    result = await run(NodeLabelSink(api, NODE, LabelConfig()).publish, _snap())
    assert result.ok and result.written == 1
    assert len(kmock["patch"]) == 2
    # Retry-After is a floor under the jittered wait (sent with every status here); a short wait is slept
    assert len(sleeps) == 1 and all(2.9 <= s <= 8.0 for s in sleeps)


async def test_the_client_calls_back_when_the_server_answers_after_failing(kmock: Any, api: LightkubeApi,
                                                                           sleeps: list[float]) -> None:
    """What ends the slice watch's wait while the client backs off: one call back when a run of failures ends
    (here within one call: a 503 with Retry-After, then the answer to its try again), none for answers without
    failures before."""
    answered: list[int] = []
    api.on_answer(lambda: answered.append(len(kmock["get", NODES])))
    kmock["get", NODES][:1] << 503 << kmock_lib.headers({"Retry-After": "1"}) << {
        "kind": "Status", "apiVersion": "v1", "code": 503, "message": "busy"}
    sink = NodeLabelSink(api, NODE, LabelConfig())
    assert (await run(sink.publish, _snap())).ok
    assert answered == [2] and len(sleeps) == 1  # once, after the try again that was answered
    assert (await run(sink.publish, _snap())).ok and len(kmock["get", NODES]) == 3 and answered == [2]


async def test_failure_is_reported_and_nothing_deleted(kmock: Any, api: LightkubeApi, sleeps: list[float]) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    await run(sink.publish, _snap())
    kmock["list", SLICES] << 500 << {"kind": "Status", "apiVersion": "v1", "code": 500, "message": "etcd"}
    result = await run(sink.publish, t.Snapshot(node=NODE))
    # retried once while the wait is short, then left to a later pass
    assert not result.ok and ("Unavailable" in result.detail or "BackingOff" in result.detail)
    assert len(sleeps) <= 1 and len(kmock["list", SLICES]) <= 3  # the first pass's list, then two tries
    assert not [r for r in writes(kmock) if r.method.value.lower() == "delete"]


async def test_refused_connection_is_a_reported_failure(sleeps: list[float]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = LightkubeApi.connect(server=f"http://127.0.0.1:{port}", backoff=Backoff(sleep=sleeps.append))
    result = await run(NodeLabelSink(api, NODE, LabelConfig()).publish, _snap())
    assert result.failed == 1 and "Connection refused" in result.detail and sleeps == []  # not tried again


async def test_a_bare_5xx_is_left_to_a_later_call(kmock: Any, api: LightkubeApi, sleeps: list[float]) -> None:
    """As client-go's request: a 429 or 5xx is tried again within the call only when the server said when
    (Retry-After); without, one try, and the next is a later call's (a fleet meeting a failing server sends it its
    steady rate, not twice it)."""
    kmock["get", NODES][:2] << 500 << {"kind": "Status", "apiVersion": "v1", "code": 500, "message": "etcd"}
    result = await run(NodeLabelSink(api, NODE, LabelConfig()).publish, _snap())
    assert result.failed == 1 and len(kmock["get", NODES]) == 1 and sleeps == []


async def test_a_server_failure_does_not_read_the_node_again(kmock: Any) -> None:
    """The slices' owner is the Node's uid, read again after a failed write that may say it changed (a 404, a
    conflict); a server that failed says nothing of the Node, and the pass after it reads no Node."""
    start_objects(kmock)
    now = [0.0]
    api = LightkubeApi.connect(server=str(kmock.url).rstrip("/"), backoff=Backoff(
        clock=lambda: now[0], sleep=lambda s: None, rng=random.Random(1)))
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    assert (await run(sink.publish, _snap())).ok
    kmock["patch", SLICES][:1] << 500 << {"kind": "Status", "apiVersion": "v1", "code": 500, "message": "etcd"}
    assert not (await run(sink.publish, _degraded(_snap()))).ok
    gets = len(kmock["get", NODES])
    now[0] += 10.0  # the client's next try is due
    assert (await run(sink.publish, _degraded(_snap()))).ok
    assert len(kmock["get", NODES]) == gets


class _Dropping:
    """A loopback HTTP server that closes the connections numbered in ``drop`` (from 0) on their first request
    without a word, as a server closing a kept-alive connection does, and answers the others with ``node``."""

    def __init__(self, drop: set[int], node: dict[str, Any]) -> None:
        import json
        import socket
        import threading

        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.requests: list[str] = []
        body = json.dumps(node).encode()
        self._answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self._drop = drop
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        n = 0
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                head = conn.recv(65536).split(b"\r\n", 1)[0].decode()
                self.requests.append(head.split(" ", 1)[0])
                if n not in self._drop:
                    conn.sendall(self._answer)
            n += 1

    def close(self) -> None:
        self._sock.close()


async def test_a_read_whose_connection_closed_under_it_is_tried_again_and_a_write_is_not(
        sleeps: list[float]) -> None:
    """client-go tries a GET again when its connection was reset or closed (``IsProbableEOF``), never a write."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "uid": "u1", "labels": {}}}
    server = _Dropping({0, 2}, node)
    try:
        api = LightkubeApi.connect(server=server.url, backoff=Backoff(sleep=sleeps.append, rng=random.Random(1)))
        assert (await run(api.get_node, NODE)).uid == "u1"  # closed, then answered
        assert server.requests == ["GET", "GET"] and len(sleeps) == 1
        with pytest.raises(Unavailable):
            await run(api.apply_node_labels, NODE, {"a": "b"})  # closed: not tried again
        assert server.requests == ["GET", "GET", "PATCH"] and len(sleeps) == 1
    finally:
        server.close()


async def test_taint_rule_for_a_degraded_gpu_removed_on_recovery(kmock: Any, api: LightkubeApi) -> None:
    sink = DeviceTaintRuleSink(api, NODE, "gpu.topology")
    assert (await run(sink.publish, _degraded(_snap()))).written == 1
    (post,) = [r for r in writes(kmock) if r.method.value.lower() == "post"]
    validate(post.data, "1.37")
    assert post.data["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1"}
    assert (await run(sink.publish, _degraded(_snap()))).written == 0
    assert (await run(sink.publish, _snap())).written == 1
    assert writes(kmock)[-1].method.value.lower() == "delete"


async def test_node_feature_created_once(kmock: Any, api: LightkubeApi) -> None:
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "topolink-x", "uid": "pod-uid"}]
    sink = NodeFeatureSink(api, NODE, "nfd", LabelConfig(), owner)
    assert (await run(sink.publish, _snap())).written == 1
    (post,) = writes(kmock)
    assert post.data["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == NODE
    assert post.data["metadata"]["ownerReferences"] == owner
    assert (await run(sink.publish, _snap())).written == 0
    assert len(writes(kmock)) == 1


async def test_factory_and_prune(kmock: Any, api: LightkubeApi) -> None:
    cfg = KubePublishConfig(node=NODE, device_taint_rules=True, device_taints=False)
    sinks = sinks_from_config(cfg, api)
    assert [s.name for s in sinks] == ["node-labels", "resource-slices", "device-taint-rules"]
    for s in sinks:
        assert (await run(s.publish, _degraded(_snap()))).ok
    done = await run(prune, cfg, NODE, api)
    assert (done.labels, done.slices, done.taint_rules) == (1, 1, 1)
    assert writes(kmock)[-3].data["metadata"]["labels"] == {}


async def test_a_taint_rule_that_lost_its_labels_is_taken_over_and_a_foreign_one_reported_once(
        kmock: Any, api: LightkubeApi) -> None:
    from tests.kmock_support import RULES

    sink = DeviceTaintRuleSink(api, NODE, "gpu.topology")
    assert (await run(sink.publish, _degraded(_snap()))).written == 1
    (post,) = [r for r in writes(kmock) if r.method.value.lower() == "post"]
    name = post.data["metadata"]["name"]
    stripped = {**post.data, "metadata": {"name": name}}  # every label gone: invisible to the node's list
    kmock.objects[RULES, None, name] = stripped
    result = await run(DeviceTaintRuleSink(api, NODE, "gpu.topology").publish, _degraded(_snap()))
    assert result.ok, result.detail
    assert kmock.objects[RULES, None, name]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "topolink"
    foreign = {**stripped, "spec": {**stripped["spec"], "deviceSelector": {
        "driver": "other.example.com", "pool": NODE, "device": "gpu-1"}}}
    kmock.objects[RULES, None, name] = foreign
    other = DeviceTaintRuleSink(api, NODE, "gpu.topology")
    results = [await run(other.publish, _degraded(_snap())) for _ in range(2)]
    assert [r.ok for r in results] == [False, True] and "someone else" in results[0].detail
    assert kmock.objects[RULES, None, name]["spec"]["deviceSelector"]["driver"] == "other.example.com"
    del kmock.objects[RULES, None, name]  # someone else's is gone: the server's copy, not a memory, decides
    assert (await run(other.publish, _degraded(_snap()))).written == 1
    assert kmock.objects[RULES, None, name]["spec"]["deviceSelector"]["driver"] == "gpu.nvidia.com"


async def test_a_node_feature_that_lost_its_labels_is_taken_over_on_409_and_a_foreign_one_reported_once(
        kmock: Any, api: LightkubeApi) -> None:
    """The NodeFeature's name is there when the create is answered (the GET before it missed it: created in
    between): read again, ours by every other mark it is taken over with our labels; labelled for another node
    it is reported once and left alone, and ours is created once the server no longer has it."""
    from tests.kmock_support import FEATURES

    def created_in_between() -> None:  # the sink's next GET answers 404, its create 409
        before, missed = list(kmock), []

        def miss(request: Any) -> bool:  # the first GET from now on (kmock asks about past requests too)
            if not missed and not any(r is request for r in before):
                missed.append(request)
            return bool(missed) and missed[0] is request
        kmock["get", FEATURES][miss] << 404 << {"kind": "Status", "apiVersion": "v1", "code": 404, "message": "nf"}

    assert (await run(NodeFeatureSink(api, NODE, "nfd", LabelConfig()).publish, _snap())).written == 1
    (post,) = [r for r in writes(kmock) if r.method.value.lower() == "post"]
    name = post.data["metadata"]["name"]
    stripped = {**post.data, "metadata": {"name": name, "namespace": "nfd"}}  # every label gone
    kmock.objects[FEATURES, "nfd", name] = stripped
    created_in_between()
    result = await run(NodeFeatureSink(api, NODE, "nfd", LabelConfig()).publish, _snap())
    assert result.ok and result.written == 1, result.detail
    assert [r.method.value.lower() for r in kmock][-4:] == ["get", "post", "get", "patch"]
    assert kmock.objects[FEATURES, "nfd", name]["metadata"]["labels"] == post.data["metadata"]["labels"]
    foreign = {**stripped, "metadata": {**stripped["metadata"],
                                        "labels": {"nfd.node.kubernetes.io/node-name": "node-b"}}}
    kmock.objects[FEATURES, "nfd", name] = foreign
    created_in_between()
    other = NodeFeatureSink(api, NODE, "nfd", LabelConfig())
    results = [await run(other.publish, _snap()) for _ in range(2)]
    assert [r.method.value.lower() for r in kmock][-4:] == ["get", "post", "get", "get"]  # reported, then left alone
    assert [r.ok for r in results] == [False, True] and "someone else" in results[0].detail
    assert kmock.objects[FEATURES, "nfd", name] == foreign
    del kmock.objects[FEATURES, "nfd", name]  # someone else's is gone: the server's copy, not a memory, decides
    assert (await run(other.publish, _snap())).written == 1
    assert kmock.objects[FEATURES, "nfd", name]["metadata"]["labels"] == post.data["metadata"]["labels"]
