"""The slice watch loop and its cache against a scripted fake of the ``KubeApi`` port: each way a watch ends
(the server's timeout, 410 inside the stream, a broken connection, RBAC) leads where it should, every restart
is counted by reason, and only changes made by others wake the agent. The real thing is in
``tests/test_apiserver_publish.py``; here each case is exact and instant."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from exporter.kube import Backoff, Expired, Forbidden, InvalidObject, Unavailable
from exporter.kube._api._api import Kind, slice_kind
from exporter.kube._api._errors import BackingOff
from exporter.kube._client._watch_stream import decode_event
from exporter.kube._sinks._slice_cache import TRUST_S, SliceCache
from exporter.kube._sinks._slice_watch import (
    EARLY_CLOSE_S,
    ERROR_WINDOW_S,
    RESTART_REASONS,
    SliceWatch,
    slice_fields,
    watch_slices,
)

KIND = slice_kind("v1")
FIELDS = slice_fields("n1", "gpu.topology")


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodeName": "n1", "driver": "gpu.topology"}}


Step = Callable[[], Iterator[tuple[str, dict[str, Any]]]]


class ScriptedApi:
    """``list_versioned`` answers ``items`` at ``rv``; each ``watch`` plays the next step of the script (the
    last one, which sets ``stop``, ends the loop)."""

    def __init__(self, stop: threading.Event, items: list[dict[str, Any]], rv: str, steps: list[Step]) -> None:
        self.stop, self.items, self.rv, self.steps = stop, items, rv, steps
        self.lists: list[Mapping[str, str]] = []
        self.watches: list[str | None] = []

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
                       probe: bool = True) -> tuple[list[dict[str, Any]], str]:
        self.lists.append(dict(fields))
        return list(self.items), self.rv

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        self.watches.append("LIST" if initial else resource_version)
        if not self.steps:
            self.stop.set()
            return
        yield from self.steps.pop(0)()


def opened(*events: tuple[str, dict[str, Any]], then: Exception | None = None) -> Step:
    def step() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        yield from events
        if then is not None:
            raise then
    return step


def refused(error: Exception) -> Step:
    def step() -> Iterator[tuple[str, dict[str, Any]]]:
        raise error
        yield  # pragma: no cover - a generator that fails when first read
    return step


def run(api: ScriptedApi, cache: SliceCache | None = None) -> tuple[Counter[str], list[str], SliceCache]:
    cache = cache or SliceCache()
    restarts: Counter[str] = Counter(dict.fromkeys(RESTART_REASONS, 0))
    woken: list[str] = []
    watch_slices(api, lambda: KIND, fields=FIELDS, cache=cache, wake=woken.append, stop=api.stop,
                 restarts=restarts, backoff=Backoff(base=0.001, cap=0.001))
    return restarts, woken, cache


def test_a_410_inside_the_stream_lists_again_at_once() -> None:
    stop = threading.Event()

    def expired() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        yield "BOOKMARK", {"metadata": {"resourceVersion": "12"}}
        api.rv = "20"  # the server moved on (it restarted, and others wrote meanwhile)
        raise Expired("watch resourceslices: 410 too old resource version: 12 (20)")
    api = ScriptedApi(stop, [obj("a", "5")], "10", [expired, watch_list(obj("a", "5"), rv="22")])
    restarts, woken, cache = run(api)
    assert restarts["expired"] == 1 and restarts["error"] == 0
    assert api.lists == [FIELDS]  # the state again through a watch list: one request, no list of its own
    assert api.watches == ["10", "LIST", "22"]  # then on from where the watch list ended, without waiting
    assert woken == [] and [o["metadata"]["name"] for o in cache.view() or []] == ["a"]


def watch_list(*state: dict[str, Any], rv: str, then: Exception | None = None) -> Step:
    """A watch list as a server with ``sendInitialEvents`` answers: the state, then the bookmark that ends it."""
    end = {"metadata": {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}}
    return opened(*[("ADDED", o) for o in state], ("BOOKMARK", end), then=then)


def test_a_watch_list_finds_what_was_deleted_while_the_watch_was_down() -> None:
    stop = threading.Event()
    gone = opened(("BOOKMARK", {"metadata": {"resourceVersion": "11"}}),
                  then=Expired("watch resourceslices: 410 too old resource version: 11 (30)"))
    api = ScriptedApi(stop, [obj("a", "5"), obj("b", "6")], "10", [gone, watch_list(obj("a", "5"), rv="31")])
    _, woken, cache = run(api)
    assert woken == ["resourceslice b missing"] and [o["metadata"]["name"] for o in cache.view() or []] == ["a"]
    assert api.watches == ["10", "LIST", "31"]


@pytest.mark.parametrize("answer", [
    refused(InvalidObject("watch resourceslices: 422 sendInitialEvents is forbidden for watch unless the "
                          "WatchList feature gate is enabled")),
    opened(("ADDED", obj("a", "5")), ("BOOKMARK", {"metadata": {"resourceVersion": "31"}}))])
def test_a_server_without_watch_lists_gets_a_list_and_a_watch(answer: Step) -> None:
    """Refused (the feature gate off) or ignored (an older server: the state without the bookmark that ends
    it): the watch lists and watches instead, at once, and does not ask again."""
    stop, cache = threading.Event(), SliceCache()
    gone = refused(Expired("watch resourceslices: 410"))
    worked = opened(("BOOKMARK", {"metadata": {"resourceVersion": "11"}}), then=Expired("watch resourceslices: 410"))
    api = ScriptedApi(stop, [obj("a", "5")], "10", [worked, answer, gone, worked])
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=cache, wake=lambda _w: None, restarts=Counter(),
                       backoff=Backoff(rng=Top()), stop=stop)
    assert [watch.step(), watch.step()] == [0.0, 0.0]  # a first 410: a watch list, refused or ignored
    assert watch.step() > 0  # listed and watched instead, at once (a 410 on its own list: it waits)
    assert api.watches == ["10", "LIST", "10"] and len(api.lists) == 2 and cache.view() is not None
    api.rv = "40"
    watch.step()  # a first 410 again, after a working watch: a list and a watch, never a watch list again
    watch.step()
    assert api.watches == ["10", "LIST", "10", "40", "40"] and len(api.lists) == 4


class Top(random.Random):
    """Draws the top of every jitter window: the longest wait the policy allows."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_a_repeated_410_lists_once_the_cache_is_no_longer_trusted_and_passes_read_it_meanwhile() -> None:
    """A watch that expires on the list it just made cannot be had: the passes plan against that list, and the
    watch lists (and watches) again when the passes would, once the list is TRUST_S old, not on every 410."""
    stop, now = threading.Event(), [0.0]

    def expired() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        raise Expired("watch resourceslices: 410 too old resource version: 10 (20)")
    api = ScriptedApi(stop, [obj("a", "5")], "10", [expired, expired, watch_list(obj("a", "21"), rv="21", then=
                      Expired("watch resourceslices: 410")), expired])
    cache = SliceCache()
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=cache, wake=lambda _w: None, restarts=Counter(),
                       backoff=Backoff(rng=Top()), stop=stop, clock=lambda: now[0])
    assert watch.step() == TRUST_S and len(api.lists) == 1  # not the floor's 120 s: the list is trusted longer
    now[0] = TRUST_S - 1
    assert [o["metadata"]["name"] for o in cache.view() or []] == ["a"]  # meanwhile a pass sends no list
    now[0] = TRUST_S
    assert cache.view() is None  # the list is too old to plan against: a pass would list
    assert watch.step() == TRUST_S and len(api.lists) == 2  # the watch listed again, and its watch expired again
    # the list is trusted again: after a 410 the state comes through a watch list, which works, then expires
    assert watch.step() == 0.0  # after a working watch (an event): the first 410, a watch list at once
    assert watch.step() == TRUST_S  # a 410 again, on its own watch list: waits for that state to age
    assert len(api.lists) == 2 and api.watches == ["10", "10", "LIST", "LIST"]


