"""Many agents' publishing loops in one process, in real time, against a real kube-apiserver behind the fault
proxy (``tests/fault_proxy.py``): each agent its own node, its own client (its own connections) and the
label and slice sinks, a pass every interval (first passes spread over one interval) and the slice watch in
a thread of its own that wakes the pass, as ``topolink serve`` runs them.

For a fault: a steady phase, the fault (with ``damage``, every node's slices are deleted and one of its labels
removed behind the proxy's back as it starts, as a kubelet restart and a careless person would), then the time
until every node's labels and slices are right again. The proxy counts what reached the server, per second.
"""

from __future__ import annotations

import random
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from exporter.kube import LabelConfig, LightkubeApi, NodeLabelSink, ResourceSliceSink, SliceConfig
from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, create_node
from tests.fault_proxy import FaultProxy
from tests.fault_sim import CountingTransport, kubeconfig
from tests.kmock_support import a100_node

COUNT_LABEL = "gpu.topology/gpu.count"
MANAGED = "app.kubernetes.io/managed-by"


@dataclass
class Agent:
    node: str
    labels: NodeLabelSink
    slices: ResourceSliceSink
    transport: CountingTransport
    wake: threading.Event = field(default_factory=threading.Event)


@dataclass
class Phase:
    name: str
    seconds: float
    rate: float  # requests a second the server received, mean
    peak: float  # the highest mean over any window of ``window`` seconds
    sent: int  # requests the agents tried (refused connections included)


@dataclass
class Fleet:
    server: ApiServer
    proxy: FaultProxy
    agents: list[Agent]
    interval: float
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self, seed: int) -> None:
        rng = random.Random(seed)
        for a in self.agents:
            offset = rng.uniform(0, self.interval)
            self.threads += [threading.Thread(target=self._passes, args=(a, offset), daemon=True),
                             threading.Thread(target=a.slices.watch, args=(self.stop, lambda _w, a=a: a.wake.set()),
                                              daemon=True)]
        for t in self.threads:
            t.start()

    def _passes(self, a: Agent, offset: float) -> None:
        snap = a100_node(a.node)
        if self.stop.wait(offset):
            return
        while not self.stop.is_set():
            a.labels.publish(snap)
            a.slices.publish(snap)
            a.wake.wait(self.interval)
            a.wake.clear()

    def close(self) -> None:
        self.stop.set()
        for a in self.agents:
            a.wake.set()
            a.slices.wake_watch()
        self.proxy.close()  # ends the watches' streams
        for t in self.threads:
            t.join(timeout=5)

    def watching(self) -> bool:
        """Every agent's slice watch is alive (its passes plan against its store): the steady state."""
        return all(a.slices.cache.view() is not None for a in self.agents)

    def sent(self) -> int:
        return sum(a.transport.sent for a in self.agents)

    def wrong(self) -> list[str]:
        """Nodes whose labels or slices are not what their agent publishes."""
        with self.server.admin() as http:
            nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                     for n in http.get("/api/v1/nodes").json()["items"]}
            slices = http.get(SLICES, params={"fieldSelector": "spec.driver=gpu.topology"}).json()["items"]
        have: dict[str, int] = {}
        for s in slices:
            if (s["metadata"].get("labels") or {}).get(MANAGED) == "topolink":
                have[s["spec"]["nodeName"]] = have.get(s["spec"]["nodeName"], 0) + 1
        return [a.node for a in self.agents if nodes.get(a.node, {}).get(COUNT_LABEL) != "4" or have.get(a.node) != 1]

    def damage(self) -> None:
        """Behind the proxy: every node's slices deleted and the GPU count label removed (each request tried
        again on a broken connection: the harness's own, on a loaded machine, is not what is measured)."""
        import httpx

        def sure(send: Any) -> None:
            for attempt in range(3):
                try:
                    send()
                    return
                except httpx.TransportError:
                    if attempt == 2:
                        raise
        with self.server.admin() as http:
            sure(lambda: http.delete(SLICES, params={"fieldSelector": "spec.driver=gpu.topology"}))
            for a in self.agents:
                sure(lambda a=a: http.patch(f"/api/v1/nodes/{a.node}",
                                            json={"metadata": {"labels": {COUNT_LABEL: None}}},
                                            headers={"Content-Type": "application/merge-patch+json"}))


