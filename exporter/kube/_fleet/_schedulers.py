"""What node-level schedulers read, from the fleet's node labels (pure): Kueue's ``Topology`` and
``ResourceFlavor`` per GPU product, KAI Scheduler's ``Topology`` from the same levels, and Volcano's
``HyperNode`` tiers (Slurm's ``topology.yaml`` is ``_slurm``'s).

Every level is a label the nodes already carry (``_levels``); the objects name labels and nodes, never a value
the fleet does not have. One naming rule (:func:`names`) serves every object: a DNS subdomain of at most 63
characters that is also a qualified name (Volcano's admission checks a HyperNode member's name with
``format.qualifiedName()``), readable (the level's short name and the value), with 8 hex digits of a hash of
the whole text where it had to be cut or changed, or where two texts would give one name (two levels of one
short name, ``a-b`` + ``c`` and ``a`` + ``b-c``): the same fleet gives the same names on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from .._desired._names import cut_name
from ._levels import HOSTNAME, Levels, fleet_levels

Obj = dict[str, Any]
KUEUE_VERSION = "kueue.x-k8s.io/v1beta2"  # Kueue's storage version (v1beta1 is served, deprecated)
KUEUE_MINIMUM = "v0.15"  # the first Kueue serving v1beta2 (Topology and ResourceFlavor)
KAI_VERSION = "kai.scheduler/v1alpha1"
VOLCANO_VERSION = "topology.volcano.sh/v1alpha1"
NAME_LIMIT = 63  # a qualified name's (HyperNode members) and a DNS label's
Nodes = Mapping[str, Mapping[str, str]]
MANAGED = {"app.kubernetes.io/managed-by": "topolink"}


def dns_name(*parts: str, limit: int = NAME_LIMIT) -> str:
    """A DNS subdomain (RFC 1123) from ``parts`` joined by ``-``; a hash of the text where it had to change."""
    return cut_name("-".join(parts), limit, dns=True)


def names(texts: Mapping[Any, Sequence[str]], limit: int = NAME_LIMIT) -> dict[Any, str]:
    """One name per key of ``texts`` (key -> the parts of its readable name), distinct: where two keys' names
    meet, each of them carries a hash of its key instead."""
    made = {key: dns_name(*parts, limit=limit) for key, parts in texts.items()}
    seen: dict[str, list[Any]] = {}
    for key, name in made.items():
        seen.setdefault(name, []).append(key)
    for name, keys in seen.items():
        if len(keys) > 1:
            for key in keys:
                tag = hashlib.sha256(repr(key).encode()).hexdigest()[:8]
                made[key] = f"{name[:limit - 9].rstrip('-.')}-{tag}"
    if len(set(made.values())) != len(made):  # a hash met a readable name: never seen, but never emitted
        raise ValueError("two objects would share a name: " + ", ".join(sorted(made.values())))
    return made


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def gpu_nodes(nodes: Nodes, prefix: str) -> dict[str, Mapping[str, str]]:
    """The nodes topolink labelled with a GPU count (the rest are no GPU scheduler's)."""
    return {name: labels for name, labels in nodes.items() if labels.get(f"{prefix}/gpu.count", "").isdigit()}


def kueue_objects(nodes: Nodes, named: Sequence[str], prefix: str) -> list[tuple[Levels, Obj, Obj]]:
    """Per GPU product: the levels, a ``Topology`` and the ``ResourceFlavor`` that selects the product's nodes
    and names the topology. The levels hold on every node of the product (the flavor's nodes)."""
    return kueue_plan(nodes, named, prefix)[0]


def kueue_plan(nodes: Nodes, named: Sequence[str],
               prefix: str) -> tuple[list[tuple[Levels, Obj, Obj]], list[tuple[str, str]]]:
    """:func:`kueue_objects`, and every GPU node in no flavor with why: (node, why)."""
    product_key = f"{prefix}/gpu.product"
    by_product: dict[str, dict[str, Mapping[str, str]]] = {}
    left: list[tuple[str, str]] = []
    for name, labels in sorted(gpu_nodes(nodes, prefix).items()):
        if product_key in labels:
            by_product.setdefault(labels[product_key], {})[name] = labels
        else:
            left.append((name, f"no {product_key} label (a flavor selects its nodes by product)"))
    named_as = names({product: ("topolink", product) for product in by_product})
    out = []
    for product, members in sorted(by_product.items()):
        levels = fleet_levels(members, named, prefix)
        if not levels.labels:
            left += [(name, f"{product}: no level holds on every node of the product") for name in members]
            continue
        name = named_as[product]
        meta = {"name": name, "labels": dict(MANAGED)}
        topology = {"apiVersion": KUEUE_VERSION, "kind": "Topology", "metadata": meta,
                    "spec": {"levels": [{"nodeLabel": label} for label in levels.labels]}}
        flavor = {"apiVersion": KUEUE_VERSION, "kind": "ResourceFlavor", "metadata": {**meta, "labels": dict(MANAGED)},
                  "spec": {"nodeLabels": {product_key: product}, "topologyName": name}}
        out.append((levels, topology, flavor))
    return out, sorted(left)


def kai_topologies(nodes: Nodes, named: Sequence[str], prefix: str) -> list[tuple[Levels, Obj, str]]:
    """KAI Scheduler's ``Topology`` per GPU product, from the levels Kueue's has (KAI's is derived from it:
    ordered ``levels[].nodeLabel``, hostname last, at most 16), and the product's node label and value."""
    out = []
    for levels, topology, flavor in kueue_objects(nodes, named, prefix):
        ((key, value),) = flavor["spec"]["nodeLabels"].items()
        out.append((levels, {"apiVersion": KAI_VERSION, "kind": "Topology",
                             "metadata": {"name": topology["metadata"]["name"], "labels": dict(MANAGED)},
                             "spec": {"levels": topology["spec"]["levels"]}}, f"{key}={value}"))
    return out


def volcano_hypernodes(nodes: Nodes, named: Sequence[str], prefix: str) -> tuple[Levels, list[Obj]]:
    """``HyperNode``s over every GPU node: tier 1 the lowest level above hostname (the NVLink domain where it
    groups nodes), each higher tier the next level, whose members are the HyperNodes of the tier under it."""
    members = gpu_nodes(nodes, prefix)
    levels = fleet_levels(members, named, prefix)
    tiers = [label for label in reversed(levels.labels) if label != HOSTNAME]
    groups = {(label, labels[label]): set[str]() for label in tiers for labels in members.values()}
    for label in tiers:
        for name, labels in members.items():
            groups[(label, labels[label])].add(name)
    named_as = names({key: (_short(key[0]), key[1]) for key in groups})
    shorts = [_short(label) for label in tiers]  # a tier's name: its label's short name, the whole key where shared
    tier_names = {label: label if shorts.count(_short(label)) > 1 else _short(label) for label in tiers}
    objects: list[Obj] = []
    below: dict[str, frozenset[str]] = {}  # HyperNode name -> its nodes, of the tier under
    for tier, label in enumerate(tiers, start=1):
        current: dict[str, frozenset[str]] = {}
        for (of, value), held in sorted(groups.items()):
            if of != label:
                continue
            hn = named_as[(of, value)]
            current[hn] = frozenset(held)
            if tier == 1:
                selector = {"labelMatch": {"matchLabels": {label: value},
                                           "matchExpressions": [{"key": f"{prefix}/gpu.count", "operator": "Exists"}]}}
                spec_members = [{"type": "Node", "selector": selector}]
            else:
                spec_members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}}
                                for child, nodes_of in sorted(below.items()) if nodes_of <= held]
            objects.append({"apiVersion": VOLCANO_VERSION, "kind": "HyperNode",
                            "metadata": {"name": hn, "labels": dict(MANAGED)},
                            "spec": {"tier": tier, "tierName": tier_names[label], "members": spec_members}})
        below = current
    return levels, objects