def test_a_repeated_410_watches_from_a_passs_list_and_waits_for_that_list_to_age() -> None:
    stop, now = threading.Event(), [0.0]

    def expired() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        raise Expired("watch resourceslices: 410")
    api = ScriptedApi(stop, [obj("a", "5")], "10", [expired, expired, expired])
    cache = SliceCache()
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=cache, wake=lambda _w: None, restarts=Counter(),
                       backoff=Backoff(rng=Top()), stop=stop, clock=lambda: now[0])
    assert watch.step() == TRUST_S
    now[0] = TRUST_S + 10
    cache.listed([obj("a", "5")], "30")  # a pass found the list too old and listed: the watch starts from it
    assert watch.step() == TRUST_S and api.watches == ["10", "30"] and len(api.lists) == 1  # no list of its own


def test_a_watch_broken_after_events_comes_back_on_a_jittered_window_and_passes_trust_the_cache() -> None:
    """Every watch of a fleet breaks at once (a proxy drops its connections): each waits a full-jitter draw over
    at least a pass before it reopens, the passes plan against what it saw meanwhile (no list each); the first
    410 then lists again at once, and an event ends the streak (the next break draws from the same window
    again)."""
    stop = threading.Event()
    broken = Unavailable("watch resourceslices: RemoteProtocolError: peer closed connection")
    api = ScriptedApi(stop, [obj("a", "5")], "10", [
        opened(("BOOKMARK", obj("a", "11")), then=broken),
        refused(Expired("watch resourceslices: 410 too old resource version: 11 (20)")),
        watch_list(obj("a", "5"), rv="21", then=broken)])
    cache = SliceCache()
    restarts: Counter[str] = Counter()
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=cache, wake=lambda _w: None,
                       restarts=restarts, backoff=Backoff(rng=Top()), stop=stop)
    assert watch.step() == ERROR_WINDOW_S  # not at once: the top of uniform(0, ERROR_WINDOW_S)
    assert cache.view() is not None  # the watch is down for an error: the passes still trust what it saw
    assert watch.step() == 0.0 and api.watches == ["10", "11"]  # resumed, met a 410: the state again at once
    assert watch.step() == ERROR_WINDOW_S  # the event reset the streak: the same window, not a doubled one
    assert restarts == Counter(error=2, expired=1) and api.watches[-1] == "LIST" and len(api.lists) == 1


