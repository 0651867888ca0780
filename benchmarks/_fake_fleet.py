"""A simulated fleet as a kube-apiserver would list it, served over HTTP from memory for ``topolink cluster``.

Each node kind's labels and ResourceSlice are what topolink's own sinks compute for a machine (GB200 tray,
HGX H100, an 8-GPU PCIe box), under node names of their own; GB200 trays come 18 to a rack, one NVLink
domain (fabric clique) per rack; 1% of the nodes have their best-group classes halved (a fault). Objects
carry what a server adds and ``topolink cluster`` must read past: Nodes (listed as PartialObjectMetadata)
have the usual kubelet labels and annotations and managedFields for kubelet, the node controller and
topolink; slices have their managedFields (a field set as large as the spec). Lists honour ``limit`` and
``continue`` and the label and field selectors ``cluster`` sends; each object is encoded once, up front.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import topology as t
from exporter.kube import LabelConfig, SliceConfig, build_slices, desired_devices, desired_labels
from topology import replace

P = "gpu.topology"
STAMP = "2026-11-24T10:00:00Z"


def _fields(value: Any) -> Any:
    """A managedFields ``fieldsV1`` tree for a value, as the server records one (lists of devices by name)."""
    if isinstance(value, dict):
        return {f"f:{k}": _fields(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return {f'k:{{"name":"{v["name"]}"}}': {".": {}, **_fields(v)} for v in value}
    return {}


def _node(name: str, labels: dict[str, str], rng: random.Random) -> dict[str, Any]:
    kube = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "gpu-x",
            "topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": f"r1-{rng.randrange(3)}",
            "nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"}
    annotations = {"node.alpha.kubernetes.io/ttl": "0",
                   "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                   "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{rng.getrandbits(64):016x}"}),
                   "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}
    status = {"f:conditions": {f'k:{{"type":"{c}"}}': {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {},
                                                       "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}
                               for c in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")},
              "f:allocatable": {"f:cpu": {}, "f:memory": {}, "f:nvidia.com/gpu": {}, "f:pods": {}},
              "f:capacity": {"f:cpu": {}, "f:memory": {}, "f:nvidia.com/gpu": {}, "f:pods": {}},
              "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}}, "f:images": {}, "f:nodeInfo": {}}
    managed = [
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": STAMP, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:annotations": _fields(annotations), "f:labels": _fields(kube)}}},
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": STAMP,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:podCIDR": {}, "f:podCIDRs": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": STAMP, "fieldsType": "FieldsV1",
         "subresource": "status", "fieldsV1": {"f:status": status}},
        {"manager": "topolink", "operation": "Apply", "apiVersion": "v1", "time": STAMP, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": _fields(labels)}}}]
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {
        "name": name, "uid": f"{rng.getrandbits(128):032x}", "resourceVersion": str(rng.randrange(10**9)),
        "creationTimestamp": STAMP, "labels": {**kube, **labels}, "annotations": annotations,
        "managedFields": managed}}


def _slice(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    meta = {**obj["metadata"], "uid": f"{rng.getrandbits(128):032x}", "resourceVersion": str(rng.randrange(10**9)),
            "generation": 1, "creationTimestamp": STAMP,
            "managedFields": [{"manager": "topolink", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                               "time": STAMP, "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": _fields(obj["metadata"]), "f:spec": _fields(obj["spec"])}}]}
    return {**obj, "metadata": meta}


@dataclasses.dataclass
class Encoded:
    nodes: list[bytes]  # PartialObjectMetadata of every node, in name order
    slices: list[bytes]
    node_bytes: int
    slice_bytes: int


def simulated(kinds: dict[str, t.Snapshot], nodes: int, rng: random.Random) -> Encoded:
    """``kinds``: "gb200", "hgx" and "pcie" snapshots; 60%, 30% and 10% of the nodes."""
    made: dict[str, tuple[dict[str, str], list[dict[str, Any]]]] = {}
    for kind, snap in kinds.items():
        named = replace(snap, node="node-00000")
        made[kind] = (desired_labels(named, LabelConfig(), {}), desired_devices(named, SliceConfig()))
    out = Encoded(nodes=[], slices=[], node_bytes=0, slice_bytes=0)
    for i in range(nodes):
        name, roll = f"node-{i:05d}", rng.random()
        kind = "gb200" if roll < 0.6 else "hgx" if roll < 0.9 else "pcie"
        labels, devices = dict(made[kind][0]), made[kind][1]
        labels[f"{P}/nvlink-domain"] = f"{i // 18:08x}-0000-4000-8000-000000000000.1" if kind == "gb200" else name
        if rng.random() < 0.01:  # a fault: the best groups estimate a class lower
            labels |= {k: str(int(v) // 2) for k, v in labels.items() if "allreduce-busbw-" in k}
        node = json.dumps(_node(name, labels, rng), separators=(",", ":")).encode()
        objs = build_slices(devices, node=name, node_uid=f"uid-{i}", cfg=SliceConfig(), version="v1", generation=1)
        out.nodes.append(node)
        out.node_bytes += len(node)
        for obj in objs:
            body = json.dumps(_slice(obj, rng), separators=(",", ":")).encode()
            out.slices.append(body)
            out.slice_bytes += len(body)
    return out


def _page(items: list[bytes], query: dict[str, str], kind: str) -> bytes:
    start, limit = int(query.get("continue") or 0), int(query.get("limit") or len(items) or 1)
    more = start + limit < len(items)
    head = json.dumps({"kind": kind, "apiVersion": "v1", "metadata": {
        "resourceVersion": "1", **({"continue": str(start + limit)} if more else {})}})
    return head[:-1].encode() + b',"items":[' + b",".join(items[start:start + limit]) + b"]}"


def serve(fleet: Encoded) -> tuple[str, Callable[[], None]]:
    """Serves ``fleet`` on 127.0.0.1: the URL and a function that stops the server."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/api/v1/nodes":
                body = _page(fleet.nodes, query, "PartialObjectMetadataList")
            elif url.path == "/apis/resource.k8s.io/v1/resourceslices":
                body = _page(fleet.slices, query, "ResourceSliceList")
            elif url.path == "/apis/resource.k8s.io":
                body = json.dumps({"kind": "APIGroup", "name": "resource.k8s.io",
                                   "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]}).encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://{host!s}:{port}", stop
