"""Every object the fleet wants, from its node labels and claim classes (pure): the one code path of
``topolink cluster`` (once, by hand) and of the fleet controller (kept current).

Parts, each switchable (:class:`Parts`): the DeviceClasses and ResourceClaimTemplates of each claim class for
each group size (``claims``), Kueue's Topology and ResourceFlavors (``kueue``), KAI's Topology (``kai``),
Volcano's HyperNodes (``volcano``) and Slurm's ``topology.yaml`` in a ConfigMap (``slurm``). Each object is
keyed by :func:`key` (kind, namespace, name): two group sizes want the same DeviceClasses once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._api._api import Kind
from .._desired._claims import ClaimClass, ClaimConfig, claim_plan
from ._levels import HOSTNAME
from ._schedulers import kai_topologies, kueue_plan, volcano_hypernodes
from ._slurm import NoBlocks, slurm_topology

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace or "", name)
PARTS = ("claims", "kueue", "kai", "volcano", "slurm")
SLURM_CONFIGMAP, SLURM_KEY = "topolink-slurm-topology", "topology.yaml"
KINDS: dict[str, Kind] = {
    "DeviceClass": Kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
    "ResourceClaimTemplate": Kind("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates",
                                  namespaced=True),
    "kueue.x-k8s.io/Topology": Kind("kueue.x-k8s.io", "v1beta2", "Topology", "topologies"),
    "ResourceFlavor": Kind("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", "resourceflavors"),
    "kai.scheduler/Topology": Kind("kai.scheduler", "v1alpha1", "Topology", "topologies"),
    "HyperNode": Kind("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes"),
    "ConfigMap": Kind("", "v1", "ConfigMap", "configmaps", namespaced=True),
}
PART_KINDS: dict[str, tuple[str, ...]] = {
    "claims": ("DeviceClass", "ResourceClaimTemplate"), "kueue": ("kueue.x-k8s.io/Topology", "ResourceFlavor"),
    "kai": ("kai.scheduler/Topology",), "volcano": ("HyperNode",), "slurm": ("ConfigMap",)}


def kind_of(obj: Obj) -> Kind:
    """The :class:`Kind` of one of our objects (two kinds are called Topology: the group tells them apart)."""
    name = obj["kind"]
    if name == "Topology":
        name = f"{obj['apiVersion'].split('/')[0]}/Topology"
    return KINDS[name]


def key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return kind_of(obj).plural + "." + kind_of(obj).group, meta.get("namespace") or "", meta["name"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    claims: bool = True
    kueue: bool = True
    kai: bool = True
    volcano: bool = True
    slurm: bool = True
    gpus: tuple[int, ...] = (2,)  # the group sizes templates are written for
    claim: ClaimConfig = field(default_factory=ClaimConfig)
    levels: tuple[str, ...] = ()  # node labels above topolink's levels, highest first
    slurm_node_label: str = HOSTNAME
    namespace: str = "default"  # the Slurm ConfigMap's

    def on(self) -> tuple[str, ...]:
        return tuple(p for p in PARTS if getattr(self, p))


@dataclass(frozen=True, slots=True)
class Wanted:
    objects: dict[Key, Obj]
    notes: tuple[str, ...]  # what was left out, and why


def wanted(nodes: Mapping[str, Mapping[str, str]], classes: Sequence[ClaimClass], parts: Parts,
           on: Sequence[str] | None = None) -> Wanted:
    """The objects of the parts ``on`` (default: every part switched on) for ``nodes`` (name -> labels)."""
    import yaml

    prefix, named = parts.claim.prefix, list(parts.levels)
    made: list[Obj] = []
    notes: list[str] = []
    on = parts.on() if on is None else on
    if "claims" in on:
        for n in parts.gpus:
            plan = claim_plan(classes, n, parts.claim)
            made += plan.objects
            notes += [f"class {cid}: no {kind} template for {n} GPUs: {why}" for cid, kind, why in plan.skipped]
    if "kueue" in on or "kai" in on:
        flavors, left = kueue_plan(nodes, named, prefix)
        if "kueue" in on:
            made += [obj for _, topology, flavor in flavors for obj in (topology, flavor)]
            notes += [f"kueue: node {name} in no flavor: {why}" for name, why in left]
        if "kai" in on:
            made += [topology for _, topology, _ in kai_topologies(nodes, named, prefix)]
    if "volcano" in on:
        made += volcano_hypernodes(nodes, named, prefix)[1]
    if "slurm" in on:
        try:
            slurm = slurm_topology(nodes, named, prefix, node_label=parts.slurm_node_label)
            made.append({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": SLURM_CONFIGMAP, "namespace": parts.namespace,
                                      "labels": {"app.kubernetes.io/managed-by": "topolink"}},
                         "data": {SLURM_KEY: yaml.safe_dump(slurm.entries, sort_keys=False)}})
            notes += [f"slurm: {name} in no block: {why}" for name, why in slurm.alone]
        except NoBlocks as exc:
            notes.append(f"slurm: no ConfigMap: {exc}")
    return Wanted(objects={key(o): o for o in made}, notes=tuple(notes))
