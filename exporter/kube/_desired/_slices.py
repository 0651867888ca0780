"""DRA ResourceSlices for one node, pure: devices and attributes from the snapshot, then a pool plan.

One device per GPU (``gpu-<minor>``, as the NVIDIA GPU driver names them) and per RDMA NIC
(``nic-<name>``), in a node-local pool named after the node. The standard attributes are computed as
``k8s.io/dynamic-resource-allocation/deviceattribute`` does: ``pciBusID`` only for a lowercase
``dddd:bb:dd.f``, ``pcieRoot`` the ``pciDDDD:BB`` root-complex directory, ``numaNode`` omitted when unknown.
The devices describe topology and are not meant for allocation: no DeviceClass is shipped for them, and
they carry a ``NoSchedule`` taint where the server supports device taints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topology import Gpu, Nic, PathClass, Snapshot, nearest_nics, nvlink_islands, path_index, pcie_switch, pcie_switches

from ..._core._health import BwKind, classify, degradation, nvlink_counts, ratios
from .._api._api import MANAGED_BY, Obj
from .._api._errors import InvalidObject
from ._names import (
    check_driver,
    device_name,
    is_attribute_name,
    is_dns_label,
    is_dns_subdomain,
    is_label_value,
    is_semver,
    object_name,
    semver,
)
from ._slice_facts import Known

STD = "resource.kubernetes.io"
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
MAX_DEVICES, MAX_DEVICES_TAINTED, MAX_ATTRS, MAX_STRING = 128, 64, 32, 64
TAINT = "topology-only"



ATTRIBUTES: tuple[tuple[str, str, str], ...] = (  # (name, type, meaning), for the reference
    (f"{STD}/pciBusID", "string", "PCI address `dddd:bb:dd.f` (GPU and NIC)"),
    (f"{STD}/pcieRoot", "string", "PCIe root complex `pciDDDD:BB` (GPU and NIC)"),
    (f"{STD}/numaNode", "int", "NUMA node; omitted when unknown (GPU and NIC)"),
    ("pcieSwitch", "string", "bus id of the upstream port of the nearest PCIe switch above the device, or its root "
                             "complex `pciDDDD:BB` when none (GPU and NIC): `matchAttribute` keeps a claim under "
                             "one switch"),
    ("pcieSwitchesAbove", "string", "the switches above that one, nearest first, comma-separated (two levels of "
                                    "switches: the one over the leaves); omitted when none (GPU and NIC)"),
    ("type", "string", "`gpu` or `nic`"),
    ("uuid", "string", "GPU UUID"),
    ("productName", "string", "GPU product name"),
    ("cudaComputeCapability", "version", "compute capability as semver (`9.0.0`)"),
    ("driverVersion", "version", "NVIDIA driver version as semver (`580.65.6`)"),
    ("nvlinkIsland", "int", "index of the GPU's NVLink island on the node (largest first; a GPU without NVLink is "
                            "an island of its own): `matchAttribute` keeps a claim inside one island"),
    ("nvlinkIslandSize", "int", "GPUs in that island"),
    ("nvlinkCount", "int", "active NVLinks of the GPU"),
    ("nvlinkGen", "int", "NVLink generation"),
    ("pcieGen", "int", "maximum PCIe generation"),
    ("pcieWidth", "int", "current PCIe width"),
    ("nearestNic", "string", "device name of the nearest RDMA NIC in this pool"),
    ("nicPath", "string", "PCIe class to that NIC (`PIX` ... `SYS`)"),
    ("gdr", "string", "GPUDirect RDMA readiness to that NIC"),
    ("bwGpuGpu", "string", "measured GPU-GPU copy class of this GPU's slowest pair (`full` probe profile only)"),
    ("bwHostGpu", "string", "measured host-GPU copy class"),
    ("degraded", "bool", "the GPU's links are degraded"),
    ("name", "string", "NIC: RDMA device name (`mlx5_0`)"),
    ("linkLayer", "string", "NIC: `InfiniBand` or `Ethernet`"),
    ("rateGbps", "int", "NIC: fastest port rate in Gb/s"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceConfig:
    driver: str = "gpu.topology"
    taints: bool = True

    def __post_init__(self) -> None:
        check_driver(self.driver)


def _value(kind: str, v: Any) -> dict[str, Any] | None:
    if kind == "string":
        s = str(v)
        return {"string": s} if len(s) <= MAX_STRING else None
    if kind == "version":
        return {"version": v} if isinstance(v, str) and is_semver(v) else None
    return {kind: v}


def _roots(snap: Snapshot) -> dict[str, str]:
    """Device bus id -> its root complex, walking parents as sysfs's realpath does."""
    pci = {f.id: f.parent for f in snap.pci}
    roots = {h.id for h in snap.host_bridges}
    out: dict[str, str] = {}
    for bdf in pci:
        cur, seen = bdf, set()
        while cur in pci and cur not in seen:
            seen.add(cur)
            cur = pci[cur]
        if cur in roots and _ROOT.match(cur):
            out[bdf] = cur
    return out


