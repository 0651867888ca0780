"""The ResourceSlices other DRA drivers would publish for a node made from a machine profile: NVIDIA's GPU driver
(``gpu.nvidia.com``, its device shape from ``tests/data/dra/nvidia-gpu-resourceslice.yaml``) and an RDMA NIC
driver (``dra.net``) with the standard PCI attributes; the devices the claim templates select."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.reference_data import DATA
from topology import Snapshot

EXAMPLE = DATA / "dra" / "nvidia-gpu-resourceslice.yaml"
STD = "resource.kubernetes.io"


def _example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def _root(snap: Snapshot, bdf: str) -> str | None:
    parents = {f.id: f.parent for f in snap.pci}
    roots = {h.id for h in snap.host_bridges}
    cur, seen = bdf, set()
    while cur in parents and cur not in seen:
        seen.add(cur)
        cur = parents[cur]
    return cur if cur in roots else None


def _std(snap: Snapshot, bdf: str, numa: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {f"{STD}/pciBusID": {"string": bdf}}
    if root := _root(snap, bdf):
        out[f"{STD}/pcieRoot"] = {"string": root}
    if numa is not None and numa >= 0:
        out[f"{STD}/numaNode"] = {"int": numa}
    return out


def _slice(node: str, driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"},
            "spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def gpu_slice(snap: Snapshot, node: str) -> dict[str, Any]:
    """One device per GPU, shaped as the upstream example's, with this GPU's name, uuid and bus facts."""
    (template,) = _example()["spec"]["devices"]
    devices = []
    for g in snap.gpus:
        if g.minor is None or g.lost:
            continue
        d = copy.deepcopy(template)
        d["name"] = f"gpu-{g.minor}"
        attrs = {k: v for k, v in d["attributes"].items() if not k.startswith(f"{STD}/")}
        attrs["uuid"] = {"string": g.uuid or f"GPU-{g.minor}"}
        attrs["productName"] = {"string": g.name or "unknown"}
        d["attributes"] = attrs | _std(snap, g.id, g.numa_node)
        devices.append(d)
    return _slice(node, "gpu.nvidia.com", devices)


def nic_slice(snap: Snapshot, node: str) -> dict[str, Any]:
    devices = [{"name": f"nic-{i}", "attributes": {"dra.net/rdma": {"bool": True}, "dra.net/ifName": {"string": n.name}}
                | _std(snap, n.pci_bus_id, n.numa_node)}
               for i, n in enumerate(sorted((n for n in snap.nics if n.rdma and n.pci_bus_id), key=lambda n: n.name))]
    return _slice(node, "dra.net", devices)
