"""The slice sink's pass and its watch, driven in every order around a write, a delete, a 410, a broken watch list,
a bookmark-then-410 server and a silent stream, against the scripted server of ``tests/slice_script.py``: no
threads, no sleeps, the clock the server's. The watch is the only writer of the store; the sink's own writes stand
over it until the watch confirms them, and a newer event always wins. The real server is in
``tests/test_apiserver_publish.py`` and ``tests/test_apiserver_faults.py``."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exporter.kube import Backoff, Expired, ResourceSliceSink, SliceConfig, Unavailable
from exporter.kube._api._api import BOOKMARK_INTERVAL_S
from exporter.kube._api._retry import MAX_DELAY_S
from exporter.kube._client._watch_stream import decode_event
from exporter.kube._sinks._slice_watch import ERROR_WINDOW_S, FIX_FORBIDDEN, RESTART_REASONS
from tests.kmock_support import a100_node
from tests.slice_script import ScriptedServer, names

NAME = "n1-gpu.topology-0"


class Low(random.Random):
    """Draws the bottom of every jitter window: the most requests the policy allows."""

    def uniform(self, a: float, b: float) -> float:
        return a


class Agent:
    """One agent's slice sink and its watch against ``server``: :meth:`publish` is a pass, :meth:`step` one turn
    of the watch's loop."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server, self.woken = server, []
        self.sink = ResourceSliceSink(server, "n1", SliceConfig(), taints=False, clock=server.clock)
        self.watch = self.sink.watcher(threading.Event(), self.woken.append, Backoff(clock=server.clock, rng=Low()))

    def publish(self) -> bool:
        return self.sink.publish(a100_node("n1")).ok

    def step(self) -> float:
        return self.watch.step()

    def view(self) -> list[str]:
        return names(self.sink.cache.view())

    def since(self, mark: int) -> list[str]:
        return self.server.requests[mark:]


def published(server: ScriptedServer | None = None) -> Agent:
    """An agent whose watch has its state and whose slice the server holds, the watch up to date."""
    agent = Agent(server or ScriptedServer())
    agent.step()
    assert agent.publish() and agent.step() == 0.0
    assert agent.view() == [NAME] and agent.woken == []
    return agent


