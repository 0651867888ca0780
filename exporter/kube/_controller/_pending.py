"""Pending pods explained (pure): which of our claim classes a pending pod's claim asks for, how many nodes of
the class exist, and how many have a free group of the size asked, from the claims allocated now.

A pod is ours to explain when one of its ``spec.resourceClaims`` names one of our ResourceClaimTemplates (by its
name: ``topolink-<nvlink|switch>-<N>-<class>`` or ``topolink-gpu-nic-<class>``, in the templates' namespace: a
template deleted since, its class gone, still says which class it asked for) and the scheduler found no node
for it (``PodScheduled=False``, reason ``Unschedulable``) while that claim is not allocated.

A group is free on a node when at least N of its GPUs are in no allocated claim (the GPU driver's devices, named
by pool and device in ``status.allocation``, are matched to their bus ids through the driver's ResourceSlices); a
GPU+NIC pair when neither is. The groups counted are the ones the template offers (the first 8, best first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._desired._claims import MAX_SUBREQUESTS, ClaimClass, ClaimConfig

Obj = dict[str, Any]
_TEMPLATE = re.compile(r"^topolink-(?:(nvlink|switch)-([1-9][0-9]*)|(gpu-nic))-([a-z0-9][-a-z0-9.]*)$")
REASON = "TopologyGroupUnavailable"


@dataclass(frozen=True, slots=True)
class Ask:
    kind: str  # nvlink, switch or gpu-nic
    size: int  # GPUs in the group (a GPU+NIC pair: 1)
    class_id: str


def asked(template: str) -> Ask | None:
    """The class, kind and size one of our templates asks for, by its name; None: not ours."""
    if (m := _TEMPLATE.match(template)) is None:
        return None
    return Ask(m[1], int(m[2]), m[4]) if m[1] else Ask("gpu-nic", 1, m[4])


def keep_pod(obj: Obj, namespace: str) -> Obj | None:
    """What the pod store holds of a pod: its claims that use our templates (None: it uses none)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if meta.get("namespace") != namespace or spec.get("nodeName"):
        return None
    ours = {c["name"]: t for c in spec.get("resourceClaims") or []
            if (t := c.get("resourceClaimTemplateName")) and asked(t) is not None}
    if not ours:
        return None
    made = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    stuck = any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
                for c in status.get("conditions") or [])
    return {"name": meta.get("name"), "namespace": namespace, "uid": meta.get("uid"), "unschedulable": stuck,
            "claims": [[entry, template, made.get(entry)] for entry, template in sorted(ours.items())]}


