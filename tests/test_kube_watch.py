"""The ResourceSlice watch against kmock as the API server: a slice that someone else deletes (kubelet at its
start) wakes the agent, the sink's own deletions do not, and a watch that fails or is refused (RBAC) is opened
again on the back-off, the pool still re-created on every pass meanwhile."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio

from exporter.kube import Backoff, LightkubeApi, ResourceSliceSink, SliceConfig
from tests.kmock_support import NODE, SLICES, a100_node, poke_watchers, start_objects

pytestmark = pytest.mark.asyncio


@pytest.fixture
def api(kmock: Any) -> LightkubeApi:
    start_objects(kmock, managed=False)
    return LightkubeApi.connect(server=str(kmock.url).rstrip("/"),
                                backoff=Backoff(base=0.01, sleep=lambda _: None, rng=random.Random(1)))


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not true within {timeout:g} s"
        await asyncio.sleep(0.02)


class Woken:
    """The agent's side of the watch: reasons, in order, waited for with a bound."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, why: str) -> None:
        with self._lock:
            self.reasons.append(why)

    async def until(self, check: Callable[[list[str]], bool], timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if check(self.reasons):
                    return list(self.reasons)
            await asyncio.sleep(0.05)
        raise AssertionError(f"not woken as expected within {timeout:g} s: {self.reasons}")


def delete_as_kubelet(kmock: Any, name: str) -> None:
    """A DELETE through the API, as kubelet sends it: the server streams a DELETED event to watchers."""
    with httpx.Client(base_url=str(kmock.url)) as http:
        assert http.delete(f"/apis/resource.k8s.io/v1/resourceslices/{name}").status_code == 200


def our_slices(kmock: Any) -> list[str]:
    """The slices of our driver the server lists (a deleted object stays in kmock's store, marked deleted)."""
    with httpx.Client(base_url=str(kmock.url)) as http:
        items = http.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]
    return sorted(o["metadata"]["name"] for o in items if o["spec"]["driver"] == SliceConfig().driver)


class Watch:
    """Runs ``sink.watch`` in a thread for a test; always stopped at teardown, pass or fail."""

    def __init__(self, kmock: Any) -> None:
        self._kmock, self.woken, self.stop = kmock, Woken(), threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._sink: ResourceSliceSink | None = None

    async def start(self, sink: ResourceSliceSink, backoff: Backoff | None = None) -> Woken:
        self._sink = sink
        self._task = asyncio.create_task(asyncio.to_thread(sink.watch, self.stop, self.woken, backoff))
        await until(sink.cache.synced)  # listed; the watch opens from there
        await until(lambda: any(r.resource == SLICES and r.params.get("watch") == "true" for r in list(self._kmock)))
        return self.woken

    async def close(self) -> None:
        """The thread reads a stream that never ends by itself, or waits to try again: stop it, end its wait, and
        send it one event to read."""
        self.stop.set()
        if self._task is None or self._task.done():
            return
        if self._sink is not None:
            self._sink.wake_watch()
        await poke_watchers(self._kmock)
        await asyncio.wait_for(self._task, timeout=10)


@pytest_asyncio.fixture
async def watch(kmock: Any) -> AsyncIterator[Watch]:
    w = Watch(kmock)
    try:
        yield w
    finally:
        await w.close()


async def test_a_slice_deleted_by_kubelet_wakes_the_agent_and_the_next_pass_recreates_it(
        kmock: Any, api: LightkubeApi, watch: Watch) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 1
    (name,) = await asyncio.to_thread(our_slices, kmock)
    woken = await watch.start(sink)
    assert woken.reasons == []  # the slices that exist arrive as ADDED: nothing to do
    await asyncio.to_thread(delete_as_kubelet, kmock, name)
    assert await woken.until(lambda r: len(r) >= 1) == [f"resourceslice {name} deleted"]
    assert await asyncio.to_thread(our_slices, kmock) == []
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 1  # what the woken agent does
    assert await asyncio.to_thread(our_slices, kmock) == [name]
    await watch.close()
    # our own create's event queues a sync only if it came before the create's reply (then the view changed), and
    # that sync writes nothing
    assert woken.reasons in ([f"resourceslice {name} deleted"],
                             [f"resourceslice {name} deleted", f"resourceslice {name} added"])
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 0


