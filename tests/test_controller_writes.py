"""The controller's writes spread (``_controller._limit`` and ``_controller._queue``), on a simulated clock: a
rack of 72 nodes of a class no node had joins one by one over seven seconds while the controller's queue, its
write gate and its sync run as the controller runs them; the writes are counted against the token bucket's
bound, each object is written no more often than the queue's cap allows, and the fleet ends with exactly the
objects it wants. No sleep: the clock moves only when the simulation moves it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from benchmarks.controller import lost_gpu
from exporter.kube import Kind, Parts, wanted
from exporter.kube._controller._limit import TokenBucket, WriteGate
from exporter.kube._controller._queue import SyncQueue
from exporter.kube._controller._sync import sync
from exporter.kube._fleet._claims_read import claim_classes
from tests.kube_memory import MemoryApi

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"
P = "gpu.topology"
NS = {"resourceclaimtemplates": "default", "configmaps": "default"}
PARTS = ["claims", "kueue", "volcano", "slurm"]  # the parts MemoryApi serves
QPS, BURST, DELAY, MOST = 1.0, 2, 1.0, 5.0  # a small bucket: the rack's writes are more than a burst


class Sim:
    """The simulated clock, the fleet as the controller's stores hold it, and the joins still to come."""

    def __init__(self, joins: list[tuple[float, str, dict[str, str], list[dict[str, Any]]]]) -> None:
        self.now = 0.0
        items = json.loads(FLEET.read_text())["items"]
        self.nodes = {o["metadata"]["name"]: o["metadata"]["labels"] for o in items if o["kind"] == "Node"}
        self.slices: dict[str, list[dict[str, Any]]] = {}
        for o in items:
            if o["kind"] == "ResourceSlice":
                self.slices.setdefault(o["spec"]["nodeName"], []).append(o)
        self.joins = sorted(joins, key=lambda j: j[0])
        self.queue = SyncQueue(DELAY, clock=lambda: self.now, most=MOST)

    def advance(self, seconds: float) -> None:
        """Time passes; the nodes whose time comes join (each a change, as the informer calls it)."""
        until = self.now + max(seconds, 0.0)
        while self.joins and self.joins[0][0] <= until:
            at, name, labels, slices = self.joins.pop(0)
            self.now = max(self.now, at)
            self.nodes[name], self.slices[name] = labels, slices
            self.queue.add()
        self.now = until

    def wanted(self) -> dict[Any, Any]:
        members: dict[str, list[str]] = {}
        for name, labels in self.nodes.items():
            if cls := labels.get(f"{P}/claim-class"):
                members.setdefault(cls, []).append(name)
        read = claim_classes(members, lambda n: self.slices.get(n, []), P)
        return wanted(self.nodes, read.classes, Parts(gpus=(2, 4, 8))).objects


