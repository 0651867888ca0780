"""The fleet controller against a real kube-apiserver (``benchmarks.controller --apiserver``): N fake Nodes (the
saved GB200-racks fleet's labels, repeated as ``benchmarks.controller.fleet`` repeats them) and their slices of
the agents' driver are created, the controller (in this process, its own client, default ``--delay`` 1 s) leads,
lists once and syncs; then one node's labels are patched (its NVLink domain: its Slurm block, its Kueue and
Volcano levels) and the time until the controller's objects reflect it (the Slurm ConfigMap names the node in
its new block) is measured, ``changes`` times. Everything is named under a tag of its own (label prefix, driver,
namespace, node names), so a shared server's other objects are neither read nor touched, and it is deleted after.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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

    def table(self) -> str:
        med = statistics.median(self.changes_s)
        return ("| nodes | create (s) | first sync (s) | class change reflected: median / max (s) | changes |\n"
                "|---|---|---|---|---|\n"
                f"| {self.nodes} | {self.create_s:.1f} | {self.first_sync_s:.1f} | {med:.2f} / "
                f"{max(self.changes_s):.2f} | {len(self.changes_s)} |  (measured)")


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


def run(http: httpx.Client, kubeconfig: Path, *, tag: str, nodes: int, changes: int, claims: bool = True,
        workers: int = 8) -> Figures:
    from benchmarks.controller import P, fleet

    prefix = f"{tag}.topology"
    labels_of, slices_of = fleet(nodes)
    names = {old: f"{tag}-{old}" for old in labels_of}
    assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": tag}}).status_code == 201

    def rename(text: str) -> str:
        return text.replace(f"{P}/", f"{prefix}/").replace(P, prefix)

    def put(old: str) -> None:
        new = names[old]
        labels = {rename(k): v for k, v in labels_of[old].items()} | {"kubernetes.io/hostname": new}
        got = http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                               "metadata": {"name": new, "labels": labels}})
        assert got.status_code == 201, got.text
        for i, obj in enumerate(slices_of[old]):
            spec = obj["spec"] | {"nodeName": new, "driver": prefix, "pool": {"name": new, "generation": 1,
                                                                              "resourceSliceCount": 1}}
            devices = [d | {"attributes": {rename(k): v for k, v in (d.get("attributes") or {}).items()}}
                       for d in spec.get("devices") or []]
            made = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": f"{new}-{i}"}, "spec": spec | {"devices": devices}}
            got = http.post(SLICES, json=made)
            assert got.status_code == 201, got.text

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, labels_of))
    created = time.monotonic() - started
    cfg = ControllerConfig(parts=Parts(claims=claims, gpus=(2, 4, 8), namespace=tag,
                                       claim=ClaimConfig(namespace=tag, prefix=prefix)),
                           driver=prefix, namespace=tag, identity="bench",
                           times=LeaseTimes(duration=15, renew_deadline=10, retry=2))
    api = LightkubeApi.connect(kubeconfig=str(kubeconfig), manager="topolink-controller")
    controller = Controller(api, cfg, lambda _: None,
                            lease_api=LightkubeApi.connect(kubeconfig=str(kubeconfig), manager="topolink-controller"))
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    domain = f"{P}/nvlink-domain"
    counts: dict[str, int] = {}
    for held in labels_of.values():
        counts[held.get(domain, "")] = counts.get(held.get(domain, ""), 0) + 1
    old = next(n for n, held in labels_of.items() if counts.get(held.get(domain, ""), 0) >= 3)
    home = labels_of[old][domain]
    away = next(d for d, n in counts.items() if d and d != home and n >= 2)  # a block it joins
    moved = names[old]
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
        return Figures(nodes=nodes, create_s=created, first_sync_s=first, changes_s=took)
    finally:
        stop.set()
        thread.join(timeout=30)
        with contextlib.suppress(httpx.TransportError):  # a fleet of 10,000 takes long to delete: not measured
            http.delete(f"/api/v1/namespaces/{tag}")
            http.request("DELETE", "/api/v1/nodes", params={"labelSelector": f"{prefix}/claim-class"}, timeout=600)
            http.request("DELETE", SLICES, params={"fieldSelector": f"spec.driver={prefix}"}, timeout=600)
