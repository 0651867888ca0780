"""The fleet controller against a real kube-apiserver behind the fault proxy (``benchmarks/faults.py``'s
controller table, and its smoke run in tests/test_benchmark_faults_controller.py): the same faults, phases and
targets as the agents' fleet (``benchmarks/_fault_fleet.py``'s :func:`run_fault` drives both).

A fleet of N fake Nodes and their slices (``benchmarks._controller_apiserver``, under a tag of its own) is made
straight on the server; one controller (in this process, as ``topolink controller`` runs it: its sync's client
and the Lease's client, each its own connections) reaches the server only through the proxy, which counts what
it sends. With ``damage``, as a fault starts and behind the proxy's back: the controller's objects in its
namespace (the Slurm ConfigMap, the claim templates) are deleted, and one node moves to another NVLink domain
and to a claim class no node had (its slice loses a GPU) or back. Right again is every object the fleet on the
server wants, computed with the controller's own code, there as wanted, and nothing of its own in its namespace
that is not wanted; the steady state is the controller leading with everything right.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks._controller_apiserver import SLICES, MadeFleet, create_fleet, slice_of
from benchmarks.controller import P, lost_gpu
from exporter.kube import Controller, ControllerConfig, LightkubeApi, PublishError, kind_of, wanted
from exporter.kube._controller._sync import MANAGED_BY, MANAGER, contains, ours, served_parts
from exporter.kube._fleet._claims_read import claim_classes
from exporter.kube._fleet._wanted import KINDS, PART_KINDS, Key, key
from tests.apiserver import ApiServer
from tests.fault_proxy import FaultProxy
from tests.fault_sim import CountingTransport, kubeconfig


@dataclass
class ControllerRig:
    server: ApiServer
    proxy: FaultProxy
    made: MadeFleet
    cfg: ControllerConfig
    controller: Controller
    transports: list[CountingTransport]
    admin: LightkubeApi  # straight to the server: what is right is read here, and not counted
    said: list[str]
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    moves: int = 0

    def start(self, seed: int) -> None:
        del seed  # one controller: nothing to spread
        self.thread = threading.Thread(target=self.controller.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.proxy.close()  # ends the watches' streams
        if self.thread is not None:
            self.thread.join(timeout=30)
        with self.server.admin() as http:
            self.made.delete(http)

    def sent(self) -> int:
        return sum(t.sent for t in self.transports)

    def watching(self) -> bool:
        """The steady state: the controller leads, and everything is right."""
        return self.controller.leading and not self.wrong()

    def _wanted(self) -> dict[Key, Any]:
        with self.server.admin() as http:
            nodes = _sure(lambda: http.get("/api/v1/nodes", params={"labelSelector": f"{self.made.prefix}/claim-class"}
                                           )).json()
            slices = _sure(lambda: http.get(SLICES, params={"fieldSelector": f"spec.driver={self.made.prefix}"})).json()
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes["items"]}
        members: dict[str, list[str]] = {}
        for name, held in labels.items():
            members.setdefault(held[f"{self.made.prefix}/claim-class"], []).append(name)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for s in slices["items"]:
            by_node.setdefault(s["spec"]["nodeName"], []).append(s)
        read = claim_classes(members, lambda n: by_node.get(n, []), self.made.prefix)
        on = [p for p, missing in served_parts(self.admin, self.cfg.parts.on()).items() if not missing]
        return dict(wanted(labels, read.classes, self.cfg.parts, on=on).objects)

    def wrong(self) -> list[str]:
        """What is not as the fleet on the server wants it: missing, stale, or of ours and no longer wanted (or
        that the server could not be read: a loaded machine's broken connection, asked again next time)."""
        try:
            return self._wrong()
        except (PublishError, httpx.TransportError) as exc:
            return [f"not read: {exc}"]

    def _wrong(self) -> list[str]:
        want, out = self._wanted(), []
        for k, obj in sorted(want.items()):
            got = self.admin.get(kind_of(obj), obj["metadata"]["name"], obj["metadata"].get("namespace"))
            if got is None or not contains(got, ours(obj)):
                out.append(f"{'missing' if got is None else 'stale'} {'/'.join(k)}")
        for kind in {KINDS[n] for p in self.cfg.parts.on() for n in PART_KINDS[p]}:
            if kind.namespaced:
                for obj in self.admin.list(kind, {MANAGED_BY: MANAGER}, namespace=self.made.tag):
                    obj |= {"apiVersion": kind.api_version, "kind": kind.kind}
                    if key(obj) not in want:
                        out.append(f"not deleted {'/'.join(key(obj))}")
        return out

    def damage(self) -> None:
        """Behind the proxy: the controller's objects in its namespace deleted, and one node moved (its domain
        and its class: to a class no node had, or back)."""
        old, home, away = self.made.moves()
        there = self.moves % 2 == 0
        self.moves += 1
        fewer, new_class = lost_gpu(self.made.slices[old])
        domain, cls = f"{self.made.prefix}/nvlink-domain", f"{self.made.prefix}/claim-class"
        node = self.made.names[old]
        with self.server.admin() as http:
            for kind in ("configmaps", "resourceclaimtemplates"):
                base = "/api/v1" if kind == "configmaps" else "/apis/resource.k8s.io/v1"
                _sure(lambda b=base, k=kind: http.delete(f"{b}/namespaces/{self.made.tag}/{k}",
                                                         params={"labelSelector": f"{MANAGED_BY}={MANAGER}"}))
            made = slice_of(self.made, old, 0, fewer[0]["spec"]["devices"] if there else None)
            path = f"{SLICES}/{made['metadata']['name']}"
            for _ in range(3):  # a conflict: read its resourceVersion again
                read = _sure(lambda: http.get(path)).json()
                made["metadata"]["resourceVersion"] = read["metadata"]["resourceVersion"]
                if (put := _sure(lambda: http.put(path, json=made))).status_code != 409:
                    break
            assert put.status_code == 200, put.text
            labels = {domain: away if there else home,
                      cls: new_class if there else self.made.labels[old][f"{P}/claim-class"]}
            got = _sure(lambda: http.patch(f"/api/v1/nodes/{node}", json={"metadata": {"labels": labels}},
                                           headers={"Content-Type": "application/merge-patch+json"}))
            assert got.status_code == 200, got.text


def _sure(send: Callable[[], httpx.Response]) -> httpx.Response:
    """The harness's own request, straight to the server (not through the proxy), tried again on a broken
    connection or a busy server's 429 and 5xx (a loaded machine's, not what is measured)."""
    for attempt in range(3):
        try:
            got = send()
        except httpx.TransportError:
            if attempt == 2:
                raise
            continue
        if got.status_code not in (429, 500, 503, 504) or attempt == 2:  # a loaded server's, not the fault's
            return got
    raise AssertionError("unreachable")


def controller_rig(server: ApiServer, nodes: int, tmp: Path, tag: str, claims: bool = True) -> ControllerRig:
    """A fleet of ``nodes`` made under ``tag`` and a controller for it behind a fault proxy (not started).
    ``claims``: its claim part too (the DeviceClasses are cluster-wide: a shared server's tests run without)."""
    pki = server.root / "pki"
    ctx = ssl.create_default_context(cafile=str(server.ca))
    proxy = FaultProxy(server.url, verify=ctx, certfile=str(pki / "serving.crt"), keyfile=str(pki / "serving.key"))
    with server.admin() as http:
        made = create_fleet(http, tag=tag, nodes=nodes)
    cfg = made.config(tag, claims, kueue=False, kai=False, volcano=False)
    config = kubeconfig(tmp / f"{tag}.kubeconfig", proxy.url, server.token, server.ca)
    transports = [CountingTransport(time.monotonic, verify=ctx) for _ in range(2)]
    api, lease_api = (LightkubeApi.connect(kubeconfig=config, transport=t, manager=MANAGER) for t in transports)
    said: list[str] = []
    admin = LightkubeApi.connect(kubeconfig=str(server.kubeconfig()), manager=MANAGER)
    return ControllerRig(server, proxy, made, cfg, Controller(api, cfg, said.append, lease_api=lease_api),
                         transports, admin, said)


def steady(rig: ControllerRig, timeout: float) -> None:
    """Wait for the first sync's objects (the controller started)."""
    deadline = time.monotonic() + timeout
    while not rig.watching():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the controller did not reach the steady state in {timeout:g} s: {rig.said[-5:]}")
        time.sleep(0.5)


__all__ = ["ControllerRig", "controller_rig", "steady"]