def test_a_stream_ended_cleanly_long_before_its_timeout_waits_like_a_broken_one() -> None:
    """A server shutting down (or a proxy) ends every stream cleanly at once: not the server's timeout, so it
    waits on the error window too; a stream that lasted to its timeout reopens at once."""
    now = [0.0]
    steps = [opened(("BOOKMARK", obj("a", "11"))), opened(("BOOKMARK", obj("a", "12")))]

    def lasting() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        now[0] += 300.0  # the client asks the server for 300 to 600 s
        yield "BOOKMARK", obj("a", "13")
    api = ScriptedApi(threading.Event(), [obj("a", "5")], "10", [*steps, lasting])
    cache, restarts = SliceCache(), Counter[str]()
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=cache, wake=lambda _w: None, restarts=restarts,
                       backoff=Backoff(rng=Top()), early=EARLY_CLOSE_S, clock=lambda: now[0])
    assert watch.step() == ERROR_WINDOW_S and cache.view() is not None  # dropped: trusted, no list meanwhile
    now[0] += TRUST_S
    assert cache.view() is None  # no watch for TRUST_S: a pass lists
    now[0] -= TRUST_S
    assert watch.step() == ERROR_WINDOW_S and api.watches == ["10", "11"]  # resumed, where it stopped
    assert watch.step() == 0.0 and restarts == Counter(error=2, closed=1)  # its timeout: at once


def test_a_watch_that_fails_on_a_bug_leaves_the_passes_listing() -> None:
    cache = SliceCache()

    def bug() -> Kind:
        raise RuntimeError("a bug")
    watch = SliceWatch(ScriptedApi(threading.Event(), [], "1", []), bug, fields=FIELDS, cache=cache,
                       wake=lambda _w: None, restarts=Counter())
    cache.replace([obj("a", "5")])
    cache.expired()  # the watch was relisting after a 410 when it broke
    assert cache.view() is not None  # trusted while the watch is on its way back
    with pytest.raises(RuntimeError):
        watch.run()
    assert cache.view() is None


def test_a_floor_sets_the_least_jitter_window_and_the_cap_the_most() -> None:
    b = Backoff(rng=Top())
    assert [b.delay(n, None) for n in (1, 2)] == [4.0, 8.0]  # requests: from the base
    assert [b.delay(n, None, floor=60.0) for n in (1, 2, 3, 4)] == [60.0, 120.0, 240.0, b.cap]