def switches_above(snap: Snapshot, bdf: str) -> str:
    """The switches above the nearest one, nearest first, comma-separated, as many as fit a string attribute."""
    kept: list[str] = []
    for port in pcie_switches(snap, bdf)[1:]:
        if len(",".join([*kept, port])) > MAX_STRING:
            break
        kept.append(port)
    return ",".join(kept)


def _std(bdf: str | None, numa: int | None, roots: Mapping[str, str], snap: Snapshot) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    if bdf and _BDF.match(bdf):
        out[f"{STD}/pciBusID"] = ("string", bdf)
        if bdf in roots:
            out[f"{STD}/pcieRoot"] = ("string", roots[bdf])
            if switch := pcie_switch(snap, bdf):
                out["pcieSwitch"] = ("string", switch)
            if above := switches_above(snap, bdf):
                out["pcieSwitchesAbove"] = ("string", above)
    if numa is not None and numa >= 0:
        out[f"{STD}/numaNode"] = ("int", numa)
    return out


def nic_device_name(nic: Nic) -> str:
    return device_name(f"nic-{nic.name}")


def _gpu_attrs(snap: Snapshot, g: Gpu, ctx: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    a: dict[str, tuple[str, Any]] = {"type": ("string", "gpu")}
    if g.uuid:
        a["uuid"] = ("string", g.uuid)
    if g.name:
        a["productName"] = ("string", g.name)
    if g.compute_capability and (cc := semver(".".join(map(str, g.compute_capability)))):
        a["cudaComputeCapability"] = ("version", cc)
    if ctx["driver"]:
        a["driverVersion"] = ("version", ctx["driver"])
    for i, isl in enumerate(ctx["islands"]):
        if g.id in isl.gpus:
            a["nvlinkIsland"], a["nvlinkIslandSize"] = ("int", i), ("int", isl.size)
    a["nvlinkCount"] = ("int", ctx["nvlinks"].get(g.id, 0))
    gens = [v for lk in snap.links if g.id in (lk.a, lk.b) and (v := lk.nvlink_version or 0) > 0]
    if gens:
        a["nvlinkGen"] = ("int", min(gens))
    if g.pcie and (g.pcie.max_gen or 0) > 0:
        a["pcieGen"] = ("int", g.pcie.max_gen)
    if g.pcie and ((width := g.pcie.current_width or g.pcie.max_width) or 0) > 0:
        a["pcieWidth"] = ("int", width)
    near = nearest_nics(snap, g.id, ctx["index"]) if not g.lost else ()
    nic = next((n for n in snap.nics if near and n.id == near[0]), None)
    if nic is not None:
        a["nearestNic"] = ("string", nic_device_name(nic))
        path = ctx["index"].pcie_class(g.id, nic.id)
        if path not in (PathClass.UNKNOWN, PathClass.LOST):
            a["nicPath"] = ("string", path.value)
    a["degraded"] = ("bool", g.id in ctx["degraded"])
    return a


def _bw_attrs(gid: str, found: Mapping[BwKind, list[Any]], prev: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for kind, attr, pos in ((BwKind.GPU_GPU, "bwGpuGpu", (0, 1)), (BwKind.HOST_GPU, "bwHostGpu", (1,))):
        mine = [r for m, r in found.get(kind, []) if any(m.subjects[p] == gid for p in pos)]
        if mine:
            before = (prev.get(attr) or {}).get("string")
            out[attr] = ("string", classify(min(mine), before))
    return out


def desired_devices(snap: Snapshot, cfg: SliceConfig, observed: Sequence[Obj] = ()) -> list[Obj]:
    """Devices sorted by name. ``observed``: the devices the pool has now (for unknown facts)."""
    prev = {d["name"]: d for d in observed}
    known = Known(snap)
    roots = _roots(snap)
    driver = semver(dict(snap.versions).get("nvidia_driver", ""))
    ctx = {"driver": driver, "islands": nvlink_islands(snap), "nvlinks": nvlink_counts(snap),
           "index": path_index(snap), "degraded": degradation(snap)}
    found = ratios(snap)
    devices: dict[str, Obj] = {}
    for g in snap.gpus:
        if g.minor is None or g.minor < 0:
            continue
        name = f"gpu-{g.minor}"
        old = prev.get(name, {}).get("attributes", {})
        attrs = _std(g.id, g.numa_node, roots, snap) | _gpu_attrs(snap, g, ctx) | _bw_attrs(g.id, found, old)
        devices[name] = _device(name, attrs, cfg, old, known.of(g.id))
    for n in snap.nics:
        if not n.rdma:
            continue
        name = nic_device_name(n)
        old = prev.get(name, {}).get("attributes", {})
        attrs = _std(n.pci_bus_id, n.numa_node, roots, snap) | {"type": ("string", "nic"), "name": ("string", n.name)}
        layers = sorted({p.link_layer for p in n.ports if p.link_layer})
        rates = [p.rate_gbps for p in n.ports if p.rate_gbps]
        if layers:
            attrs["linkLayer"] = ("string", layers[0])
        if rates:
            attrs["rateGbps"] = ("int", int(max(rates)))
        devices[name] = _device(name, attrs, cfg, old, known.of(n.id))
    if not snap.complete:  # a device we cannot see now is kept, never dropped on partial knowledge
        devices |= {name: d for name, d in prev.items() if name not in devices}
    return [devices[n] for n in sorted(devices)]


def _device(name: str, attrs: Mapping[str, tuple[str, Any]], cfg: SliceConfig, old: Mapping[str, Any],
            knows: Callable[[str], bool]) -> Obj:
    if not is_dns_label(name):
        raise InvalidObject(f"device name {name!r} is not a DNS label")
    out: dict[str, Any] = {}
    for key, (kind, v) in attrs.items():
        short = key.rpartition("/")[2]
        full = key if "/" in key else f"{cfg.driver}/{key}"
        if not knows(short):
            if full in old:
                out[full] = old[full]
            continue
        value = _value(kind, v)
        if value is not None and is_attribute_name(full):
            out[full] = value
    for full, value in old.items():  # an attribute whose fact is unknown now keeps its value
        short = full.rpartition("/")[2]
        if full not in out and not knows(short):
            out[full] = value
    if len(out) > MAX_ATTRS:
        raise InvalidObject(f"device {name}: {len(out)} attributes, the limit is {MAX_ATTRS}")
    device: Obj = {"name": name, "attributes": dict(sorted(out.items()))}
    if cfg.taints:
        device["taints"] = [{"key": f"{cfg.driver}/{TAINT}", "value": "true", "effect": "NoSchedule"}]
    return device


def slice_name(node: str, driver: str, index: int) -> str:
    return object_name(node, driver, str(index))


def build_slices(devices: Sequence[Obj], *, node: str, node_uid: str, cfg: SliceConfig, version: str,
                 generation: int) -> list[Obj]:
    """The pool's slices, devices split by the API's per-slice limit; always at least one (an empty
    slice says "publisher up, no devices")."""
    if not is_dns_subdomain(node):
        raise InvalidObject(f"pool name {node!r} is not a DNS subdomain")
    per = MAX_DEVICES_TAINTED if cfg.taints else MAX_DEVICES
    chunks = [list(devices[i:i + per]) for i in range(0, len(devices), per)] or [[]]
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
    label_node = {f"{cfg.driver}/node": node} if is_label_value(node) else {}
    return [{
        "apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node, cfg.driver, i), "labels": {**MANAGED_BY, **label_node},
                     "ownerReferences": [owner]},
        "spec": {"driver": cfg.driver, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                 "devices": [_for_version(d, version) for d in chunk]},
    } for i, chunk in enumerate(chunks)]


def _for_version(device: Obj, version: str) -> Obj:
    if version != "v1beta1":
        return device
    return {"name": device["name"], "basic": {k: v for k, v in device.items() if k != "name"}}


def devices_of(slice_obj: Obj) -> list[Obj]:
    """A stored slice's devices in the v1 shape, without what the server adds (taint timeAdded)."""
    out = []
    for d in slice_obj.get("spec", {}).get("devices") or []:
        body = d.get("basic", d)
        dev: Obj = {"name": d["name"], "attributes": dict(sorted((body.get("attributes") or {}).items()))}
        if body.get("taints"):
            dev["taints"] = [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in body["taints"]]
        out.append(dev)
    return sorted(out, key=lambda d: str(d["name"]))
