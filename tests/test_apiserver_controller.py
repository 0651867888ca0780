"""The fleet controller on the real API server: two ``topolink controller`` processes, one leader by a Lease.

A fleet of its own (the saved GB200-racks fleet, ``tests/data/fleet``, under a label prefix and driver of this
test, node names of its own): the objects appear (claim templates per class, Kueue's, KAI's, Volcano's, the Slurm
ConfigMap), follow a class change, go when a class's last node goes, an object that carries the controller's label
but that it did not make stays, and when the leader is killed the other replica takes the Lease and reconciles
within the lease duration plus one resync. Lease times are shortened (3 s / 2 s / 0.5 s, resync 2 s) to keep the
test quick; the rules are the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from exporter.kube._fleet._wanted import KINDS
from tests.apiserver import ApiServer
from tests.apiserver_agent import wait_until

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"
CRDS = REPO / "tests" / "data" / "crds"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
MANAGED = "app.kubernetes.io/managed-by=topolink-controller"
DURATION, RESYNC = 3.0, 2.0
PATHS = {"templates": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
         "flavors": "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
         "kueue": "/apis/kueue.x-k8s.io/v1beta2/topologies", "kai": "/apis/kai.scheduler/v1alpha1/topologies",
         "hypernodes": "/apis/topology.volcano.sh/v1alpha1/hypernodes",
         "classes": "/apis/resource.k8s.io/v1/deviceclasses"}


class Fleet:
    def __init__(self, http: httpx.Client, tag: str) -> None:
        self.http, self.tag, self.prefix = http, tag, f"{tag}.topology"
        saved = json.loads(FLEET.read_text().replace("gpu.topology", self.prefix))["items"]
        self.nodes = {o["metadata"]["name"]: o for o in saved if o["kind"] == "Node"}
        self.slices = [o for o in saved if o["kind"] == "ResourceSlice"]

    def name(self, node: str) -> str:
        return f"{self.tag}-{node}"

    def put_node(self, node: str, like: str | None = None) -> None:
        """Node ``node`` with the labels and slices of ``like`` (default its own)."""
        src = like or node
        labels = dict(self.nodes[src]["metadata"]["labels"]) | {"kubernetes.io/hostname": self.name(node)}
        for key in [k for k in labels if k.endswith("/nvlink-domain") and labels[k].startswith("node_")]:
            labels[key] = f"node_{self.name(node)}"
        got = self.http.get(f"/api/v1/nodes/{self.name(node)}")
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name(node), "labels": labels}}
        if got.status_code == 200:
            body["metadata"]["resourceVersion"] = got.json()["metadata"]["resourceVersion"]
            assert self.http.put(f"/api/v1/nodes/{self.name(node)}", json=body).status_code == 200
        else:
            assert self.http.post("/api/v1/nodes", json=body).status_code == 201
        self.drop_slices(node)
        for made in self.slices:
            if made["spec"]["nodeName"] == src:
                obj = json.loads(json.dumps(made))
                obj["metadata"] = {"name": f"{self.name(node)}-{made['metadata']['name']}"}
                obj["spec"]["nodeName"] = self.name(node)
                resp = self.http.post(SLICES, json=obj)
                assert resp.status_code == 201, resp.text

    def drop_slices(self, node: str) -> None:
        got = self.http.get(SLICES, params={"fieldSelector": f"spec.nodeName={self.name(node)}"})
        for obj in got.json()["items"]:
            self.http.delete(f"{SLICES}/{obj['metadata']['name']}")

    def drop_node(self, node: str) -> None:
        self.drop_slices(node)
        self.http.delete(f"/api/v1/nodes/{self.name(node)}")


def _names(http: httpx.Client, what: str, ns: str = "") -> set[str]:
    got = http.get(PATHS[what].format(ns=ns), params={"labelSelector": MANAGED})
    assert got.status_code == 200, got.text
    return {o["metadata"]["name"] for o in got.json()["items"]}


def _slurm(http: httpx.Client, ns: str) -> str | None:
    got = http.get(f"/api/v1/namespaces/{ns}/configmaps/topolink-slurm-topology")
    return got.json()["data"]["topology.yaml"] if got.status_code == 200 else None


def _holder(http: httpx.Client, ns: str) -> str:
    got = http.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/topolink-controller")
    return str(got.json()["spec"].get("holderIdentity") or "") if got.status_code == 200 else ""


def _install_crds(http: httpx.Client) -> None:
    for crd in sorted(CRDS.glob("*.yaml")):
        doc = yaml.safe_load(crd.read_text())
        got = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=doc)
        assert got.status_code in (201, 409), got.text

        def established(name: str = doc["metadata"]["name"]) -> bool:
            status = http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in (status.get("status") or {}).get("conditions") or [])
        wait_until(f"{crd.name} established", established, timeout=30, every=0.2)


@pytest.fixture
def fleet(kube_apiserver: ApiServer) -> Iterator[Fleet]:
    with kube_apiserver.admin() as http:
        made = Fleet(http, "ctl" + uuid.uuid4().hex[:6])
        assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": made.tag}}).status_code == 201
        _install_crds(http)
        for node in made.nodes:
            made.put_node(node)
        try:
            yield made
        finally:
            for node in made.nodes:
                made.drop_node(node)
            for what in ("flavors", "kueue", "kai", "hypernodes"):
                for name in _names(http, what):
                    http.delete(f"{PATHS[what]}/{name}")
            http.delete(f"/api/v1/namespaces/{made.tag}")


def _start(server: ApiServer, fleet: Fleet, who: str, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "agent.cli", "controller", "--kubeconfig", str(server.kubeconfig()),
            "--lease-namespace", fleet.tag, "--namespace", fleet.tag, "--identity", who,
            "--label-prefix", fleet.prefix, "--dra-driver-name", fleet.prefix, "--gpus", "2", "--gpus", "4",
            "--lease-duration", str(DURATION), "--renew-deadline", "2", "--retry-period", "0.5",
            "--resync", str(RESYNC), "--delay", "0.2"]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})


def test_two_replicas_keep_the_fleets_objects_current(kube_apiserver: ApiServer, fleet: Fleet,
                                                      tmp_path: Path) -> None:
    http, ns = fleet.http, fleet.tag
    gb200, h100 = (fleet.nodes[n]["metadata"]["labels"][f"{fleet.prefix}/claim-class"] for n in ("tray-00", "hgx-0"))
    foreign = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
               "metadata": {"name": f"{ns}-foreign", "labels": {"app.kubernetes.io/managed-by": "topolink-controller"}},
               "spec": {"tier": 9, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "x"}}}]}}
    assert http.post(PATHS["hypernodes"], json=foreign).status_code == 201
    mark = kube_apiserver.audit_mark()
    procs = {who: _start(kube_apiserver, fleet, who, tmp_path / f"{who}.log") for who in ("a", "b")}
    try:
        # every part appears: templates of both classes for 2 and 4 GPUs, the DeviceClasses, the schedulers' kinds
        def appeared() -> bool:
            names = _names(http, "templates", ns)
            return (any(h100 in n for n in names) and any(gb200 in n for n in names) and _slurm(http, ns) is not None
                    and all(_names(http, what) for what in ("flavors", "kueue", "kai", "hypernodes")))
        wait_until("the controller's objects", appeared, timeout=30, every=0.2)
        assert {"topolink-gpu", "topolink-gpu-or-nic"} <= _names(http, "classes")
        assert {n for n in _names(http, "templates", ns) if h100 in n} >= {f"topolink-nvlink-4-{h100}"}
        leader = _holder(http, ns)
        assert leader in procs
        # a class change: hgx-1 becomes a tray (labels and slices); its block joins the racks' in Slurm's topology
        assert fleet.name("hgx-1") not in (_slurm(http, ns) or "")  # alone in its NVLink domain: in no block
        fleet.put_node("hgx-1", like="tray-00")
        wait_until("hgx-1 in a tray's block", lambda: fleet.name("hgx-1") in (_slurm(http, ns) or ""),
                   timeout=DURATION + RESYNC)
        assert any(h100 in n for n in _names(http, "templates", ns))  # hgx-0 still holds the H100 class
        # the class's last node goes: its templates go; the object that carries our label but is not ours stays
        fleet.drop_node("hgx-0")
        wait_until("the H100 class's templates deleted",
                   lambda: not any(h100 in n for n in _names(http, "templates", ns)), timeout=DURATION + RESYNC)
        assert any(gb200 in n for n in _names(http, "templates", ns))
        assert f"{ns}-foreign" in _names(http, "hypernodes")
        # the leader dies: the other replica takes the Lease and reconciles a change within duration + resync
        procs[leader].kill()
        procs[leader].wait()
        killed = time.monotonic()
        fleet.drop_node("tray-08")
        other = next(w for w in procs if w != leader)
        wait_until("tray-08 out of Slurm's topology", lambda: fleet.name("tray-08") not in (_slurm(http, ns) or ""),
                   timeout=DURATION + RESYNC + 10)
        took = time.monotonic() - killed
        assert _holder(http, ns) == other
        assert took <= DURATION + RESYNC + 2, took
        # a clean stop hands the Lease back
        procs[other].send_signal(signal.SIGTERM)
        assert procs[other].wait(timeout=15) == 0
        assert _holder(http, ns) == ""
        log = (tmp_path / f"{other}.log").read_text()
        assert "leading" in log and "Traceback" not in log, log
        # its own kinds were listed once a leadership each (then watched), whatever the syncs and changes between
        # (a list the server failed, a 429 while a CRD's storage initializes, is tried again: not counted)
        leads = sum((tmp_path / f"{who}.log").read_text().count("leading: lease") for who in procs)
        own = {(k.group, k.plural) for k in KINDS.values()}
        lists = [e for e in kube_apiserver.audit(mark) if e["verb"] == "list" and e["userAgent"].startswith(
            "topolink/") and ((e.get("objectRef") or {}).get("apiGroup", ""), e["objectRef"]["resource"]) in own
            and e["responseStatus"].get("code") == 200]
        assert leads >= 2 and len(lists) == len(own) * leads, (leads, [e["requestURI"] for e in lists])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        http.delete(f"{PATHS['hypernodes']}/{ns}-foreign")


RBAC = "/apis/rbac.authorization.k8s.io/v1"
POLICIES = "/apis/admissionregistration.k8s.io/v1"
SHIPPED = {"ServiceAccount": "/api/v1/namespaces/topolink/serviceaccounts", "ClusterRole": f"{RBAC}/clusterroles",
           "ClusterRoleBinding": f"{RBAC}/clusterrolebindings", "Role": f"{RBAC}/namespaces/topolink/roles",
           "RoleBinding": f"{RBAC}/namespaces/topolink/rolebindings",
           "ValidatingAdmissionPolicy": f"{POLICIES}/validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": f"{POLICIES}/validatingadmissionpolicybindings"}


def _controller_token(http: httpx.Client) -> str:
    """The shipped ServiceAccount, RBAC and admission policy of the controller (the default overlay, as
    kustomize builds it) on the server, and a token of that ServiceAccount."""
    from tests.chart_support import kustomize

    http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "topolink"}})
    for obj in kustomize("default"):
        if obj["kind"] in SHIPPED and obj["metadata"]["name"].startswith("topolink-controller"):
            got = http.post(SHIPPED[obj["kind"]], json=obj)
            assert got.status_code in (201, 409), got.text
    got = http.post("/api/v1/namespaces/topolink/serviceaccounts/topolink-controller/token",
                    json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "spec": {"expirationSeconds": 3600}})
    assert got.status_code == 201, got.text
    return str(got.json()["status"]["token"])


def test_the_shipped_rbac_and_policy_let_the_controller_do_its_work_and_nothing_else(
        kube_apiserver: ApiServer, fleet: Fleet, tmp_path: Path) -> None:
    http, ns = fleet.http, fleet.tag
    token = _controller_token(http)
    as_controller = httpx.Client(base_url=kube_apiserver.url, timeout=30,
                                 verify=ssl.create_default_context(cafile=str(kube_apiserver.ca)),
                                 headers={"Authorization": f"Bearer {token}"})
    theirs = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
              "metadata": {"name": f"{ns}-theirs", "labels": {"app.kubernetes.io/managed-by": "someone"}},
              "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    assert http.post(PATHS["classes"], json=theirs).status_code == 201

    def refused() -> bool:  # the policy is in force once the server refuses a delete RBAC would allow
        got = as_controller.delete(f"{PATHS['classes']}/{ns}-theirs", params={"dryRun": "All"})
        assert got.status_code in (200, 403), got.text
        return got.status_code == 403
    try:
        wait_until("the controller's admission policy in force", refused, timeout=30, every=0.3)
        other_cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{ns}-x", "labels": {
            "app.kubernetes.io/managed-by": "topolink-controller"}}}
        assert as_controller.post("/api/v1/namespaces/topolink/configmaps", json=other_cm).status_code == 403
        unlabelled = theirs | {"metadata": {"name": f"{ns}-mine"}}
        assert as_controller.post(PATHS["classes"], json=unlabelled).status_code == 403
        config = tmp_path / "kubeconfig"
        config.write_text(kube_apiserver.kubeconfig_text(token))
        argv = [sys.executable, "-m", "agent.cli", "controller", "--kubeconfig", str(config), "--lease-namespace",
                "topolink", "--namespace", ns, "--identity", "sa", "--label-prefix", fleet.prefix,
                "--dra-driver-name", fleet.prefix, "--resync", str(RESYNC), "--delay", "0.2"]
        log = tmp_path / "sa.log"
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        try:
            def done() -> bool:
                return (_slurm(http, "topolink") is not None and len(_names(http, "templates", ns)) > 2
                        and all(_names(http, what) for what in ("flavors", "kueue", "kai", "hypernodes")))
            try:
                wait_until("the objects, written as the ServiceAccount", done, timeout=30, every=0.3)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {log.read_text()}") from None
            _pending_pod_told(http, ns, fleet.nodes["hgx-0"]["metadata"]["labels"][f"{fleet.prefix}/claim-class"])
            fleet.drop_node("hgx-0")
            fleet.drop_node("hgx-1")  # the H100 class's last node: its templates deleted, as the ServiceAccount
            h100 = fleet.nodes["hgx-0"]["metadata"]["labels"][f"{fleet.prefix}/claim-class"]
            wait_until("the H100 templates deleted", lambda: not any(h100 in n for n in _names(http, "templates", ns)),
                       timeout=20)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        assert "Forbidden" not in text and "403" not in text and "Traceback" not in text, text
        assert http.get(f"{PATHS['classes']}/{ns}-theirs").status_code == 200
    finally:
        http.delete(f"{PATHS['classes']}/{ns}-theirs")
        http.delete("/api/v1/namespaces/topolink/configmaps/topolink-slurm-topology")
        as_controller.close()


def _pending_pod_told(http: httpx.Client, ns: str, class_id: str) -> None:
    """A pod of the class's template that the scheduler found no node for (its condition written as the
    scheduler writes it: no scheduler runs here) gets the controller's Event, written as its ServiceAccount."""
    assert http.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}).status_code in (201, 409)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits"},
           "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": f"topolink-nvlink-2-{class_id}"}],
                    "containers": [{"name": "c", "image": "example.invalid/none",
                                    "resources": {"claims": [{"name": "gpus"}]}}]}}
    got = http.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert got.status_code == 201, got.text
    got = http.patch(f"/api/v1/namespaces/{ns}/pods/waits/status", headers={
        "Content-Type": "application/merge-patch+json"}, json={"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}]}})
    assert got.status_code == 200, got.text

    def told() -> list[Any]:
        items = http.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
                         params={"fieldSelector": "regarding.name=waits"}).json()["items"]
        return [e for e in items if e.get("reportingController") == "topolink-controller"]
    (said,) = wait_until("the pending pod's Event", told, timeout=20)
    assert re.search(rf"claim class {class_id}: [1-9][0-9]* nodes of the class, [0-9]+ with a free group of 2$",
                     said["note"]), said["note"]


def test_two_candidates_racing_for_the_lease_one_wins(kube_apiserver: ApiServer) -> None:
    """The election's safety on the real server: a candidate's write carries the resourceVersion it read, so of
    two that read the same expired Lease, the second write is refused (409) and that candidate stays one."""
    from exporter.kube import Conflict, LightkubeApi
    from exporter.kube._controller._lease import LEASE, LeaderElector, LeaseTimes

    ns = "ctl" + uuid.uuid4().hex[:6]
    with kube_apiserver.admin() as http:
        assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns}}).status_code == 201
        try:
            api = LightkubeApi.connect(kubeconfig=str(kube_apiserver.kubeconfig()), manager="topolink-controller")
            times = LeaseTimes(duration=1.0, renew_deadline=0.8, retry=0.1)
            a, b = (LeaderElector(api, name="race", namespace=ns, identity=who, times=times, log=lambda _: None)
                    for who in ("a", "b"))
            assert a._try()
            stale = api.get(LEASE, "race", ns)
            assert stale is not None
            assert a._try()  # renewed: the resourceVersion read before is stale now
            with pytest.raises(Conflict):
                api.apply(LEASE, {**stale, "spec": {**stale["spec"], "holderIdentity": "b"},
                                  "metadata": {"name": "race", "namespace": ns,
                                               "resourceVersion": stale["metadata"]["resourceVersion"]}})
            assert not b._try()  # held, and renewed as b saw it
            assert api.get(LEASE, "race", ns)["spec"]["holderIdentity"] == "a"  # type: ignore[index]
        finally:
            http.delete(f"/api/v1/namespaces/{ns}")
