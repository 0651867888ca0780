"""Pending pods explained, on the real control plane: the controller's Event on a pod whose claim of our
templates the real kube-scheduler could not allocate.

Two HGX H100 nodes (one NVLink island of eight each) under a label prefix and driver of this test, the GPU
driver's slices beside topolink's; ``topolink controller`` writes the class's templates. Two pods take a whole
island each (the scheduler allocates them), so a third finds no free group: its Event says the class, its two
nodes and that none has a free group of 8, and ``/metrics`` counts the free islands
(two, then none). A pod whose template names a class no node has (a template made by
hand) gets the other Event. The same note is not written twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporter.kube import SliceConfig, build_slices, desired_devices
from tests.apiserver import ApiServer, free_port
from tests.apiserver_agent import SLICES, wait_until
from tests.gpu_driver import gpu_slice
from tests.placement_support import discover_profile
from tests.published import labels
from tests.ready_nodes import ReadyNodes

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
RESOURCE = "/apis/resource.k8s.io/v1"
EVENTS = "/apis/events.k8s.io/v1/namespaces/{ns}/events"


@pytest.fixture(scope="module")
def fleet(kube_control_plane: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two H100 nodes Ready, labelled and published under a prefix of this test, and a namespace of its own."""
    tag = f"pend{uuid.uuid4().hex[:6]}"
    prefix = f"{tag}.topology"
    snap = discover_profile("hgx-h100", tmp_path_factory.mktemp("h100"))
    with kube_control_plane.admin() as http:
        assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": tag}}).status_code == 201
        ready, nodes = ReadyNodes(http), [f"{tag}-h100-{i}" for i in range(2)]
        try:
            for node in nodes:
                held = {k.replace("gpu.topology/", f"{prefix}/"): v for k, v in labels(snap).items()}
                made = ready.add(node, held)
                cfg = SliceConfig(driver=prefix, taints=False)
                (ours,) = build_slices(desired_devices(snap, cfg), node=node, node_uid=made["metadata"]["uid"],
                                       cfg=cfg, version="v1", generation=1)
                for obj in (ours, gpu_slice(snap, node)):
                    resp = http.post(SLICES, json=obj)
                    assert resp.status_code == 201, resp.text
            yield {"http": http, "tag": tag, "prefix": prefix, "nodes": nodes,
                   "class": labels(snap)["gpu.topology/claim-class"]}
        finally:
            ready.close()
            for node in nodes:
                http.delete(f"/api/v1/nodes/{node}")
            http.delete(f"/api/v1/namespaces/{tag}")
            # the DeviceClasses are cluster-wide: the ones the controller made go with it
            for name in ("topolink-gpu", "topolink-gpu-or-nic"):
                got = http.get(f"{RESOURCE}/deviceclasses/{name}").json()
                if (got.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/managed-by") \
                        == "topolink-controller":
                    http.delete(f"{RESOURCE}/deviceclasses/{name}")


def _pod(http: httpx.Client, ns: str, name: str, *, label: str, class_id: str, template: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeSelector": {label: class_id},
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                    "containers": [{"name": "c", "image": "example.invalid/none",
                                    "resources": {"claims": [{"name": "gpus"}]}}]}}
    resp = http.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert resp.status_code == 201, resp.text


def _events(http: httpx.Client, ns: str, pod: str) -> list[dict[str, Any]]:
    items = http.get(EVENTS.format(ns=ns), params={"fieldSelector": f"regarding.name={pod}"}).json()["items"]
    return [e for e in items if e.get("reason") == "TopologyGroupUnavailable"]


def _metrics(port: int) -> str:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.TransportError:  # not listening yet
        return ""


def test_a_pod_with_no_free_group_and_one_of_a_class_no_node_has_are_told_why(
        kube_control_plane: ApiServer, fleet: dict[str, Any], tmp_path: Path) -> None:
    http, ns, prefix, cls = fleet["http"], fleet["tag"], fleet["prefix"], fleet["class"]
    label, template = f"{prefix}/claim-class", f"topolink-nvlink-8-{cls}"
    log = tmp_path / "controller.log"
    argv = [sys.executable, "-m", "agent.cli", "controller", "--kubeconfig", str(kube_control_plane.kubeconfig()),
            "--lease-namespace", ns, "--namespace", ns, "--identity", "pending", "--label-prefix", prefix,
            "--dra-driver-name", prefix, "--gpus", "8", "--no-kueue", "--no-kai", "--no-volcano", "--no-slurm",
            "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5", "--resync", "30",
            "--delay", "0.2", "--metrics-port", str(port := free_port()), "--metrics-address", "127.0.0.1"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                            env=os.environ | {"PYTHONUNBUFFERED": "1"})
    try:
        wait_until(f"template {template}", lambda: http.get(
            f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates/{template}").status_code == 200, timeout=30)
        free = f'topolink_controller_free_groups{{class="{cls}",kind="nvlink",gpus="8"}}'
        wait_until("both islands free", lambda: f"{free} 2\n" in _metrics(port), timeout=20)
        assert f'topolink_controller_class_nodes{{class="{cls}"}} 2\n' in _metrics(port)
        for i in range(2):  # an island each: both nodes full
            _pod(http, ns, f"whole-{i}", label=label, class_id=cls, template=template)
        for i in range(2):
            wait_until(f"pod whole-{i} bound", lambda i=i: http.get(  # type: ignore[misc]
                f"/api/v1/namespaces/{ns}/pods/whole-{i}").json()["spec"].get("nodeName"), timeout=40)
        _pod(http, ns, "third", label=label, class_id=cls, template=template)
        (said,) = wait_until("the third pod's Event", lambda: _events(http, ns, "third"), timeout=40)
        assert said["type"] == "Warning" and said["reportingController"] == "topolink-controller"
        assert said["regarding"]["kind"] == "Pod" and said["regarding"]["name"] == "third"
        assert f"claim class {cls}" in said["note"] and "2 nodes of the class, 0 with a free group of 8" in \
            said["note"], said["note"]
        wait_until("no island free", lambda: f"{free} 0\n" in _metrics(port), timeout=20)
        assert not _events(http, ns, "whole-0") and not _events(http, ns, "whole-1")  # scheduled: nothing said

        # a template of a class no node has (made by hand: the controller makes none for it)
        ghost = "topolink-nvlink-2-ghost0000"
        made = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": ghost, "namespace": ns},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                    "deviceClassName": "topolink-gpu", "allocationMode": "ExactCount", "count": 2}}]}}}}
        resp = http.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=made)
        assert resp.status_code == 201, resp.text
        _pod(http, ns, "lost", label=label, class_id="ghost0000", template=ghost)
        (lost,) = wait_until("the lost pod's Event", lambda: _events(http, ns, "lost"), timeout=40)
        assert "claim class ghost0000: no node has that class now" in lost["note"], lost["note"]
        # unchanged, said once: the scheduler retries the pods; still one Event each, no series yet
        assert [e["metadata"]["name"] for e in _events(http, ns, "third")] == [said["metadata"]["name"]]
        assert "series" not in _events(http, ns, "third")[0]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