def keep_claim(obj: Obj) -> Obj:
    """What the claim store holds of a claim: its allocated devices as [driver, pool, device] (none: pending)."""
    results = (((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return {"allocated": bool((obj.get("status") or {}).get("allocation")),
            "devices": [[r.get("driver"), r.get("pool"), r.get("device")] for r in results]}


def _bus(device: Obj, attrs: Sequence[str], driver: str) -> str | None:
    held = device.get("attributes") or {}
    for attr in attrs:
        domain, _, name = attr.rpartition("/")
        for k in (attr, name) if domain == driver else (attr,):
            if isinstance(v := (held.get(k) or {}).get("string"), str):
                return v.lower()
    return None


def keep_device_slice(obj: Obj, cfg: ClaimConfig) -> Obj | None:
    """What the device store holds of one of the GPU or NIC driver's slices: its node and each device's bus id."""
    spec = obj.get("spec") or {}
    driver = spec.get("driver")
    attrs = (cfg.bus_id_attribute,) if driver == cfg.gpu_driver else cfg.nic_buses
    if driver not in (cfg.gpu_driver, cfg.nic_driver) or not spec.get("nodeName"):
        return None
    buses = {d["name"]: bus for d in spec.get("devices") or [] if (bus := _bus(d, attrs, driver))}
    return {"node": spec["nodeName"], "driver": driver, "pool": (spec.get("pool") or {}).get("name"), "buses": buses}


def in_use(claims: Iterable[Obj], device_slices: Iterable[Obj]) -> dict[str, set[str]]:
    """node -> the bus ids of its devices that allocated claims hold."""
    where = {(s["driver"], s["pool"], device): (s["node"], bus)
             for s in device_slices for device, bus in s["buses"].items()}
    out: dict[str, set[str]] = {}
    for claim in claims:
        for driver, pool, device in claim["devices"]:
            if (found := where.get((driver, pool, device))) is not None:
                out.setdefault(found[0], set()).add(found[1])
    return out


def offered(cls: ClaimClass, kind: str, size: int) -> list[tuple[str, ...]]:
    """The bus ids of each group the class's template for ``kind`` and ``size`` offers (a pair: GPU and NIC)."""
    if kind == "gpu-nic":
        return [(p.gpu_bus.lower(), p.nic_bus.lower()) for p in cls.groups.pairs[:MAX_SUBREQUESTS]]
    found = cls.groups.islands if kind == "nvlink" else cls.groups.switches
    fit = [g for g in found if len(g.buses) >= size]
    if kind == "switch":
        fit.sort(key=lambda g: len(g.buses))
    return [tuple(b.lower() for b in g.buses) for g in fit[:MAX_SUBREQUESTS]]


def free_groups(cls: ClaimClass, kind: str, size: int, used: Mapping[str, set[str]]) -> dict[str, int]:
    """Each node of the class -> how many of the template's groups have ``size`` devices free on it."""
    groups, need = offered(cls, kind, size), 2 if kind == "gpu-nic" else size
    return {node: sum(len(set(g) - used.get(node, set())) >= need for g in groups) for node in cls.nodes}


def explain(ask: Ask, template: str, *, classes: Mapping[str, ClaimClass], members: Mapping[str, Sequence[str]],
            used: Mapping[str, set[str]], label: str) -> str:
    """The Event's note for a pod whose claim from ``template`` is unallocated."""
    what = "a GPU and its nearest NIC" if ask.kind == "gpu-nic" else f"{ask.size} GPUs of one " + (
        "NVLink island" if ask.kind == "nvlink" else "PCIe switch")
    head = f"template {template} asks for {what} on a node of claim class {ask.class_id}"
    nodes = members.get(ask.class_id, ())
    if not nodes:
        return f"{head}: no node has that class now (no node is labelled {label}={ask.class_id})"
    if (cls := classes.get(ask.class_id)) is None:
        return f"{head}: {len(nodes)} nodes of the class, whose groups are not known (no slices of theirs read)"
    free = free_groups(cls, ask.kind, ask.size, used)
    having = sum(1 for n in free.values() if n)
    group = "GPU and NIC pair" if ask.kind == "gpu-nic" else f"group of {ask.size}"
    return f"{head}: {len(nodes)} nodes of the class, {having} with a free {group}"


NOTE_MAX = 1024  # an Event's note: at most this many characters (events.k8s.io/v1)


def pod_note(waiting: Sequence[tuple[str, str]]) -> str:
    """The one note of a pod from each waiting claim's (entry name, note): a claim alone, its note; several, each
    named (claims with the same note together), in entry order, as many as fit in an Event's note."""
    if len(waiting) == 1:
        return waiting[0][1]
    together: dict[str, list[str]] = {}
    for entry, note in sorted(waiting):
        together.setdefault(note, []).append(entry)
    groups = list(together.items())
    out = f"{len(waiting)} claims wait: "
    for i, (note, entries) in enumerate(groups):
        piece = ("; " if i else "") + f"claim{'s' if len(entries) > 1 else ''} {', '.join(entries)}: {note}"
        left = sum(len(e) for _, e in groups[i + 1:])
        if len(out) + len(piece) + len(f"; and {left} more claims" if left else "") > NOTE_MAX:
            unsaid = len(entries) + left  # the last check left room for this
            return (out + f"; and {unsaid} more claim{'s' if unsaid > 1 else ''}")[:NOTE_MAX]
        out += piece
    return out


def metrics(classes: Iterable[ClaimClass], sizes: Sequence[int],
            used: Mapping[str, set[str]]) -> list[tuple[str, str, int, int]]:
    """(class, kind, size, free groups in the fleet) for every template the class has."""
    out = []
    for cls in classes:
        for kind in ("nvlink", "switch", "gpu-nic"):
            for size in (1,) if kind == "gpu-nic" else sizes:
                if (size >= 2 or kind == "gpu-nic") and offered(cls, kind, size):
                    out.append((cls.id, kind, size, sum(free_groups(cls, kind, size, used).values())))
    return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(free: Iterable[tuple[str, str, int, int]], members: Mapping[str, Sequence[str]],
               leading: bool) -> str:
    """The controller's ``/metrics`` (Prometheus text format 0.0.4): the free groups by class, kind and size,
    the nodes of each class, and whether this replica leads (only the leader counts: a follower serves none)."""
    lines = ["# HELP topolink_controller_leading Whether this replica holds the Lease (1) or waits (0).",
             "# TYPE topolink_controller_leading gauge", f"topolink_controller_leading {int(leading)}",
             "# HELP topolink_controller_class_nodes Nodes labelled with each claim class.",
             "# TYPE topolink_controller_class_nodes gauge"]
    lines += [f'topolink_controller_class_nodes{{class="{_label(c)}"}} {len(n)}' for c, n in sorted(members.items())]
    lines += ["# HELP topolink_controller_free_groups Groups a claim class's template offers with enough devices in "
              "no allocated claim, over the class's nodes (a group inside another counts as well).",
              "# TYPE topolink_controller_free_groups gauge"]
    lines += [f'topolink_controller_free_groups{{class="{_label(c)}",kind="{k}",gpus="{n}"}} {v}'
              for c, k, n, v in sorted(free)]
    return "\n".join(lines) + "\n"
