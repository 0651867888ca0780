"""Slurm's ``topology.yaml`` from the fleet's node labels (pure), as Slurm's block plugin plans it.

One block per NVLink domain of two nodes or more (a node alone in its domain gains nothing from a block, and
Slurm cannot give it to a job in a partition of block nodes: it is listed, with the advice, instead).
``block_sizes`` is Slurm's rule (topology.yaml(5), ``src/plugins/topology/block/block_record.c``): the planning
base block size first (the smallest block's node count: every block holds it), then power-of-two multiples of
it, up to the first that holds the largest domain, so a job as large as the largest rack has a block level.
Slurm aggregates *adjacent* blocks (2, 4, ... base blocks in the listed order), so blocks are listed in the
fabric's order where ``--level`` names the levels above the domains (those under one leaf switch next to each
other), then by domain. With ``--level``, a second topology, ``<name>-tree``, gives the tree plugin the network
those levels describe (a switch per value, the lowest holding the nodes; the levels kept by ``_levels``' rules,
so they nest as a tree must), for partitions that name it: jobs larger than the largest NVLink domain.

Nodes are named as Slurm knows them: by ``kubernetes.io/hostname`` (else the node's name), or by another label
(Slinky: the slurmd pod's name) that ``node_label`` names; a node without it is left out, and said so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._levels import HOSTNAME, Levels, fleet_levels, own_levels
from ._schedulers import gpu_nodes, names

Nodes = Mapping[str, Mapping[str, str]]


class NoBlocks(ValueError):
    """No NVLink domain holds two nodes or more: a block topology would be empty (slurmctld refuses it)."""


@dataclass(frozen=True, slots=True)
class SlurmPlan:
    entries: list[dict[str, Any]]  # the topology.yaml list: the block topology, then the tree where levels say it
    alone: list[tuple[str, str]]  # (Slurm node name, why not in a block)
    levels: Levels | None  # the tree's levels (highest first; those --level named), None without --level


def block_sizes(sizes: Sequence[int]) -> list[int]:
    """The base block size (the smallest) and its power-of-two multiples up to the first holding the largest."""
    out = [min(sizes)]
    while out[-1] < max(sizes):
        out.append(out[-1] * 2)
    return out


def slurm_topology(nodes: Nodes, named: Sequence[str], prefix: str, *, node_label: str = HOSTNAME,
                   topology: str = "topolink") -> SlurmPlan:
    """The plan for ``nodes`` (name -> labels); :class:`NoBlocks` where no domain holds two nodes."""
    domain_key = own_levels(prefix)[0]
    members = gpu_nodes(nodes, prefix)
    slurm: dict[str, str] = {}  # node -> its Slurm name
    alone: list[tuple[str, str]] = []
    for name, labels in sorted(members.items()):
        if node_label in labels:
            slurm[name] = labels[node_label]
        elif node_label == HOSTNAME:
            slurm[name] = name
        else:
            alone.append((name, f"no {node_label} label (its Slurm node name)"))
    domains: dict[str, list[str]] = {}
    for name, known_as in slurm.items():
        labels = members[name]
        if domain_key in labels:
            domains.setdefault(labels[domain_key], []).append(name)
        else:
            alone.append((known_as, f"no {domain_key} label"))
    for value in [v for v, held in domains.items() if len(held) < 2]:
        alone += [(slurm[n], "alone in its NVLink domain") for n in domains.pop(value)]
    if not domains:
        raise NoBlocks(f"no NVLink domain holds two nodes or more ({len(members)} GPU nodes, each alone in its "
                       "domain or without one): Slurm's block plugin would have no block; use topology/tree "
                       "(--level) or flat")
    above = [label for label in named if all(label in members[n] for held in domains.values() for n in held)]
    order = sorted(domains, key=lambda v: (*(members[domains[v][0]][label] for label in above), v))
    block_names = names({value: ("nvl", value) for value in domains})
    block = {"block_sizes": block_sizes([len(held) for held in domains.values()]),
             "blocks": [{"block": block_names[v], "nodes": ",".join(sorted(slurm[n] for n in domains[v]))}
                        for v in order]}
    entries: list[dict[str, Any]] = [{"topology": topology, "cluster_default": True, "block": block}]
    levels = None
    if named:
        in_tree = {n: labels for n, labels in members.items() if n in slurm}
        levels = fleet_levels(in_tree, named, prefix)
        tiers = [label for label in levels.labels if label in named]  # the network's: NVLink is the blocks'
        levels = Levels(tuple(tiers), tuple((label, why) for label, why in levels.dropped if label in named))
        if tiers:
            entries.append({"topology": f"{topology}-tree", "cluster_default": False,
                            "tree": {"switches": _switches(in_tree, tiers, slurm)}})
    return SlurmPlan(entries=entries, alone=sorted(alone), levels=levels)


def _switches(nodes: Nodes, tiers: Sequence[str], slurm: Mapping[str, str]) -> list[dict[str, str]]:
    """The tree plugin's switches: one per value of each level (``tiers``, highest first); the lowest hold
    nodes."""
    held: dict[tuple[str, str], set[str]] = {}
    for label in tiers:
        for name, labels in nodes.items():
            held.setdefault((label, labels[label]), set()).add(name)
    switch = names({key: (key[0].rsplit("/", 1)[-1], key[1]) for key in held})
    out = []
    for i, label in enumerate(tiers):
        for key in sorted(k for k in held if k[0] == label):
            if i == len(tiers) - 1:
                out.append({"switch": switch[key], "nodes": ",".join(sorted(slurm[n] for n in held[key]))})
            else:
                under = sorted(switch[k] for k in held if k[0] == tiers[i + 1] and held[k] <= held[key])
                out.append({"switch": switch[key], "children": ",".join(under)})
    return out
