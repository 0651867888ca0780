"""The agent's side of the ``apiserver`` tier: Nodes and ServiceAccount tokens in the real API server, the
shipped manifests installed into it, ``topolink serve`` as a process publishing to it, and the garbage
collector's one rule the tier needs (there is no controller-manager).

Every process started here is stopped here, by its own id, pass or fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.apiserver import ApiServer, free_port
from tests.fakenvml import FakeNode

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
TOPOLINK = Path(sys.executable).parent / "topolink"  # the console script: the same in every layout of agent/


def wait_until(what: str, check: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def create_node(http: httpx.Client, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    resp = http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                            "metadata": {"name": name, "labels": labels or {}}})
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def ensure(http: httpx.Client, path: str, obj: dict[str, Any]) -> None:
    """Create ``obj`` under ``path`` unless it exists."""
    resp = http.post(path, json=obj)
    assert resp.status_code in (201, 409), resp.text


def node_slices(http: httpx.Client, node: str) -> list[dict[str, Any]]:
    resp = http.get(SLICES, params={"fieldSelector": f"spec.nodeName={node}"})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


@dataclass(frozen=True)
class Identity:
    token: str
    pod: str
    pod_uid: str


def agent_token(http: httpx.Client, node: str, namespace: str = "topolink", account: str = "topolink") -> Identity:
    """A token of ServiceAccount ``namespace/account`` bound to a Pod on ``node``, as the kubelet gets one
    for the agent's Pod: it carries the node-name and pod-name claims the admission policy reads."""
    ensure(http, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    ensure(http, f"/api/v1/namespaces/{namespace}/serviceaccounts",
           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}})
    pod_name = f"{account}-{node}"[:63]
    ensure(http, f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
        "spec": {"nodeName": node, "serviceAccountName": account, "automountServiceAccountToken": False,
                 "containers": [{"name": "agent", "image": "topolink"}]}})
    pod = http.get(f"/api/v1/namespaces/{namespace}/pods/{pod_name}").json()
    return Identity(pod_token(http, pod), pod_name, str(pod["metadata"]["uid"]))


def pod_token(http: httpx.Client, pod: dict[str, Any], expiration_s: int = 3600) -> str:
    """A token of the pod's ServiceAccount bound to the pod (its name and uid), as the kubelet requests one:
    the server adds the pod's node to its claims."""
    meta = pod["metadata"]
    account = pod["spec"].get("serviceAccountName", "default")
    resp = http.post(f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token", json={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_s, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                                       "name": meta["name"], "uid": meta["uid"]}}})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["status"]["token"])


def collect_garbage(http: httpx.Client) -> int:
    """The garbage collector's rule for ResourceSlices owned by a Node: a slice whose owner (by uid) no longer
    exists is deleted. Returns how many it deleted."""
    nodes = {n["metadata"]["name"]: n["metadata"]["uid"] for n in http.get("/api/v1/nodes").json()["items"]}
    deleted = 0
    for s in http.get(SLICES).json()["items"]:
        owners = [o for o in s["metadata"].get("ownerReferences") or [] if o.get("kind") == "Node"]
        if owners and all(nodes.get(o["name"]) != o["uid"] for o in owners):
            resp = http.request("DELETE", f"{SLICES}/{s['metadata']['name']}", json={
                "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": s["metadata"]["uid"]}})
            deleted += resp.status_code == 200
    return deleted


def metric(text: str, name: str, **labels: str) -> float | None:
    """One sample of a Prometheus exposition, by name and labels."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{" if labels else name + " "):
            head, _, value = line.rpartition(" ")
            if not labels or ("{" in head and set(head[head.index("{") + 1:-1].split(",")) == set(want.split(","))):
                return float(value)
    return None


@dataclass
class Serve:
    """``topolink serve`` publishing one fake machine as ``node`` to the API server."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def metrics(self) -> str:
        return httpx.get(self.url + "/metrics", timeout=5).text

    def publishes(self) -> float:
        """Sink publishes so far (each pass adds to each sink's written, unchanged or failed)."""
        return sum(v for line in self.metrics().splitlines() if line.startswith("topolink_sink_publish_total{")
                   for v in [float(line.rpartition(" ")[2])])

    def pass_now(self, timeout: float = 20.0) -> None:
        """SIGHUP: one discovery pass, publish included; returns once the sinks have reported."""
        before = self.publishes()
        self.proc.send_signal(signal.SIGHUP)
        wait_until("a publish pass", lambda: self.publishes() > before, timeout)

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_serve(server: ApiServer, machine: FakeNode, node: str, workdir: Path, *args: str,
                kubeconfig: Path | None = None) -> Serve:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))} | machine.env()
    log = workdir / f"serve-{node}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(TOPOLINK), "serve", "--host", "127.0.0.1", "--port", str(port), "--state-dir", str(workdir / "state"),
             "--probe-interval", "0", "--discovery-interval", "600", "--log-format", "json", "--node-name", node,
             "--kubeconfig", str(kubeconfig or server.kubeconfig(server.agent_token)), *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    served = Serve(proc, f"http://127.0.0.1:{port}", log)
    try:
        wait_until("serve's first pass", lambda: _ready(served), timeout=60)
    except AssertionError:
        served.stop()
        raise AssertionError(log.read_text(errors="replace")[-3000:]) from None
    return served


def _ready(served: Serve) -> bool:
    if served.proc.poll() is not None:
        raise AssertionError(f"serve exited with {served.proc.returncode}: {served.log.read_text()[-3000:]}")
    try:
        return served.publishes() > 0
    except httpx.HTTPError:
        return False


def json_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Every line parsed as JSON (a plain-text line fails here)."""
    return [json.loads(line) for line in lines if line.strip()]