def fleet(server: ApiServer, n: int, interval: float, tmp: Path, prefix: str) -> Fleet:
    pki = server.root / "pki"
    ctx = ssl.create_default_context(cafile=str(server.ca))
    proxy = FaultProxy(server.url, verify=ctx, certfile=str(pki / "serving.crt"), keyfile=str(pki / "serving.key"))
    agents = []
    with server.admin() as http:
        for i in range(n):
            node = f"{prefix}-{i:04d}"
            create_node(http, node)
            transport = CountingTransport(time.monotonic, verify=ctx)
            config = kubeconfig(tmp / f"{node}.kubeconfig", proxy.url, server.token, server.ca)
            api = LightkubeApi.connect(kubeconfig=config, transport=transport)
            agents.append(Agent(node, NodeLabelSink(api, node, LabelConfig()),
                                ResourceSliceSink(api, node, SliceConfig(), taints=False), transport))
    return Fleet(server, proxy, agents, interval)


def rates(received: list[float], start: float, end: float, window: float) -> tuple[float, float]:
    """Mean requests a second over [start, end), and the highest mean over any ``window`` seconds in it."""
    inside = sorted(t for t in received if start <= t < end)
    mean = len(inside) / max(end - start, 1e-9)
    peak, j = 0.0, 0
    for i, t in enumerate(inside):
        while inside[j] < t - window:
            j += 1
        peak = max(peak, (i - j + 1) / window)
    return mean, peak if end - start >= window else mean


class Rig(Protocol):
    """What :func:`run_fault` drives: the agents' fleet, or the fleet controller (``benchmarks._fault_controller``)."""

    proxy: FaultProxy

    def watching(self) -> bool: ...
    def sent(self) -> int: ...
    def wrong(self) -> list[str]: ...
    def damage(self) -> None: ...


def run_fault(f: Rig, fault: str, *, before: float, during: float, settle_max: float,
              window: float, damage: bool = True) -> Iterator[Phase | tuple[str, Any]]:
    """Yields the phases (before, during, and after: until recovered, ``before`` seconds at least) and then
    ``("recovered_s", seconds or None)``. ``damage``: every node's slices and a label removed as the fault
    starts (their repair is part of the load during it); without, the load is the fault's alone. The steady
    phase starts once every agent's watch is back from the last fault (``settle_max`` at most)."""
    settled = time.monotonic() + settle_max
    while not f.watching() and time.monotonic() < settled:
        time.sleep(1.0)
    t0, s0 = time.monotonic(), f.sent()
    time.sleep(before)
    t1, s1 = time.monotonic(), f.sent()
    f.proxy.mode = fault
    if damage:
        f.damage()
    time.sleep(during)
    t2, s2 = time.monotonic(), f.sent()
    f.proxy.mode = "none"
    recovered: float | None = None
    while time.monotonic() - t2 < settle_max:
        if not f.wrong():
            recovered = time.monotonic() - t2
            break
        time.sleep(1.0)
    time.sleep(max(0.0, t2 + before - time.monotonic()))
    t3, s3 = time.monotonic(), f.sent()
    got = list(f.proxy.received)
    for name, a, b, sa, sb in (("before", t0, t1, s0, s1), ("during", t1, t2, s1, s2), ("after", t2, t3, s2, s3)):
        mean, peak = rates(got, a, b, window)
        yield Phase(name, b - a, mean, peak, sb - sa)
    yield ("recovered_s", recovered)
