"""Nodes the real scheduler places pods on, with no kubelet: what a kubelet does for the node-lifecycle controller.

A Node a test creates is tainted ``node.kubernetes.io/not-ready`` on admission. The node-lifecycle controller
lifts the taint once the Node reports ``status.allocatable`` and a ``Ready`` condition and its Lease in
``kube-node-lease`` is renewed within the grace period (40 s), as a kubelet renews it (every 10 s). No kubelet
runs, so a pod bound to such a node stays Pending there; its ResourceClaims carry the scheduler's
``status.allocation``, which is what the tests read.

:class:`ReadyNodes` makes such Nodes and renews their Leases on one thread until it is closed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.apiserver_agent import wait_until

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
NOT_READY = "node.kubernetes.io/not-ready"
RENEW_EVERY_S = 10.0  # a kubelet's default (nodeLeaseDurationSeconds 40 / 4)
ALLOCATABLE = {"cpu": "64", "memory": "512Gi", "pods": "110"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now_seconds() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReadyNodes:
    """Nodes made Ready and kept Ready; ``close()`` stops renewing (the controller then marks them NotReady)."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http
        self._names: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name="node-leases", daemon=True)
        self._thread.start()

    def add(self, name: str, labels: dict[str, str] | None = None, wait: bool = True) -> dict[str, Any]:
        """Create the Node, report it Ready, hold its Lease; with ``wait``, until the not-ready taint is gone."""
        resp = self._http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                                      "metadata": {"name": name, "labels": labels or {}}})
        assert resp.status_code == 201, resp.text
        self._report_ready(name)
        self._renew(name)
        with self._lock:
            self._names.append(name)
        if wait:
            wait_until(f"node {name} without the {NOT_READY} taint", lambda: self._schedulable(name), timeout=60)
        return dict(self._http.get(f"/api/v1/nodes/{name}").json())

    def forget(self, name: str) -> None:
        """Stop renewing one node's Lease (a kubelet that died)."""
        with self._lock:
            self._names.remove(name)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=RENEW_EVERY_S)

    def _schedulable(self, name: str) -> bool:
        taints = self._http.get(f"/api/v1/nodes/{name}").json()["spec"].get("taints") or []
        return not any(t["key"] == NOT_READY for t in taints)

    def _report_ready(self, name: str) -> None:
        now = _now_seconds()
        status = {"allocatable": ALLOCATABLE, "capacity": ALLOCATABLE, "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}
        resp = self._http.patch(f"/api/v1/nodes/{name}/status", json={"status": status},
                                headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert resp.status_code == 200, resp.text

    def _renew(self, name: str) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _now()}}
        resp = self._http.patch(f"{LEASES}/{name}", params={"fieldManager": "kubelet-stand-in", "force": "true"},
                                json=lease, headers={"Content-Type": "application/apply-patch+yaml"})
        assert resp.status_code in (200, 201), resp.text

    def _renew_loop(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            with self._lock:
                names = list(self._names)
            for name in names:
                try:
                    self._renew(name)
                except (httpx.HTTPError, AssertionError):
                    continue  # the next round tries again, as a kubelet would
