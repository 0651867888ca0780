"""The fleet controller against a real kube-apiserver (``benchmarks.controller --apiserver``): N fake Nodes (the
saved GB200-racks fleet's labels, repeated as ``benchmarks.controller.fleet`` repeats them) and their slices of
the agents' driver are created, the controller (in this process, its own client, default ``--delay`` 1 s) leads,
lists once and syncs; then one node's labels are patched (its NVLink domain: its Slurm block, its Kueue and
Volcano levels) and the time until the controller's objects reflect it (the Slurm ConfigMap names the node in
its new block) is measured, ``changes`` times; then, with the claims part, a node moves to a claim class no node
had and back (:func:`class_changes`: the new class's templates made, then deleted), ``classes`` times. Everything
is named under a tag of its own (label prefix, driver, namespace, node names), so a shared server's other objects
are neither read nor touched, and it is deleted after.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from exporter.kube import Controller, ControllerConfig, LeaseTimes, LightkubeApi, Parts
from exporter.kube._desired._claims import ClaimConfig

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CONFIGMAP = "/api/v1/namespaces/{ns}/configmaps/topolink-slurm-topology"


@dataclass(frozen=True, slots=True)
class Figures:
    nodes: int
    create_s: float  # the fleet's Nodes and slices created (the harness, not the controller)
    first_sync_s: float  # lead taken, everything listed, every object written
    changes_s: list[float]  # label patched -> the Slurm ConfigMap reflects it
    new_class_s: list[float] = field(default_factory=list)  # a node to a class no node had -> its templates made
    class_gone_s: list[float] = field(default_factory=list)  # ... and back -> the lone class's templates deleted

    def table(self) -> str:
        def cell(took: list[float]) -> str:
            return f"{statistics.median(took):.2f} / {max(took):.2f} ({len(took)})" if took else "not run"
        return ("| nodes | create (s) | first sync (s) | label change reflected: median / max (s) (changes) | "
                "new class: its templates made | class gone: its templates deleted |\n|---|---|---|---|---|---|\n"
                f"| {self.nodes} | {self.create_s:.1f} | {self.first_sync_s:.1f} | {cell(self.changes_s)} | "
                f"{cell(self.new_class_s)} | {cell(self.class_gone_s)} |  (measured)")


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def _block_of(http: httpx.Client, ns: str, node: str) -> str | None:
    got = http.get(CONFIGMAP.format(ns=ns))
    if got.status_code != 200:
        return None
    for entry in yaml.safe_load(got.json()["data"]["topology.yaml"]) or []:
        for block in (entry.get("block") or {}).get("blocks") or []:
            if node in str(block.get("nodes", "")).split(","):
                return str(block["block"])
    return None


@dataclass(frozen=True, slots=True)
class MadeFleet:
    """A fleet made on a server under ``tag``: the label prefix and driver ``<tag>.topology``, node ``<tag>-...``."""

    tag: str
    prefix: str
    names: dict[str, str]  # the saved fleet's name -> the node's
    labels: dict[str, dict[str, str]]  # by the saved fleet's name, with the saved prefix
    slices: dict[str, list[dict[str, Any]]]  # the same, as written (renamed) on the server

    def rename(self, text: str) -> str:
        from benchmarks.controller import P

        return text.replace(f"{P}/", f"{self.prefix}/").replace(P, self.prefix)

    def moves(self) -> tuple[str, str, str]:
        """A node to move (its saved name), its NVLink domain and another it joins (a Slurm block of 2 or more)."""
        from benchmarks.controller import P

        domain, counts = f"{P}/nvlink-domain", dict[str, int]()
        for held in self.labels.values():
            counts[held.get(domain, "")] = counts.get(held.get(domain, ""), 0) + 1
        old = next(n for n, held in self.labels.items() if counts.get(held.get(domain, ""), 0) >= 3)
        home = self.labels[old][domain]
        return old, home, next(d for d, n in counts.items() if d and d != home and n >= 2)

    def config(self, identity: str, claims: bool = True, **parts: bool) -> ControllerConfig:
        return ControllerConfig(parts=Parts(claims=claims, gpus=(2, 4, 8), namespace=self.tag, **parts,
                                            claim=ClaimConfig(namespace=self.tag, prefix=self.prefix)),
                                driver=self.prefix, namespace=self.tag, identity=identity,
                                times=LeaseTimes(duration=15, renew_deadline=10, retry=2))

    def delete(self, http: httpx.Client) -> None:
        with contextlib.suppress(httpx.TransportError):  # a fleet of 10,000 takes long to delete: not measured
            http.delete(f"/api/v1/namespaces/{self.tag}")
            http.request("DELETE", "/api/v1/nodes", params={"labelSelector": f"{self.prefix}/claim-class"},
                         timeout=600)
            http.request("DELETE", SLICES, params={"fieldSelector": f"spec.driver={self.prefix}"}, timeout=600)


def slice_of(made: MadeFleet, old: str, i: int, devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The node's ``i``th slice as the server holds it (``devices``: others, with the saved prefix)."""
    new = made.names[old]
    spec = made.slices[old][i]["spec"] | {"nodeName": new, "driver": made.prefix,
                                         "pool": {"name": new, "generation": 1, "resourceSliceCount": 1}}
    devices = [d | {"attributes": {made.rename(k): v for k, v in (d.get("attributes") or {}).items()}}
               for d in (spec.get("devices") if devices is None else devices) or []]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{new}-{i}"},
            "spec": spec | {"devices": devices}}


