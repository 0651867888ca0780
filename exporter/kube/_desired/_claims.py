"""DeviceClasses and ResourceClaimTemplates that hand a pod the GPU driver's own devices (NVIDIA's DRA driver,
``gpu.nvidia.com``) as topolink's groups make them, pure.

A template is written per claim class (nodes whose GPUs make the same groups of the same bus ids, labelled
``<prefix>/claim-class``) and kind: ``nvlink-N`` (N GPUs in one NVLink island), ``switch-N`` (N GPUs under one
PCIe switch), ``gpu-nic`` (one GPU and its nearest RDMA NIC). Its one request lists the class's groups as
``firstAvailable`` subrequests, best first, each selecting the group's bus ids by CEL
(``device.attributes["resource.kubernetes.io"].pciBusID in [...]``): the scheduler takes the first group with
N free devices on a node, and leaves the pod pending rather than split a group.

Every attribute read is guarded: ``has(...)`` first, and the driver's own check before its attributes. The
resource.k8s.io/v1 API makes a reference to an attribute a device lacks an evaluation error that aborts the
allocation, so one device of another driver (or of the NIC driver, without a PCI address: a virtual interface)
would make every template unusable on its node. The NIC's bus id is read from each attribute its driver may
publish it in: the standard ``resource.kubernetes.io/pciBusID`` and, for dranet, ``dra.net/pciAddress``
(``nic_bus_attributes`` names others). CEL cannot see which node a
device is on, so the bus ids mean these groups only on nodes of the class: a pod using the template must select
the class's label (the template carries it, and the annotation says so).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from topology import Snapshot

from ..._core._claim_groups import ClaimGroups, Group, claim_groups, places_of
from .._api._api import MANAGED_BY, Obj
from .._api._errors import InvalidObject
from ._names import is_attribute_name, is_dns_label, is_dns_subdomain

API = "resource.k8s.io/v1"
MAX_SUBREQUESTS = 8  # resource.k8s.io: at most 8 subrequests in firstAvailable
GPU_CLASS, PAIR_CLASS = "topolink-gpu", "topolink-gpu-or-nic"
KINDS = ("nvlink", "switch", "gpu-nic")
NIC_BUS_ATTRIBUTES = {"dra.net": ("dra.net/pciAddress",)}  # a NIC driver's own bus-id attribute, beside the standard


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimConfig:
    gpu_driver: str = "gpu.nvidia.com"
    gpu_domain: str = "gpu.nvidia.com"  # the domain of the driver's own attributes; its ``type`` must be "gpu"
    nic_driver: str = "dra.net"
    bus_id_attribute: str = "resource.kubernetes.io/pciBusID"
    nic_bus_attributes: tuple[str, ...] = ()  # () the NIC driver's own: the standard one, and dranet's
    namespace: str = "default"
    prefix: str = "gpu.topology"

    def __post_init__(self) -> None:
        for what, name in (("GPU driver", self.gpu_driver), ("NIC driver", self.nic_driver)):
            if not is_dns_subdomain(name, 63) or name != name.lower():
                raise InvalidObject(f"{what} {name!r}: a lowercase DNS subdomain of at most 63 characters")
        if self.gpu_domain and not is_dns_subdomain(self.gpu_domain, 63):
            raise InvalidObject(f"attribute domain {self.gpu_domain!r}: a DNS subdomain of at most 63 characters")
        for attr in (self.bus_id_attribute, *self.nic_bus_attributes):
            if "/" not in attr or not is_attribute_name(attr):
                raise InvalidObject(f"bus id attribute {attr!r}: a qualified name, DOMAIN/NAME")
        if not is_dns_label(self.namespace):
            raise InvalidObject(f"namespace {self.namespace!r}: a DNS label")

    @property
    def class_label(self) -> str:
        return f"{self.prefix}/claim-class"

    @property
    def nic_buses(self) -> tuple[str, ...]:
        """The attributes the NIC driver's bus id is read from, any of them."""
        if self.nic_bus_attributes:
            return self.nic_bus_attributes
        own = NIC_BUS_ATTRIBUTES.get(self.nic_driver, ())
        return tuple(dict.fromkeys((self.bus_id_attribute, *own)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimClass:
    id: str
    nodes: tuple[str, ...]
    groups: ClaimGroups


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimPlan:
    objects: tuple[Obj, ...]  # the DeviceClasses first, then the templates
    skipped: tuple[tuple[str, str, str], ...] = field(default=())  # (class, kind, why no template)


def node_class(snap: Snapshot, node: str) -> ClaimClass:
    """The one node's class, from its snapshot (``topolink place --format claims``)."""
    groups = claim_groups(places_of(snap))
    return ClaimClass(id=groups.class_id, nodes=(node,), groups=groups)


def _has(attr: str) -> tuple[str, str]:
    """The guard and the read of a qualified attribute name, DOMAIN/NAME."""
    domain, _, name = attr.rpartition("/")
    read = f"device.attributes[{json.dumps(domain)}].{name}"
    return f"has({read})", read


def _gpu_expr(cfg: ClaimConfig) -> str:
    expr = f"device.driver == {json.dumps(cfg.gpu_driver)}"
    if cfg.gpu_domain:
        guard, read = _has(f"{cfg.gpu_domain}/type")
        expr += f' && {guard} && {read} == "gpu"'
    return expr


def _bus_in(attr: str, buses: Sequence[str]) -> str:
    guard, read = _has(attr)
    return f"{guard} && {read} in [{', '.join(json.dumps(b) for b in buses)}]"


def device_classes(cfg: ClaimConfig) -> list[Obj]:
    """The GPU driver's whole GPUs (not its MIG or VFIO devices, which carry the parent's bus id), and those
    or the NIC driver's devices, for the GPU+NIC pair."""
    pair = f"({_gpu_expr(cfg)}) || device.driver == {json.dumps(cfg.nic_driver)}"
    return [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name, "labels": dict(MANAGED_BY)},
             "spec": {"selectors": [{"cel": {"expression": expr}}]}}
            for name, expr in ((GPU_CLASS, _gpu_expr(cfg)), (PAIR_CLASS, pair))]