def test_the_servers_timeout_resumes_from_the_last_version_seen_bookmarks_included() -> None:
    stop = threading.Event()
    api = ScriptedApi(stop, [obj("a", "5")], "10", [
        opened(("BOOKMARK", {"metadata": {"resourceVersion": "40"}})),
        opened(("MODIFIED", obj("a", "45")))])
    restarts, woken, _ = run(api)
    assert api.lists == [FIELDS]  # listed once, at the start
    assert api.watches == ["10", "40", "45"]
    assert restarts["closed"] == 3  # the third: the script's end
    assert woken == ["resourceslice a changed"]  # someone else's edit of our slice


def test_a_broken_connection_resumes_from_its_version_and_is_trusted_meanwhile() -> None:
    stop = threading.Event()
    cache = SliceCache()
    seen: list[list[dict[str, Any]] | None] = []

    def broken() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        yield "ADDED", obj("b", "11")
        raise Unavailable("watch resourceslices: ReadError")

    def check() -> Iterator[tuple[str, dict[str, Any]]]:
        seen.append(cache.view())  # after the failure, before the server accepts the watch again
        yield "OPEN", {}
        seen.append(cache.view())
    api = ScriptedApi(stop, [obj("a", "5")], "10", [broken, check])
    restarts, _, _ = run(api, cache)
    assert restarts["error"] == 1 and api.lists == [FIELDS] and api.watches[:2] == ["10", "11"]
    # between, the passes plan against what the watch saw until it broke (trusted, not fresh: no list each)
    assert [[o["metadata"]["name"] for o in view or []] for view in seen] == [["a", "b"], ["a", "b"]]


@pytest.mark.parametrize("error", [Forbidden("watch resourceslices: 403"), Unavailable("x")])
def test_forbidden_gives_up_other_failures_retry(error: Exception) -> None:
    stop = threading.Event()
    api = ScriptedApi(stop, [], "1", [refused(error)])
    restarts, _, cache = run(api)
    assert cache.view() is None or isinstance(error, Unavailable)
    assert restarts["error"] == (1 if isinstance(error, Unavailable) else 0)
    assert len(api.watches) == (2 if isinstance(error, Unavailable) else 1)


def test_a_watch_the_client_holds_back_counts_as_an_error_restart() -> None:
    """The stream broke and a pass found the server failing first: the reopen is not sent (the client backs
    off), and that is still a restart for an error, as a reopen the server refused would be."""
    stop = threading.Event()
    api = ScriptedApi(stop, [], "1", [refused(BackingOff("watch resourceslices: not sent", 0.0))])
    restarts, _, _ = run(api)
    assert restarts["error"] == 1 and len(api.watches) == 2  # then watched again


def test_an_error_event_is_raised_as_its_status() -> None:
    line = ('{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
            '"message":"too old resource version: 207 (220)","reason":"Expired","code":410}}')
    with pytest.raises(Expired, match="410 too old resource version"):
        decode_event(line, "watch resourceslices")
    with pytest.raises(Unavailable):
        decode_event('{"type":"ERROR","object":{"code":500,"message":"etcd"}}', "watch")
    assert decode_event('{"type":"DELETED","object":{"metadata":{"name":"a"}}}', "w") == (
        "DELETED", {"metadata": {"name": "a"}})


def test_the_cache_wakes_only_for_changes_of_others() -> None:
    cache = SliceCache()
    assert cache.view() is None  # not fresh before a watch lists
    cache.watched(lambda: 0.0)
    assert cache.replace([obj("a", "5")]) == []
    cache.writing(["a", "b"])
    assert cache.event("MODIFIED", obj("a", "6")) is None  # our own update, its event before our write returned
    cache.written([obj("a", "6"), obj("b", "7")], [], ["a", "b"])
    assert cache.event("ADDED", obj("b", "7")) is None  # our own create, its event after
    assert cache.event("MODIFIED", obj("a", "5")) is None  # an event older than what we hold
    assert cache.event("DELETED", obj("b", "8")) == "resourceslice b deleted"  # kubelet
    assert cache.event("MODIFIED", obj("a", "9")) == "resourceslice a changed"  # someone's edit
    cache.writing(["a"])
    cache.written([], ["a"], [])
    assert cache.event("DELETED", obj("a", "10")) is None  # our own delete
    assert cache.view() == []
    cache.written([], [], ["c"])  # published while not watching; gone before the watch lists
    cache.stale()
    assert cache.view() == []  # the watch broke: what it saw is trusted for a while
    cache.abandoned()
    assert cache.view() is None  # no watch will come: the passes list
    assert cache.replace([]) == ["resourceslice c missing"]