def create_fleet(http: httpx.Client, *, tag: str, nodes: int, workers: int = 8) -> MadeFleet:
    """N fake Nodes (the saved fleet repeated, ``benchmarks.controller.fleet``) and their slices, and a namespace
    ``tag``, created on the server."""
    from benchmarks.controller import fleet

    labels_of, slices_of = fleet(nodes)
    made = MadeFleet(tag, f"{tag}.topology", {old: f"{tag}-{old}" for old in labels_of}, labels_of, slices_of)
    assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": tag}}).status_code == 201

    def put(old: str) -> None:
        new = made.names[old]
        labels = {made.rename(k): v for k, v in labels_of[old].items()} | {"kubernetes.io/hostname": new}
        got = http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                               "metadata": {"name": new, "labels": labels}})
        assert got.status_code == 201, got.text
        for i in range(len(slices_of[old])):
            got = http.post(SLICES, json=slice_of(made, old, i))
            assert got.status_code == 201, got.text

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, labels_of))
    return made


def _templates(http: httpx.Client, ns: str, cls: str) -> set[str]:
    got = http.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates")
    return {o["metadata"]["name"] for o in got.json()["items"] if o["metadata"]["name"].endswith(f"-{cls}")}


def class_changes(http: httpx.Client, made: MadeFleet, cfg: ControllerConfig, count: int) -> tuple[list[float],
                                                                                                  list[float]]:
    """A node (the last of its class by name, never the one whose slices its class is read from; of the class
    whose GPU lost makes the most templates) loses a GPU: its labels go to a class no node had, then its slice
    (the agent's order), and the time until every template of the new class exists is measured; then back, and
    the time until they are deleted. ``count`` times each."""
    from benchmarks.controller import P, lost_gpu
    from exporter.kube import wanted
    from exporter.kube._fleet._claims_read import claim_classes

    members: dict[str, list[str]] = {}
    for old, held in made.labels.items():
        members.setdefault(held[f"{P}/claim-class"], []).append(old)

    def after_loss(old: str) -> tuple[str, dict[str, Any], set[str]]:
        fewer, cls = lost_gpu(made.slices[old])
        moved = slice_of(made, old, 0, fewer[0]["spec"]["devices"])
        labels = {made.rename(k): v for k, v in made.labels[old].items()} | {f"{made.prefix}/claim-class": cls}
        read = claim_classes({cls: [made.names[old]]}, lambda _: [moved], made.prefix)
        objs = wanted({made.names[old]: labels}, read.classes, cfg.parts, on=["claims"]).objects.values()
        return cls, moved, {o["metadata"]["name"] for o in objs if o["kind"] == "ResourceClaimTemplate"}

    old = max((sorted(names)[-1] for names in members.values()), key=lambda n: len(after_loss(n)[2]))
    (cls, moved, want), node, home = after_loss(old), made.names[old], made.labels[old][f"{P}/claim-class"]
    assert want
    made_s, gone_s = [], []
    for i in range(2 * count):
        there = i % 2 == 0
        body = moved if there else slice_of(made, old, 0)
        path = f"{SLICES}/{body['metadata']['name']}"
        body["metadata"]["resourceVersion"] = http.get(path).json()["metadata"]["resourceVersion"]
        started = time.monotonic()
        got = http.patch(f"/api/v1/nodes/{node}", headers={"Content-Type": "application/merge-patch+json"},
                         json={"metadata": {"labels": {f"{made.prefix}/claim-class": cls if there else home}}})
        assert got.status_code == 200, got.text
        assert http.put(path, json=body).status_code == 200
        _wait("the class's templates " + ("made" if there else "deleted"),
              lambda t=there: _templates(http, made.tag, cls) == (want if t else set()), timeout=120)
        (made_s if there else gone_s).append(time.monotonic() - started)
        print(f"class change {i}: {'made' if there else 'deleted'} {len(want)} templates in "
              f"{(made_s if there else gone_s)[-1]:.2f} s", file=sys.stderr, flush=True)
    return made_s, gone_s