def _select(buses: Sequence[str], cfg: ClaimConfig) -> list[Obj]:
    return [{"cel": {"expression": _bus_in(cfg.bus_id_attribute, buses)}}]


def _select_pair(gpu_bus: str, nic_bus: str, cfg: ClaimConfig) -> list[Obj]:
    """The GPU by the GPU driver's bus id, the NIC by any attribute its driver may publish it in; each read
    behind its driver's check and its own ``has``."""
    nic = " || ".join(f"({_bus_in(attr, [nic_bus])})" for attr in cfg.nic_buses)
    return [{"cel": {"expression": f"(device.driver == {json.dumps(cfg.gpu_driver)} && "
                                   f"{_bus_in(cfg.bus_id_attribute, [gpu_bus])}) || "
                                   f"(device.driver == {json.dumps(cfg.nic_driver)} && ({nic}))"}}]


def template_name(kind: str, n: int, class_id: str) -> str:
    return f"topolink-{kind}-{class_id}" if kind == "gpu-nic" else f"topolink-{kind}-{n}-{class_id}"


def _template(kind: str, n: int, cls: ClaimClass, cfg: ClaimConfig, subrequests: list[Obj]) -> Obj:
    name = template_name(kind, n, cls.id)
    return {"apiVersion": API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": cfg.namespace,
                         "labels": {**MANAGED_BY, cfg.class_label: cls.id},
                         "annotations": {f"{cfg.prefix}/node-selector": f"{cfg.class_label}={cls.id}"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu-nic" if kind == "gpu-nic" else "gpus",
                                                        "firstAvailable": subrequests}]}}}}


def _groups_template(kind: str, n: int, cls: ClaimClass, cfg: ClaimConfig) -> tuple[Obj | None, str]:
    found: tuple[Group, ...] = cls.groups.islands if kind == "nvlink" else cls.groups.switches
    what = "NVLink island" if kind == "nvlink" else "PCIe switch"
    if n < 2:
        return None, f"a group of {n} is any GPU: ask for it from the GPU driver's own DeviceClass"
    fit = [g for g in found if len(g.buses) >= n]  # islands: best first
    if kind == "switch":  # the deepest switch that holds n first (the smallest group), then the ones above it
        fit.sort(key=lambda g: len(g.buses))
    if not fit:
        largest = cls.groups.largest(kind)
        return None, f"no {what} holds {n} GPUs (the largest holds {largest})" if largest else f"no {what} joins GPUs"
    subs = [{"name": f"{kind}-{i}", "deviceClassName": GPU_CLASS, "selectors": _select(g.buses, cfg),
             "allocationMode": "ExactCount", "count": n} for i, g in enumerate(fit[:MAX_SUBREQUESTS])]
    note = f"{len(fit) - MAX_SUBREQUESTS} more groups left out (at most {MAX_SUBREQUESTS} per request)" \
        if len(fit) > MAX_SUBREQUESTS else ""
    return _template(kind, n, cls, cfg, subs), note


def _pairs_template(cls: ClaimClass, cfg: ClaimConfig) -> tuple[Obj | None, str]:
    pairs = cls.groups.pairs
    if not pairs:
        return None, "no GPU has an RDMA NIC under its PCIe switch or root complex"
    subs = [{"name": f"pair-{i}", "deviceClassName": PAIR_CLASS, "selectors": _select_pair(p.gpu_bus, p.nic_bus, cfg),
             "allocationMode": "ExactCount", "count": 2} for i, p in enumerate(pairs[:MAX_SUBREQUESTS])]
    note = f"{len(pairs) - MAX_SUBREQUESTS} more pairs left out (at most {MAX_SUBREQUESTS} per request)" \
        if len(pairs) > MAX_SUBREQUESTS else ""
    return _template("gpu-nic", 1, cls, cfg, subs), note


def claim_plan(classes: Sequence[ClaimClass], n: int, cfg: ClaimConfig) -> ClaimPlan:
    """The DeviceClasses and, per class, the templates for groups of ``n``; where a class has no such group,
    no template, and why (a template left with fewer groups than the class has says so too)."""
    objects = device_classes(cfg)
    skipped = []
    for cls in classes:
        for kind in KINDS:
            made, why = _pairs_template(cls, cfg) if kind == "gpu-nic" else _groups_template(kind, n, cls, cfg)
            if made is not None:
                objects.append(made)
            if why:
                skipped.append((cls.id, kind, why))
    return ClaimPlan(objects=tuple(objects), skipped=tuple(skipped))
