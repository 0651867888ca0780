"""The fleet controller's parts without a server: what is wanted (the code ``topolink cluster`` runs), the sync's
minimal writes and its ownership rules, the coalescing queue, leader election's takeover rule, and the command's
refusals. The real API server tier is ``tests/test_apiserver_controller.py``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from exporter.kube import Kind, LeaseTimes, Parts, kind_of, wanted
from exporter.kube._controller._controller import Controller, ControllerConfig
from exporter.kube._controller._lease import LeaderElector
from exporter.kube._controller._queue import SyncQueue
from exporter.kube._controller._sync import MANAGER, contains, sync
from exporter.kube._fleet._claims_read import claim_classes
from tests.kube_memory import MemoryApi

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"
P = "gpu.topology"
NS = {"resourceclaimtemplates": "default", "configmaps": "default"}


def _fleet() -> tuple[dict[str, dict[str, str]], dict[str, list[dict[str, Any]]]]:
    items = json.loads(FLEET.read_text())["items"]
    nodes = {o["metadata"]["name"]: o["metadata"]["labels"] for o in items if o["kind"] == "Node"}
    slices: dict[str, list[dict[str, Any]]] = {}
    for o in items:
        if o["kind"] == "ResourceSlice":
            slices.setdefault(o["spec"]["nodeName"], []).append(o)
    return nodes, slices


def _wanted(nodes: dict[str, dict[str, str]], slices: dict[str, list[dict[str, Any]]], parts: Parts) -> Any:
    members: dict[str, list[str]] = {}
    for name, labels in nodes.items():
        if cls := labels.get(f"{P}/claim-class"):
            members.setdefault(cls, []).append(name)
    read = claim_classes(members, lambda n: slices.get(n, []), P)
    assert not read.problems
    return wanted(nodes, read.classes, parts)


def test_wanted_holds_every_part_once_and_each_switches_off() -> None:
    nodes, slices = _fleet()
    every = _wanted(nodes, slices, Parts(gpus=(2, 4)))
    kinds = [o["kind"] for o in every.objects.values()]
    assert kinds.count("DeviceClass") == 2  # two sizes want the same DeviceClasses: once
    assert {"ResourceClaimTemplate", "Topology", "ResourceFlavor", "HyperNode", "ConfigMap"} <= set(kinds)
    assert {kind_of(o).group for o in every.objects.values() if o["kind"] == "Topology"} == {
        "kueue.x-k8s.io", "kai.scheduler"}
    for part in ("claims", "kueue", "kai", "volcano", "slurm"):
        without = _wanted(nodes, slices, Parts(gpus=(2, 4), **{part: False}))
        gone = set(every.objects) - set(without.objects)
        assert gone and not set(without.objects) - set(every.objects), part


def test_a_fleet_with_no_two_node_domain_wants_no_slurm_configmap_and_says_why() -> None:
    nodes, slices = _fleet()
    hgx = {n: labels for n, labels in nodes.items() if n.startswith("hgx")}
    made = _wanted(hgx, slices, Parts())
    assert "ConfigMap" not in {o["kind"] for o in made.objects.values()}
    assert any(note.startswith("slurm: no ConfigMap: no NVLink domain holds two nodes") for note in made.notes)


def test_sync_writes_only_the_difference_and_deletes_only_its_own() -> None:
    nodes, slices = _fleet()
    api = MemoryApi()
    parts = ["claims", "kueue", "volcano", "slurm"]
    every = _wanted(nodes, slices, Parts()).objects
    first = sync(api, every, parts, NS)
    assert len(first.applied) == len([o for o in every.values() if o["kind"] != "Topology"
                                      or kind_of(o).group == "kueue.x-k8s.io"])
    api.writes.clear()
    again = sync(api, every, parts, NS)
    assert not api.writes and not again.applied and again.unchanged == len(first.applied)
    # an object carrying our label that another manager made is never deleted
    flavor = Kind("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors")
    api.put(flavor, {"metadata": {"name": "theirs", "labels": {"app.kubernetes.io/managed-by": MANAGER}}}, "kubectl")
    del nodes["hgx-0"], nodes["hgx-1"]
    fewer = _wanted(nodes, slices, Parts()).objects
    result = sync(api, fewer, parts, NS)
    gone = {k for k, o in every.items() if k not in fewer and kind_of(o).group != "kai.scheduler"}
    assert result.deleted and set(result.deleted) == gone
    assert any(o["kind"] == "ResourceClaimTemplate" for k, o in every.items() if k in gone)
    assert api.get(flavor, "theirs") is not None


def test_an_object_of_the_same_name_another_manager_made_is_left_alone() -> None:
    nodes, slices = _fleet()
    api = MemoryApi()
    every = _wanted(nodes, slices, Parts()).objects
    cm = next(o for o in every.values() if o["kind"] == "ConfigMap")
    kind = kind_of(cm)
    api.put(kind, {**cm, "metadata": {**cm["metadata"], "labels": {"app.kubernetes.io/managed-by": "helm"}},
                   "data": {"topology.yaml": "theirs"}}, "helm")
    result = sync(api, every, ["slurm"], NS)
    assert not result.applied and result.left_alone == ["ConfigMap default/topolink-slurm-topology (managed by helm)"]
    assert api.get(kind, cm["metadata"]["name"], "default")["data"] == {"topology.yaml": "theirs"}  # type: ignore[index]


def test_a_sync_stops_writing_when_leadership_ends() -> None:
    nodes, slices = _fleet()
    api = MemoryApi()
    result = sync(api, _wanted(nodes, slices, Parts()).objects, ["claims"], NS, leading=lambda: False)
    assert not api.writes and not result.applied


def test_contains_reads_the_servers_defaults_as_no_difference() -> None:
    assert contains({"a": 1, "b": {"c": [{"d": 1, "e": 2}]}}, {"b": {"c": [{"d": 1}]}})
    assert not contains({"b": {"c": [{"d": 1}, {"d": 2}]}}, {"b": {"c": [{"d": 1}]}})
    assert not contains({"a": "1"}, {"a": 1})
    assert not contains({}, {"a": None})


def test_the_queue_coalesces_adds_into_one_sync_after_the_delay() -> None:
    now = [0.0]
    queue, stop = SyncQueue(1.0, clock=lambda: now[0]), threading.Event()
    for _ in range(100):
        queue.add()
    got: list[bool] = []
    threading.Thread(target=lambda: got.append(queue.get(stop, poll=0.01))).start()
    now[0] = 1.0
    threading.Event().wait(0.1)  # let the waiter see the clock
    stop.set()
    assert got == [True]
    assert queue.get(stop) is False  # taken once: nothing left, stop ends the wait
    queue.add(after=5.0)
    queue.add(after=0.0)  # an earlier ask stands
    assert queue.get(threading.Event(), poll=0.01) is True


def test_lease_taken_only_after_the_holders_silence_lasts_its_duration() -> None:
    now = [100.0]
    api, said = MemoryApi(), []
    times = LeaseTimes()
    a, b = (LeaderElector(api, name="l", namespace="n", identity=who, times=times,  # type: ignore[arg-type]
                          log=said.append, clock=lambda: now[0]) for who in ("a", "b"))
    assert a._try() and not b._try()
    now[0] += 14.0
    assert a._try()  # renewed
    now[0] += 1.0
    assert not b._try()  # b sees the renewal now (its own clock): the 15 s start again
    now[0] += 14.0
    assert not b._try()
    now[0] += 1.5
    assert b._try()  # a silent for 15 s as b saw it
    assert not a._try()
    lease = api.objects[("leases.coordination.k8s.io", "n", "l")]["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1


def test_lease_times_follow_client_gos_rule() -> None:
    with pytest.raises(ValueError, match="duration"):
        LeaseTimes(duration=10, renew_deadline=10, retry=2)
    with pytest.raises(ValueError, match="retry"):
        LeaseTimes(duration=15, renew_deadline=2, retry=2)


def test_a_part_not_served_is_said_once_until_it_changes() -> None:
    said: list[str] = []
    ctl = Controller(MemoryApi(), ControllerConfig(), said.append)  # type: ignore[arg-type]
    assert ctl._say({"kai": "topologies.kai.scheduler/v1alpha1", "claims": ""}) == ["claims"]
    ctl._say({"kai": "topologies.kai.scheduler/v1alpha1", "claims": ""})
    assert [s for s in said if s.startswith("kai")] == [
        "kai: not written: the server does not serve topologies.kai.scheduler/v1alpha1 (install its CRDs, or switch "
        "it off with --no-kai)"]
    ctl._say({"kai": "", "claims": ""})
    assert said[-1] == "kai: served: kept current"


@pytest.mark.parametrize(("args", "says"), [
    (["--lease-duration", "5", "--renew-deadline", "6"], "duration (5.0 s) > renew deadline (6.0 s)"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig"),
])
def test_the_command_refuses_in_one_line(args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "agent.cli", "controller", *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


class FleetApi(MemoryApi):
    """A fleet's Nodes and slices to list and watch (the watch quiet), and applies failing ``fail`` times with
    a 429 whose Retry-After is ``after``."""

    def __init__(self, fail: int, after: float) -> None:
        super().__init__()
        self.fail, self.after, self.failed_at = fail, after, list[float]()
        items = json.loads(FLEET.read_text())["items"]
        self.fleet = {"nodes": [o for o in items if o["kind"] == "Node"],
                      "resourceslices": [o for o in items if o["kind"] == "ResourceSlice"]}
        self.quiet = threading.Event()

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str], *,
                       namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
        return json.loads(json.dumps(self.fleet.get(kind.plural, []))), "1"  # no pods, no claims

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False, *, namespace: str | None = None) -> Any:
        yield "OPEN", {}
        self.quiet.wait(0.2)

    def apply(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        import time

        from exporter.kube import Unavailable

        if self.fail:
            self.fail -= 1
            self.failed_at.append(time.monotonic())
            err = Unavailable("apply: 429 too many requests")
            err.retry_after = self.after
            raise err
        return super().apply(kind, obj)


def test_a_failing_server_is_tried_again_no_sooner_than_it_asked_and_never_given_up() -> None:
    import time

    api, said = FleetApi(fail=2, after=0.4), list[str]()
    ctl = Controller(api, ControllerConfig(delay_s=0.05, resync_s=3600), said.append)  # type: ignore[arg-type]
    lost = threading.Event()
    worker = threading.Thread(target=ctl.lead, args=(lost,), daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while not any(o["kind"] == "ResourceClaimTemplate" for o in api.objects.values()):
            assert time.monotonic() < deadline, said
            time.sleep(0.05)
    finally:
        lost.set()
        worker.join(timeout=5)
    gaps = [b - a for a, b in zip(api.failed_at, api.failed_at[1:], strict=False)]
    assert len(api.failed_at) == 2 and all(g >= 0.4 for g in gaps), gaps
    assert sum("sync: apply: 429 too many requests; again in" in line for line in said) == 2, said
    said_out = [line for line in said if line.startswith("left out: class ")]
    assert any("no switch template for 2 GPUs: no PCIe switch joins GPUs" in line for line in said_out), said