def run(http: httpx.Client, kubeconfig: Path, *, tag: str, nodes: int, changes: int, claims: bool = True,
        workers: int = 8, classes: int = 3) -> Figures:
    from benchmarks.controller import P

    started = time.monotonic()
    made = create_fleet(http, tag=tag, nodes=nodes, workers=workers)
    created = time.monotonic() - started
    cfg = made.config("bench", claims)
    api = LightkubeApi.connect(kubeconfig=str(kubeconfig), manager="topolink-controller")
    controller = Controller(api, cfg, lambda _: None,
                            lease_api=LightkubeApi.connect(kubeconfig=str(kubeconfig), manager="topolink-controller"))
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    domain, rename = f"{P}/nvlink-domain", made.rename
    old, home, away = made.moves()
    moved = made.names[old]
    try:
        started = time.monotonic()
        thread.start()
        _wait("the first sync", lambda: controller.syncs and _block_of(http, tag, moved), timeout=600)
        first = time.monotonic() - started
        print(f"created in {created:.1f} s, first sync {first:.1f} s", file=sys.stderr, flush=True)
        took = []
        for i in range(changes):  # to the other block and back: each patch moves it
            before = _block_of(http, tag, moved)
            started = time.monotonic()
            got = http.patch(f"/api/v1/nodes/{moved}", headers={"Content-Type": "application/merge-patch+json"},
                             json={"metadata": {"labels": {rename(domain): home if i % 2 else away}}})
            assert got.status_code == 200, got.text
            _wait("the change reflected", lambda b=before: _block_of(http, tag, moved) not in (None, b), timeout=120)
            took.append(time.monotonic() - started)
            print(f"change {i}: reflected in {took[-1]:.2f} s", file=sys.stderr, flush=True)
        made_s, gone_s = class_changes(http, made, cfg, classes) if claims and classes else ([], [])
        return Figures(nodes=nodes, create_s=created, first_sync_s=first, changes_s=took, new_class_s=made_s,
                       class_gone_s=gone_s)
    finally:
        stop.set()
        thread.join(timeout=30)
        made.delete(http)