async def test_the_sinks_own_deletions_queue_a_sync_that_writes_nothing(kmock: Any, api: LightkubeApi,
                                                                         watch: Watch) -> None:
    """The delete of a stale slice changes the view when its event comes (the mutation cache holds no deletes, as
    client-go's): a sync is queued, as for any change, and finds nothing to write. The same publish rewrites the
    pool's other slice (its generation follows the count): that write's own event queues a sync only if it came
    before the write's reply (then the view changed), in either order with the delete's."""
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 1
    (name,) = await asyncio.to_thread(our_slices, kmock)
    async with httpx.AsyncClient(base_url=str(kmock.url)) as http:
        stale = (await http.get(f"/apis/resource.k8s.io/v1/resourceslices/{name}")).json()
    stale["metadata"]["name"] = f"{name}-stale"  # a slice of our pool that the pool no longer counts
    kmock.objects[SLICES, None, f"{name}-stale"] = stale
    woken = await watch.start(sink)
    result = await asyncio.to_thread(sink.publish, a100_node())  # complete knowledge: the stale slice goes
    assert result.ok and await asyncio.to_thread(our_slices, kmock) == [name]
    await until(lambda: [o["metadata"]["name"] for o in sink.cache.stored()] == [name])  # its DELETED event has arrived
    await watch.close()
    assert result.written == 2  # the stale slice deleted, ours rewritten
    deleted, rewritten = f"resourceslice {name}-stale deleted", f"resourceslice {name} changed"
    assert woken.reasons in ([deleted], [deleted, rewritten], [rewritten, deleted]), woken.reasons
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 0


async def test_a_failed_watch_is_opened_again(kmock: Any, api: LightkubeApi, watch: Watch) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    await asyncio.to_thread(sink.publish, a100_node())
    (name,) = await asyncio.to_thread(our_slices, kmock)
    kmock["watch", SLICES][:1] << 503 << {"kind": "Status", "apiVersion": "v1", "code": 503, "message": "busy"}
    woken = await watch.start(sink, Backoff(base=0.01, cap=0.05))
    await until(lambda: sink.watch_restarts()["error"] == 1)  # the failed watch was opened again
    assert woken.reasons == []  # nothing was deleted while it was down
    assert (await asyncio.to_thread(sink.publish, a100_node())).ok
    await asyncio.to_thread(delete_as_kubelet, kmock, name)
    assert await woken.until(lambda r: len(r) >= 1) == [f"resourceslice {name} deleted"]


async def test_a_slice_deleted_while_not_watching_wakes_the_agent_when_the_watch_opens(
        kmock: Any, api: LightkubeApi, watch: Watch) -> None:
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    await asyncio.to_thread(sink.publish, a100_node())
    (name,) = await asyncio.to_thread(our_slices, kmock)
    await asyncio.to_thread(delete_as_kubelet, kmock, name)  # kubelet started before the watch did
    woken = await watch.start(sink)
    assert await woken.until(lambda r: len(r) >= 1) == [f"resourceslice {name} missing"]


async def test_a_forbidden_watch_is_tried_again_and_publishing_goes_on(kmock: Any, api: LightkubeApi, watch: Watch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """No ``watch`` in RBAC: the watch backs off and tries again (never given up), says the fix once, and each
    pass lists for itself meanwhile."""
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    kmock["watch", SLICES] << 403 << {"kind": "Status", "apiVersion": "v1", "code": 403, "message": "no watch"}
    await watch.start(sink, Backoff(cap=0.05, rng=random.Random(1)))
    await until(lambda: sink.watch_restarts()["refused"] >= 3)  # tried again, and again
    assert watch.woken.reasons == []
    assert "403" in sink.watch_error() and "grant the agent's ServiceAccount list and watch" in sink.watch_error()
    assert caplog.text.count("each pass lists meanwhile") == 1
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 1


async def test_a_pass_with_the_watch_open_lists_nothing(kmock: Any, api: LightkubeApi, watch: Watch) -> None:
    """Steady state reads the watch's view: the list (and the watch) go out with this node's and this driver's
    field selectors, once, when the watch opens; passes after it send no list."""
    sink = ResourceSliceSink(api, NODE, SliceConfig(), taints=False)
    assert (await asyncio.to_thread(sink.publish, a100_node())).written == 1
    await watch.start(sink)
    start = len(list(kmock))
    for _ in range(3):
        result = await asyncio.to_thread(sink.publish, a100_node())
        assert result.ok and result.written == 0
    assert [r for r in list(kmock)[start:] if r.resource == SLICES] == []
    selectors = {frozenset(str(r.params.get("fieldSelector")).split(","))
                 for r in kmock if r.resource == SLICES and r.method.value == "GET"}
    assert selectors == {frozenset({f"spec.driver={SliceConfig().driver}", f"spec.nodeName={NODE}"})}
    watches = [r for r in kmock if r.resource == SLICES and r.params.get("watch") == "true"]
    assert watches and all(r.params.get("allowWatchBookmarks") == "true" for r in watches)