def both(*hooks: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        for hook in hooks:
            hook()
    return run


# -- a write and a delete, in every order -------------------------------------------------------------------
@pytest.mark.parametrize("order", ["delete, watch, reply", "delete, reply, watch", "watch, reply, delete, watch",
                                   "delete, list, reply"])
def test_a_slice_deleted_while_its_write_is_in_flight_is_created_again(order: str) -> None:
    """Kubelet deletes the slice the pass is creating: whichever comes first, the DELETED event or the create's
    reply (older than the delete), or the watch's first list (after the delete: it has no such slice, and no event
    will ever say so), the slice is missing from the view, the agent is woken, and the next pass creates it
    again."""
    server = ScriptedServer()
    agent = Agent(server)
    kubelet = lambda: server.delete_as_kubelet(NAME)  # noqa: E731
    if order != "delete, list, reply":
        agent.step()
    if order in ("delete, watch, reply", "delete, list, reply"):
        server.during_write = both(kubelet, agent.step)
        agent.publish()
    elif order == "delete, reply, watch":
        server.during_write = kubelet
        agent.publish()
        agent.step()
    else:
        server.during_write = agent.step
        agent.publish()
        kubelet()
        agent.step()
    assert agent.view() == []
    assert any(why.startswith(f"resourceslice {NAME} deleted") for why in agent.woken)
    assert agent.publish() and NAME in server.objects


def test_a_write_the_store_went_past_without_it_is_not_believed() -> None:
    """Kubelet deletes the slice while the create's reply is on its way, and the watch, expired, gets its next state
    after both: the store's resourceVersion has reached the write, so the mutation cache drops it (client-go's rule
    of the newer copy alone would believe it for its TTL, the store lacking the name), the view lacks the slice, a
    sync is queued, and it creates the slice again."""
    server = ScriptedServer()
    agent = Agent(server)
    agent.step()
    server.during_write = lambda: server.delete_as_kubelet(NAME)
    assert agent.publish() and agent.view() == [NAME]  # the reply, over a store that has not seen it yet
    server.faults = ["410"]
    agent.step()
    agent.step()  # the next state, after the create and the delete
    assert agent.view() == [] and agent.woken == [f"resourceslice {NAME} missing"]
    assert agent.publish() and NAME in server.objects


@pytest.mark.parametrize("order", ["watch, reply", "reply, watch"])
def test_the_sinks_own_writes_are_reconciled_to_nothing_in_either_order(order: str) -> None:
    """The event of a write of the sink's own: after its reply, it only brings the store up to the mutation cache
    (the view does not change: no sync queued); before its reply, it changes the view and queues a sync, which
    finds nothing to write. Nobody records who wrote what."""
    agent = published()
    agent.server.versions = ["v1"]
    smaller = a100_node("n1", gpus=3)
    if order == "watch, reply":
        agent.server.during_write = agent.step
        assert agent.sink.publish(smaller).ok
        assert agent.woken == [f"resourceslice {NAME} changed"]
    else:
        assert agent.sink.publish(smaller).ok
        agent.step()
        assert agent.woken == []
    assert agent.sink.publish(smaller).written == 0


def test_an_edit_by_someone_else_wakes_the_agent() -> None:
    agent = published()
    edited = agent.server.objects[NAME]
    edited["metadata"]["labels"] = {}
    agent.server._change("MODIFIED", edited)
    agent.step()
    assert agent.woken == [f"resourceslice {NAME} changed"]


def test_a_failed_pass_leaves_the_store_to_the_watch_and_a_later_delete_stands() -> None:
    """A pass whose write the server applied but whose reply was lost (a timeout), then kubelet's delete: the next
    pass plans against the watch's view (no list of its own that could undo the delete) and creates the slice
    again; the watch resumes from the delete's resourceVersion, never from an older one."""
    server = ScriptedServer()
    agent = Agent(server)
    agent.step()

    def lost() -> None:
        raise Unavailable("create resourceslice: ReadTimeout")
    server.during_write = lost
    assert not agent.publish()
    agent.step()  # the create's ADDED event
    server.delete_as_kubelet(NAME)
    deleted_at = server.rv
    agent.step()
    mark = len(server.requests)
    assert agent.publish() and NAME in server.objects
    assert "LIST" not in agent.since(mark)
    agent.step()
    assert server.requests[-1] == f"WATCH {deleted_at}"  # resumed from the delete, never from before it
    # each event changed the view (the lost reply left nothing in the mutation cache): a sync queued for each
    assert agent.view() == [NAME] and agent.woken == [f"resourceslice {NAME} added", f"resourceslice {NAME} deleted"]


def test_a_pass_before_the_watchs_first_state_lists_for_itself_and_writes_nothing_to_the_cache() -> None:
    server = ScriptedServer()
    agent = Agent(server)
    assert agent.publish() and server.requests[-2:] == ["LIST", f"CREATE {NAME}"]
    assert not agent.sink.cache.synced()
    agent.step()
    assert agent.sink.cache.synced() and agent.view() == [NAME] and agent.woken == []


def test_a_write_the_watch_never_confirms_stands_for_its_ttl_then_the_store_counts() -> None:
    """The watch is down (the server fails it) while the pass creates the slice: the view shows the create at once;
    after the mutation's TTL the watch's store alone counts, and the next pass checks the pool against it."""
    server = ScriptedServer()
    agent = Agent(server)
    agent.step()
    assert agent.publish() and agent.view() == [NAME]
    server.now += 61.0
    assert agent.view() == []  # not confirmed: the next pass writes it again (an apply changes nothing)
    agent.step()  # the event changes the view (the write's TTL ran out): a sync, which finds nothing to write
    assert agent.view() == [NAME] and agent.woken == [f"resourceslice {NAME} added"]
    assert agent.sink.publish(a100_node("n1")).written == 0


# -- the server's view: while the watch is down, a pass lists -------------------------------------------------
@pytest.mark.parametrize("fault", ["500", "410", "bookmark-410", "backing-off"])
def test_a_slice_deleted_while_the_watch_backs_off_is_created_again_within_a_bookmark_interval(fault: str) -> None:
    """The watch fails and backs off (a server error, a 410 after its relist at once, nothing sent); kubelet wipes
    the slice meanwhile, which no watch sees. Within a bookmark interval of the watch's last sign of life a pass
    trusts the store, as it would a live stream between bookmarks; after it the pass lists and creates the slice
    again, without waiting for the watch to come back. The watch, back, finds the pool whole and wakes nothing."""
    agent = published()
    server = agent.server
    server.faults = [fault] * 3
    waits = [agent.step() for _ in range(3)]
    assert waits[-1] > 0
    server.delete_as_kubelet(NAME)
    mark = len(server.requests)
    assert agent.publish() and agent.since(mark) == []  # trusted: its last sign of life is this moment's
    server.now += BOOKMARK_INTERVAL_S
    assert agent.sink.cache.view() is None
    assert agent.publish() and agent.since(mark) == ["LIST", f"CREATE {NAME}"]
    assert names(agent.sink.cache.stored()) == [NAME]  # the pass wrote nothing to the store: still the watch's old one
    agent.step()
    assert agent.view() == [NAME] and agent.woken == []


def test_a_silent_stream_leaves_the_store_untrusted_until_the_watch_shows_life() -> None:
    """A stream silent for longer than the bookmark interval hides kubelet's delete; however soon the watch is
    tried again, the pass after the silence lists (nothing came to say the store is current) and creates the slice
    again, which is a restore within one pass of the watch giving the stream up."""
    agent = published()
    server = agent.server
    server.delete_as_kubelet(NAME)
    server.faults = ["silent", "silent"]
    assert agent.step() == 0.0  # given up, watched again at once
    mark = len(server.requests)
    assert agent.publish() and agent.since(mark) == ["LIST", f"CREATE {NAME}"]


def test_the_store_is_trusted_while_bookmarks_come_and_not_after() -> None:
    agent = published()
    cache, server = agent.sink.cache, agent.server
    server.now += 59.0
    assert cache.view() == [agent.server.objects[NAME]]  # within the bookmark interval
    server.now += 2.0
    assert cache.view() is None
    cache.alive()  # a bookmark
    assert cache.view() is not None


@pytest.mark.parametrize(("timeout", "lived", "at_once"),
                         [(600, 560.0, False), (600, 580.0, True), (None, 250.0, True)])
def test_a_stream_ended_before_the_timeout_asked_for_waits_as_a_broken_one(timeout: int | None, lived: float,
                                                                            at_once: bool) -> None:
    """A proxy that drops every connection ends old streams cleanly too: one ended before the timeout the client
    asked for (most of it) is spread over the error window like a broken one, not watched again at once as at the
    server's timeout; an API that does not say its timeout is held to the least the client asks for."""
    agent = published()
    server = agent.server

    def dropped(*_a: object, **_k: object) -> Iterator[tuple[str, dict[str, object]]]:
        yield "OPEN", {} if timeout is None else {"timeoutSeconds": timeout}
        server.now += lived
    server.watch = dropped  # type: ignore[method-assign,assignment]
    wait = agent.step()
    assert (wait == 0.0) is at_once and (at_once or wait >= ERROR_WINDOW_S / 2)


# -- 410, watch lists, silence ---------------------------------------------------------------------------------
def test_after_a_healthy_while_the_first_410_gets_a_watch_list_at_once_and_passes_list_nothing() -> None:
    agent = published()
    server = agent.server
    for _ in range(3):  # fifteen healthy minutes: the server's timeout, watched again at once
        assert agent.step() == 0.0
    server.delete_as_kubelet(NAME)
    server.compact()  # the server lost its events (its watch cache started over): the delete is not replayed
    mark = len(server.requests)
    assert agent.step() == 0.0  # 410: at once
    assert agent.publish() and "LIST" not in agent.since(mark)  # the pass plans against the store meanwhile
    agent.step()
    assert agent.since(mark)[-1] == "WATCHLIST" and agent.woken == [f"resourceslice {NAME} missing"]
    assert agent.sink.watch_restarts() == {"closed": 5, "expired": 1, "error": 0, "refused": 0}


def test_a_plain_bookmark_inside_a_watch_lists_state_changes_nothing() -> None:
    """A bookmark without the end annotation while a watch list sends its state (a proxy's, a server's periodic one)
    is no change: the state is committed at its end bookmark, and watch lists go on being asked for (it is not a
    server ignoring them, which would cost a list on every 410 from then on)."""
    agent = published()
    server = agent.server
    scripted = server.watch

    def bookmarked(kind: Any, labels: Any, fields: Any, resource_version: str | None = None,
                   initial: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        for typ, obj in scripted(kind, labels, fields, resource_version, initial):
            yield typ, obj
            if initial and typ == "OPEN":
                yield "BOOKMARK", {"metadata": {"resourceVersion": str(server.rv)}}
    server.watch = bookmarked  # type: ignore[method-assign]
    for _ in range(2):
        server.now += 121.0  # a healthy period: each 410 is the first since the backoff reset
        server.faults = ["410"]
        mark = len(server.requests)
        assert agent.step() == 0.0 and agent.step() == 0.0
        assert agent.since(mark)[1:] == ["WATCHLIST"] and agent.view() == [NAME]


def test_a_watch_list_broken_part_way_commits_nothing_and_the_state_comes_from_a_list() -> None:
    """The store holds our slice; after a 410 the watch list streams another slice (newer than a delete of ours it
    does not show) and breaks before its end: nothing is committed, no resourceVersion of its ADDED events is
    resumed from, and the next state (a list) finds ours missing."""
    agent = published()
    server = agent.server
    server.compact()
    server.delete_as_kubelet(NAME)
    other = {"metadata": {"name": "n1-other"}, "spec": {"driver": "gpu.topology", "nodeName": "n1"}}
    server._change("ADDED", other)
    server.faults = ["410", "break-list"]
    mark = len(server.requests)
    assert agent.step() == 0.0
    assert agent.step() > 0 and agent.view() == [NAME]  # broken: the store is as it was
    agent.step()
    assert agent.since(mark) == ["WATCH 101", "WATCHLIST", "LIST", f"WATCH {server.rv}"]
    assert agent.woken == [f"resourceslice {NAME} missing", "resourceslice n1-other added"]
    assert agent.view() == ["n1-other"]


def test_a_server_that_sends_a_bookmark_then_a_410_on_every_watch_is_backed_off() -> None:
    """The bookmark is no proof of health: the first 410 relists at once, the ones after wait on the back-off
    (the lowest draws of its jitter here), so ten minutes cost a handful of requests, not thousands."""
    agent = published()
    server = agent.server
    server.faults = ["bookmark-410"] * 100
    start, mark, waits = server.now, len(server.requests), []
    while server.now - start < 600.0:
        wait = agent.step()
        waits.append(wait)
        server.now += wait
    # at once: the first 410 (a watch list, which this server answers with a bookmark and a 410 too); then the
    # back-off, growing
    assert waits[0] == 0.0 and all(w > 0 for w in waits[1:]) and waits[1:] == sorted(waits[1:])
    assert len(agent.since(mark)) <= 12, agent.since(mark)


def test_a_bookmark_that_a_410_follows_keeps_no_store_alive() -> None:
    """A server that sends a bookmark and then a 410 on every watch says nothing true of the store (kubelet's wipe
    meanwhile is never sent): its bookmarks do not keep the store trusted, and a pass lists within a bookmark
    interval of the watch's last real sign of life, however often the watch tries again."""
    agent = published()
    server = agent.server
    lived = server.now  # the stream ended at the server's timeout
    server.delete_as_kubelet(NAME)
    server.faults = ["bookmark-410"] * 10
    server.now += 30.0  # watched again later (the stream broke): a bookmark, then a 410
    assert agent.step() == 0.0  # the first 410: again at once (a watch list, a bookmark and a 410 too)
    assert agent.step() > 0.0
    server.now = lived + BOOKMARK_INTERVAL_S + 1.0
    assert agent.sink.cache.view() is None
    mark = len(server.requests)
    assert agent.publish() and agent.since(mark) == ["LIST", f"CREATE {NAME}"]


def test_a_410_once_relists_at_once_and_again_after_a_healthy_period() -> None:
    agent = published()
    server = agent.server
    server.faults = ["410"]
    assert agent.step() == 0.0 and agent.step() == 0.0  # the state again, at once, then watched on
    server.now += 121.0  # a healthy period: the backoff resets
    server.faults = ["410"]
    assert agent.step() == 0.0


def test_a_silent_stream_is_watched_again_at_once_from_where_it_stopped() -> None:
    agent = published()
    server = agent.server
    server.faults = ["silent"]
    assert agent.step() == 0.0
    resume = server.requests[-1]
    server.delete_as_kubelet(NAME)
    agent.step()
    assert server.requests[-1] == resume and agent.woken == [f"resourceslice {NAME} deleted"]
    server.faults = ["silent", "silent"]
    assert agent.step() == 0.0 and agent.step() >= ERROR_WINDOW_S / 2  # silent again: backed off


def test_nothing_sent_counts_no_restart_and_leaves_the_probing_to_the_passes() -> None:
    """While the client backs off, the watch sends nothing and waits as long as the client's longest wait: the
    passes probe the failing server, and their first answer ends the wait (below)."""
    agent = published()
    agent.server.faults = ["500", "backing-off", "backing-off"]
    assert agent.step() >= ERROR_WINDOW_S / 2  # sent, and counted for why the last stream ended (its timeout)
    before = agent.sink.watch_restarts()
    assert agent.step() == MAX_DELAY_S and agent.step() == MAX_DELAY_S  # not sent: the client's next try is 30 s off
    assert agent.sink.watch_restarts() == before
    agent.step()
    assert agent.sink.watch_restarts()["error"] == before["error"] + 1  # sent: one restart


def test_a_watch_broken_again_before_the_backoff_resets_waits_longer_not_shorter() -> None:
    """A second outage within the reset period (a flapping server, a fault after a fault): the wait doubles from
    the pass window the first one spread the fleet over, so every watch does not come back within seconds of the
    second break (an answer to a pass still ends the wait at once, above)."""
    agent = published()
    server = agent.server
    server.faults = ["500", "500"]
    first = agent.step()
    server.now += first
    second = agent.step()
    assert ERROR_WINDOW_S / 2 <= first < ERROR_WINDOW_S <= second  # the lowest draws: 30 s, then 60 s


def test_the_servers_answer_to_a_pass_ends_the_watchs_wait_and_stop_ends_it_too() -> None:
    """The watch waiting on the client's back-off steps again as soon as the server answers after failing (the
    client calls back the sink), not when its wait runs out; set ``stop`` and woken, it returns. Run in a thread:
    the wait is the thread's own (five minutes of real time, were it not ended)."""
    agent = published()
    server = agent.server
    server.faults = ["backing-off"]
    stop = threading.Event()
    watch = agent.sink.watcher(stop, agent.woken.append, Backoff(clock=server.clock, rng=Low()))
    watching = threading.Thread(target=watch.run, daemon=True)
    mark = len(server.requests)
    watching.start()
    assert until(lambda: not server.faults)  # a new watch's state listed, its watch refused: waiting
    assert agent.since(mark) == ["DISCOVERY", "LIST"]  # the watch picks its version for itself, in its thread
    server.answer()  # a pass's request answered: the client's backoff reset
    assert until(lambda: len(agent.since(mark)) > 2), "the watch did not step again on the answer"
    assert agent.since(mark)[2] == f"WATCH {server.rv}"
    server.faults = ["backing-off"]  # its streams end at once (the script's timeout), then one is refused: waiting
    assert until(lambda: not server.faults)
    stop.set()
    agent.sink.wake_watch()
    watching.join(timeout=10)
    assert not watching.is_alive()


def until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """``check()`` came true within ``timeout`` seconds of real time (the watch's own thread moves it)."""
    done = threading.Event()
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        done.wait(0.01)
    return True


def test_a_404_for_the_api_version_picks_the_version_again() -> None:
    agent = published()
    server = agent.server
    server.versions = ["v1beta2"]  # the server no longer serves v1 (a rollback)
    assert agent.step() > 0
    mark = len(server.requests)
    agent.step()
    assert agent.since(mark)[:2] == ["DISCOVERY", "LIST"]
    assert agent.publish()


# -- never giving up -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 403, 400, 405, 415, 422])
def test_a_refused_watch_backs_off_and_watches_again_once_permitted(status: int,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A 403 (no ``watch`` in RBAC: a DaemonSet rolled out before its RBAC) or any status the client does not
    know: the passes list for themselves, the watch tries again on the back-off (logged once, with the fix; counted
    as ``refused``; said by the readiness detail) and watches again, without a restart, once the server permits."""
    from exporter.kube._client._watch_stream import error_for

    server = ScriptedServer()
    agent = Agent(server)
    real = server.watch
    refused = {"on": True}

    def watch(*a: Any, **k: Any) -> Any:
        if refused["on"]:
            raise error_for("watch resourceslices", status, "no")
        return real(*a, **k)
    server.watch = watch  # type: ignore[method-assign]
    waits = [agent.step() for _ in range(4)]
    assert all(w > 0 for w in waits) and waits == sorted(waits)  # backed off, never given up
    assert sum("each pass lists meanwhile" in r.getMessage() for r in caplog.records) == 1  # once, until a watch opens
    assert agent.sink.watch_error().startswith("watch refused") and agent.sink.watch_restarts()["refused"] == 3
    if status in (401, 403):
        assert FIX_FORBIDDEN in agent.sink.watch_error()
    mark = len(server.requests)
    assert agent.publish() and "LIST" in agent.since(mark)  # the pass lists for itself meanwhile
    refused["on"] = False  # the RBAC arrives
    assert agent.step() == 0.0
    assert agent.sink.watch_error() == "" and agent.sink.cache.view() is not None
    assert "watching again" in caplog.text


def test_a_watch_that_fails_on_a_bug_leaves_the_passes_listing() -> None:
    agent = published()

    def bug() -> None:
        raise RuntimeError("a bug")
    agent.watch._kind = bug  # type: ignore[assignment]
    with pytest.raises(RuntimeError):
        agent.watch.run()
    assert not agent.sink.cache.synced()


def test_a_floor_sets_the_least_window_and_the_cap_the_most() -> None:
    class Top(random.Random):
        def uniform(self, a: float, b: float) -> float:
            return b
    b = Backoff(rng=Top())
    assert [b.delay(n, None) for n in (1, 2)] == [2.0, 4.0]  # requests: from the base
    assert [b.delay(n, None, floor=60.0) for n in (1, 2, 3, 4)] == [60.0, 120.0, 240.0, b.cap]
    assert Backoff(rng=Low()).delay(1, None, floor=60.0) == 30.0  # the upper half of the window


def test_an_error_event_is_raised_as_its_status() -> None:
    line = ('{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
            '"message":"too old resource version: 207 (220)","reason":"Expired","code":410}}')
    with pytest.raises(Expired, match="410 too old resource version"):
        decode_event(line, "watch resourceslices")
    with pytest.raises(Unavailable):
        decode_event('{"type":"ERROR","object":{"code":500,"message":"etcd"}}', "watch")
    assert decode_event('{"type":"DELETED","object":{"metadata":{"name":"a"}}}', "w") == (
        "DELETED", {"metadata": {"name": "a"}})


def test_restart_counters_are_exported_at_zero_from_the_start() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter import SnapshotCollector, View, sink_stats
    from topology import Snapshot

    sink = ResourceSliceSink(None, "n1", SliceConfig())  # type: ignore[arg-type]  # no request before publish
    view = View(snapshot=Snapshot(node="n1"), sinks=(sink_stats(sink),))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: view))
    text = generate_latest(registry).decode()
    for reason in RESTART_REASONS:
        assert f'topolink_sink_watch_restarts_total{{reason="{reason}",sink="resource-slices"}} 0.0' in text
