"""What node-level schedulers read, from the fleet's node labels (pure): Kueue's ``Topology`` and
``ResourceFlavor`` per GPU product, Volcano's ``HyperNode`` tiers, and Slurm's ``topology.yaml`` block section.

Every level is a label the nodes already carry (``_levels``); the objects name labels and nodes, never a value
the fleet does not have. Names are DNS subdomains made from the values; a value that is not one already gets
a short hash of itself, so two values never share a name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._levels import HOSTNAME, Levels, fleet_levels, own_levels

Obj = dict[str, Any]
KUEUE_VERSION = "kueue.x-k8s.io/v1beta2"  # Kueue's storage version (v1beta1 is served, deprecated)
VOLCANO_VERSION = "topology.volcano.sh/v1alpha1"
Nodes = Mapping[str, Mapping[str, str]]


def dns_name(*parts: str, limit: int = 63) -> str:
    """A DNS subdomain (RFC 1123) from ``parts`` joined by ``-``; a hash of the text where it had to change."""
    text = "-".join(parts)
    name = re.sub(r"-*\.[-.]*", ".", re.sub(r"[^a-z0-9.-]+", "-", text.lower())).strip("-.")
    if name == text and len(name) <= limit:
        return name
    tag = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-.')}-{tag}".lstrip("-")


def _short(label: str) -> str:
    return label.rsplit("/", 1)[-1]


def gpu_nodes(nodes: Nodes, prefix: str) -> dict[str, Mapping[str, str]]:
    """The nodes topolink labelled with a GPU count (the rest are no GPU scheduler's)."""
    return {name: labels for name, labels in nodes.items() if labels.get(f"{prefix}/gpu.count", "").isdigit()}


def kueue_objects(nodes: Nodes, named: Sequence[str], prefix: str) -> list[tuple[Levels, Obj, Obj]]:
    """Per GPU product: the levels, a ``Topology`` and the ``ResourceFlavor`` that selects the product's nodes
    and names the topology. The levels hold on every node of the product (the flavor's nodes)."""
    product_key = f"{prefix}/gpu.product"
    by_product: dict[str, dict[str, Mapping[str, str]]] = {}
    for name, labels in gpu_nodes(nodes, prefix).items():
        if product_key in labels:
            by_product.setdefault(labels[product_key], {})[name] = labels
    out = []
    for product, members in sorted(by_product.items()):
        levels = fleet_levels(members, named, prefix)
        if not levels.labels:
            continue
        name = dns_name("topolink", product)
        meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "topolink"}}
        topology = {"apiVersion": KUEUE_VERSION, "kind": "Topology", "metadata": meta,
                    "spec": {"levels": [{"nodeLabel": label} for label in levels.labels]}}
        flavor = {"apiVersion": KUEUE_VERSION, "kind": "ResourceFlavor", "metadata": dict(meta),
                  "spec": {"nodeLabels": {product_key: product}, "topologyName": name}}
        out.append((levels, topology, flavor))
    return out


def volcano_hypernodes(nodes: Nodes, named: Sequence[str], prefix: str) -> tuple[Levels, list[Obj]]:
    """``HyperNode``s over every GPU node: tier 1 the lowest level above hostname (the NVLink domain where it
    groups nodes), each higher tier the next level, whose members are the HyperNodes of the tier under it."""
    members = gpu_nodes(nodes, prefix)
    levels = fleet_levels(members, named, prefix)
    tiers = [label for label in reversed(levels.labels) if label != HOSTNAME]
    objects: list[Obj] = []
    below: dict[str, frozenset[str]] = {}  # HyperNode name -> its nodes, of the tier under
    for tier, label in enumerate(tiers, start=1):
        groups: dict[str, set[str]] = {}
        for name, labels in members.items():
            groups.setdefault(labels[label], set()).add(name)
        current: dict[str, frozenset[str]] = {}
        for value, names in sorted(groups.items()):
            hn = dns_name(_short(label), value, limit=253)
            current[hn] = frozenset(names)
            if tier == 1:
                selector = {"labelMatch": {"matchLabels": {label: value},
                                           "matchExpressions": [{"key": f"{prefix}/gpu.count", "operator": "Exists"}]}}
                spec_members = [{"type": "Node", "selector": selector}]
            else:
                spec_members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}}
                                for child, held in sorted(below.items()) if held <= names]
            objects.append({"apiVersion": VOLCANO_VERSION, "kind": "HyperNode",
                            "metadata": {"name": hn, "labels": {"app.kubernetes.io/managed-by": "topolink"}},
                            "spec": {"tier": tier, "tierName": _short(label), "members": spec_members}})
        below = current
    return levels, objects


def slurm_blocks(nodes: Nodes, prefix: str, *, topology: str = "topolink") -> tuple[Obj, list[str]]:
    """Slurm's ``topology.yaml`` entry for the block plugin: one block per NVLink domain that holds two nodes or
    more (nodes by their hostname label, else their name), ``block_sizes`` the smallest block's node count; and
    the GPU nodes left out (alone in their domain, or without a domain label)."""
    domain_key = own_levels(prefix)[0]
    blocks: dict[str, list[str]] = {}
    alone: list[str] = []
    for name, labels in sorted(gpu_nodes(nodes, prefix).items()):
        host = labels.get(HOSTNAME, name)
        if domain_key in labels:
            blocks.setdefault(labels[domain_key], []).append(host)
        else:
            alone.append(host)
    for value in [v for v, hosts in blocks.items() if len(hosts) < 2]:
        alone += blocks.pop(value)
    entry: Obj = {"topology": topology, "cluster_default": True,
                  "block": {"block_sizes": [min(map(len, blocks.values()))] if blocks else [],
                            "blocks": [{"block": dns_name("nvl", value), "nodes": ",".join(hosts)}
                                       for value, hosts in sorted(blocks.items())]}}
    return entry, sorted(alone)