class TimedApi(MemoryApi):
    def __init__(self, sim: Sim) -> None:
        super().__init__()
        self.sim, self.at = sim, list[tuple[float, str]]()

    def apply(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        self.at.append((self.sim.now, f"{kind.kind}/{obj['metadata']['name']}"))
        return super().apply(kind, obj)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self.at.append((self.sim.now, f"{kind.kind}/{name}"))
        super().delete(kind, name, namespace)


def _rack(n: int, span: float) -> list[tuple[float, str, dict[str, str], list[dict[str, Any]]]]:
    """``n`` trays of a new rack (a new NVLink domain, a claim class no node had) joining over ``span`` s."""
    sim = Sim([])
    slices, cls = lost_gpu(sim.slices["tray-00"])  # every tray of the rack lost a GPU: a class no node had
    labels = sim.nodes["tray-00"]
    out = []
    for i in range(n):
        name = f"rack9-{i:02d}"
        held = labels | {"kubernetes.io/hostname": name, f"{P}/nvlink-domain": "rack9.1", f"{P}/rack": "rack9",
                         f"{P}/claim-class": cls}
        out.append((i * span / n, name, held, [s | {"spec": s["spec"] | {"nodeName": name}} for s in slices]))
    return out


def test_a_rack_joining_node_by_node_is_written_within_the_bucket_and_ends_right() -> None:
    sim = Sim(_rack(72, 7.2))
    api, said = TimedApi(sim), list[str]()
    before = sync(api, sim.wanted(), PARTS, NS)  # the fleet as it was, written before the rack comes
    assert before.applied
    api.at.clear()
    lost = threading.Event()
    gate = WriteGate(TokenBucket(QPS, BURST, clock=lambda: sim.now), lost, sim.queue.pending, said.append,
                     sleep=sim.advance)
    syncs = 0
    while sim.joins or sim.queue.pending():  # the controller's loop, on the simulated clock
        due = sim.queue.due()
        if due is None or (sim.joins and sim.joins[0][0] < due):
            sim.advance(sim.joins[0][0] - sim.now)
            continue
        sim.advance(due - sim.now)
        if (due := sim.queue.due()) is not None and due <= sim.now:
            assert sim.queue.get(lost)
            sync(api, sim.wanted(), PARTS, NS, leading=gate)
            syncs += 1
    times = [t for t, _ in api.at]
    assert times, "the rack wrote nothing"
    for i, start in enumerate(times):  # from any write to any later: the burst and the tokens gained meanwhile
        for j in range(i, len(times)):
            assert j - i + 1 <= BURST + QPS * (times[j] - start) + 1e-9, api.at
    per_second = [sum(1 for t in times if s <= t < s + 1.0) for s in times]
    assert max(per_second) <= BURST + QPS, api.at  # writes a second: at most the burst and a second's tokens
    assert len(times) > BURST + QPS  # the rack's writes are more than one burst: the bucket spread them
    assert gate.stopped >= 1 and any("a newer change is queued" in s for s in said)  # stopped, not stale
    written: dict[str, int] = {}
    for _, what in api.at:
        written[what] = written.get(what, 0) + 1
    # the rack took 7.2 s: a sync at the queue's cap (5 s), the next after the last join (and the rest of
    # what the bucket held back): no object is written a third time (one a second would be 7 times)
    assert max(written.values()) <= 2, written
    assert any(w.startswith("ResourceClaimTemplate/") for w in written) and syncs <= 6, (syncs, written)
    final = sim.wanted()
    again = sync(api, final, PARTS, NS)  # the end: exactly what the whole fleet wants, nothing left to write
    assert not again.applied and not again.deleted and again.unchanged == len(
        [o for o in final.values() if o["kind"] != "Topology" or o["apiVersion"].startswith("kueue")])


def test_the_bucket_lets_its_burst_through_then_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(5.0, 10, clock=lambda: now[0])
    assert sum(bucket.try_take() for _ in range(20)) == 10
    assert bucket.wait_s() == pytest.approx(0.2)
    now[0] += 1.0
    assert sum(bucket.try_take() for _ in range(20)) == 5
    now[0] += 100.0
    assert sum(bucket.try_take() for _ in range(20)) == 10  # never more than the burst saved up
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(0, 1)


def test_a_write_waiting_for_its_token_ends_at_once_when_leadership_is_lost() -> None:
    bucket = TokenBucket(1e-6, 1)  # one token, the next in eleven days
    assert bucket.try_take()
    lost, got = threading.Event(), list[bool]()
    gate = WriteGate(bucket, lost, lambda: False, lambda _: None)
    waiter = threading.Thread(target=lambda: got.append(gate()))
    waiter.start()
    lost.set()
    waiter.join(timeout=10)
    assert got == [False] and gate.written == 0


def test_changes_move_the_sync_up_to_the_cap_and_an_explicit_ask_stands() -> None:
    now = [0.0]
    queue = SyncQueue(1.0, clock=lambda: now[0], most=5.0)
    queue.add()
    assert queue.due() == 1.0
    for t in (0.5, 1.4, 2.3, 3.2, 4.1, 4.9):  # a change before each due moves it
        now[0] = t
        queue.add()
    assert queue.due() == 5.0  # the cap: the first change's time and 5 s
    queue.add(after=0.0)
    assert queue.due() == 4.9 and queue.get(threading.Event())  # an explicit ask (a resync) stands
    assert not queue.pending()
    assert SyncQueue(1.0, clock=lambda: now[0]).due() is None
    plain = SyncQueue(1.0, clock=lambda: now[0])  # no cap asked: the first change's delay stands
    plain.add()
    now[0] += 0.5
    plain.add()
    assert plain.due() == pytest.approx(now[0] + 0.5)
