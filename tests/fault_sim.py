"""One agent's publishing loop (the label and slice sinks every interval, the slice watch between) on a
simulated clock, against a server behind :class:`tests.fault_proxy.FaultProxy`: ten minutes of a fault take as
long as the requests do. Every request the agent's client tries is counted at its transport (a refused
connection included).

The loop is the agent's: a pass every ``interval`` seconds of the simulated clock; the watch steps whenever
it said it would (:meth:`SliceWatch.step`), or at once when a request is answered after the client failed (the
poke of :meth:`SliceWatch.poke`, as in its thread); the client's back-off sleeps on the same clock. The watch is
never stepped while the proxy forwards watches (it would block on a healthy stream): the fault starts with
the watch about to open, as after the agent starts or the server restarts.
"""

from __future__ import annotations

import json
import math
import random
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

import topology as t
from exporter.kube import Backoff, LabelConfig, LightkubeApi, NodeLabelSink, ResourceSliceSink, SliceConfig
from exporter.kube._client._client import KEEPALIVE_S
from exporter.kube._sinks._slice_watch import ERROR_WINDOW_S, SliceWatch
from tests.fault_proxy import FaultProxy

FAULTS = ("500", "429", "refuse", "410", "bookmark-410")
PASSES = 10  # ten minutes of one-minute passes: the steady state sends one request each (the Node's GET)


def request_bound(fault: str, seconds: float = 600.0) -> int:
    """The most requests ``seconds`` of ``fault`` may cost one agent passing once a minute. A failing server gets the
    passes' requests and no more: a request a pass at most (a call tries again only when the server said when, and
    the 429 here asks for 30 s, longer than a call waits), none before the client's next try is due, and none from
    the watch, which waits for the server to answer a pass.

    With a 410 on every watch (after a bookmark or not) no watch can be had while every list is answered: a
    bookmark interval after the watch's last list its store is not trusted, so each pass lists for itself (two
    requests a pass, not one), and the watch tries again on its back-off. The fault starts with the watch about
    to open: its first state is a list, then a 410; it relists at once (a watch list the server breaks or
    ignores, then a list and a watch); then a list and a watch each back-off step, counted here at the lowest
    draws of its jitter (the most that fit)."""
    passes = math.ceil(seconds / 60.0)
    if fault not in ("410", "bookmark-410"):
        return passes
    lowest = Backoff(rng=_Lowest())
    steps, at, n = 0, 0.0, 2
    while at + (wait := lowest.delay(n, None, floor=ERROR_WINDOW_S)) < seconds:
        at, steps, n = at + wait, steps + 1, n + 1
    return 2 * passes + 5 + 2 * steps


class _Lowest(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return a


@dataclass
class SimClock:
    now_s: float = 0.0

    def now(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += max(seconds, 0.0)


class CountingTransport(httpx2.HTTPTransport):
    """Counts every request tried, before it is sent: one that is refused counts too."""

    def __init__(self, now: Callable[[], float], **kw: Any) -> None:
        kw.setdefault("limits", httpx2.Limits(keepalive_expiry=KEEPALIVE_S))  # as the client's own transport
        super().__init__(**kw)
        self.sent, self.now = 0, now
        self.log: list[tuple[float, str]] = []  # (``now()``, what) of every request

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent += 1
        watch = "watch=true" in str(request.url)
        self.log.append((self.now(), f"{'WATCH' if watch else request.method} {request.url.path}"))
        return super().handle_request(request)


@dataclass
class SimAgent:
    snap: t.Snapshot
    api: LightkubeApi
    transport: CountingTransport
    clock: SimClock
    sinks: tuple[NodeLabelSink, ResourceSliceSink]
    watch: SliceWatch
    woken: list[str] = field(default_factory=list)
    poked: bool = False  # the client's backoff reset since the watch last stepped


def kubeconfig(where: Path, server: str, token: str, ca: Path) -> str:
    import base64

    ca_data = base64.b64encode(ca.read_bytes()).decode()
    where.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}]}))
    return str(where)


def sim_agent(snap: t.Snapshot, *, server: str | None = None, config: str | None = None, ca: Path | None = None,
              seed: int = 1) -> SimAgent:
    clock = SimClock()
    transport = CountingTransport(clock.now, verify=ssl.create_default_context(cafile=str(ca)) if ca else True)

    def backoff(n: int) -> Backoff:
        return Backoff(clock=clock.now, sleep=clock.sleep, rng=random.Random(seed * 7 + n))

    api = LightkubeApi.connect(server=server, kubeconfig=config, backoff=backoff(0), transport=transport)
    labels = NodeLabelSink(api, snap.node, LabelConfig())
    slices = ResourceSliceSink(api, snap.node, SliceConfig(), taints=False, clock=clock.now)
    agent = SimAgent(snap, api, transport, clock, (labels, slices), watch=None)  # type: ignore[arg-type]
    agent.watch = slices.watcher(threading.Event(), agent.woken.append, backoff(1))

    def poked() -> None:
        agent.poked = True
    api.on_answer(poked)
    return agent


def publish(agent: SimAgent) -> list[bool]:
    return [s.publish(agent.snap).ok for s in agent.sinks]


def run_fault(agent: SimAgent, proxy: FaultProxy, fault: str, seconds: float = 600.0,
              interval: float = 60.0, *, midway: Callable[[], None] | None = None) -> int:
    """Passes and watch steps for ``seconds`` of simulated time under ``fault``; the requests the agent tried.
    ``midway`` runs once, halfway through (behind the proxy: kubelet wiping the node's slices)."""
    proxy.mode = fault
    clock, start = agent.clock, agent.transport.sent
    end = clock.now_s + seconds
    next_pass = next_watch = clock.now_s
    half = clock.now_s + seconds / 2
    try:
        while min(next_pass, next_watch) < end:
            clock.now_s = max(clock.now_s, min(next_pass, next_watch))
            if midway is not None and clock.now_s >= half:
                midway, hook = None, midway
                hook()
            if next_pass <= next_watch:
                publish(agent)
                next_pass += interval
            else:
                agent.poked = False
                wait = agent.watch.step()
                next_watch = clock.now_s + wait
            if agent.poked:
                next_watch = min(next_watch, clock.now_s)
    finally:
        proxy.mode = "none"
    return agent.transport.sent - start