def test_restart_counters_are_exported_at_zero_from_the_start() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter import SnapshotCollector, View, sink_stats
    from exporter.kube import ResourceSliceSink, SliceConfig
    from topology import Snapshot

    sink = ResourceSliceSink(None, "n1", SliceConfig())  # type: ignore[arg-type]  # no request before publish
    view = View(snapshot=Snapshot(node="n1"), sinks=(sink_stats(sink),))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: view))
    text = generate_latest(registry).decode()
    for reason in RESTART_REASONS:
        assert f'topolink_sink_watch_restarts_total{{reason="{reason}",sink="resource-slices"}} 0.0' in text


@pytest.mark.parametrize(("step", "trusted"), [
    (refused(Unavailable("watch resourceslices: 503 busy")), False),
    (opened(("BOOKMARK", obj("a", "11")), then=Unavailable("watch resourceslices: ReadError")), True)])
def test_a_server_that_fails_the_watch_makes_passes_list_a_broken_stream_does_not(step: Step, trusted: bool) -> None:
    """A watch the server refused or failed (a failing server: passes list, each when the client's back-off
    lets it, and the first one answered finds what changed meanwhile) against a stream that broke after it
    was accepted (a dropped connection: what the watch saw stands, and it resumes from there)."""
    stop = threading.Event()
    cache = SliceCache()
    watch = SliceWatch(ScriptedApi(stop, [obj("a", "5")], "10", [step]), lambda: KIND, fields=FIELDS, cache=cache,
                       wake=lambda _w: None, restarts=Counter(), backoff=Backoff(rng=Top()), stop=stop)
    assert watch.step() == ERROR_WINDOW_S
    assert (cache.view() is not None) is trusted


def test_a_watch_that_carried_a_quiet_node_for_a_while_starts_a_new_streak_when_it_breaks() -> None:
    """No event comes on a quiet node between bookmarks: a stream open for a window before it broke worked, so
    the next break draws from the first window again, not from a doubled one (faults an hour apart are not
    one streak); a stream that breaks at once still doubles it."""
    now = [0.0]
    broken = Unavailable("watch resourceslices: ReadError")

    def lasting() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        now[0] += ERROR_WINDOW_S
        raise broken
    stop = threading.Event()
    api = ScriptedApi(stop, [obj("a", "5")], "10", [lasting, lasting, opened(then=broken), opened(then=broken)])
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=SliceCache(), wake=lambda _w: None,
                       restarts=Counter(), backoff=Backoff(rng=Top()), stop=stop, clock=lambda: now[0])
    assert [watch.step() for _ in range(4)] == [ERROR_WINDOW_S, ERROR_WINDOW_S, 2 * ERROR_WINDOW_S,
                                               4 * ERROR_WINDOW_S]


def test_a_410_after_a_quiet_while_open_lists_again_at_once_even_on_a_watch_from_its_own_list() -> None:
    """A watch opened from its own list on a quiet node (no event yet), open a window, then dropped; its resume
    meets a 410 (the server moved on by more than its window): that is the usual first 410, relisted at once,
    not a watch that cannot be had (which would leave the passes on a list up to TRUST_S old)."""
    now = [0.0]

    def quiet_then_dropped() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "OPEN", {}
        now[0] += ERROR_WINDOW_S
        raise Unavailable("watch resourceslices: ReadError")
    stop = threading.Event()
    api = ScriptedApi(stop, [obj("a", "5")], "10", [quiet_then_dropped, refused(Expired("watch resourceslices: 410"))])
    watch = SliceWatch(api, lambda: KIND, fields=FIELDS, cache=SliceCache(), wake=lambda _w: None,
                       restarts=Counter(), backoff=Backoff(rng=Top()), stop=stop, clock=lambda: now[0])
    assert watch.step() == ERROR_WINDOW_S
    assert watch.step() == 0.0 and len(api.lists) == 1  # a first 410: the state again at once (next step)
    watch.step()
    assert api.watches[-1] == "LIST"
