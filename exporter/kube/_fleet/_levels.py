"""Topology levels a node-level scheduler can read: node-label keys, highest first, hostname last, each kept only
where it holds on the fleet read (pure).

The rules are the schedulers' own (Kueue's ``Topology``, Volcano's ``HyperNode`` tiers, kube-scheduler's and
KAI's ordered levels): a level's label exists on every node it spans (kueue#6996: a node without it is never
placed), ``kubernetes.io/hostname`` is the lowest level, and each level's groups hold whole groups of the level
under it (a tree). A candidate that breaks a rule is dropped with the reason, never bent to fit; one that
groups the nodes exactly as a lower level does adds nothing and is dropped too. The top level may not take a
node's host name as a value (kueue#14009: Kueue keys both by the bare value and leaves that node out).

The candidates are the labels the operator names (existing cloud or Topograph labels, highest first), then
topolink's own (the NVLink domain and the rack), ordered by how many groups each makes (fewer is higher: a rack
may hold several NVLink partitions, or one NVLink domain span two racks). No level is invented under
``topology.kubernetes.io/``: that prefix is Kubernetes' own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HOSTNAME = "kubernetes.io/hostname"
RESERVED = "topology.kubernetes.io/"
MAX_LEVELS = 16  # Kueue's Topology.spec.levels maxItems


@dataclass(frozen=True, slots=True)
class Levels:
    labels: tuple[str, ...]  # highest first; HOSTNAME last where every node has it
    dropped: tuple[tuple[str, str], ...]  # (label, why), in the order tried


def own_levels(prefix: str) -> tuple[str, str]:
    """topolink's level labels under ``prefix``: the NVLink domain and the rack."""
    if prefix.startswith(RESERVED.rstrip("/")):
        raise ValueError(f"{prefix}: {RESERVED}* is reserved to Kubernetes; topolink invents no level there")
    return f"{prefix}/nvlink-domain", f"{prefix}/rack"


def _groups(nodes: Mapping[str, Mapping[str, str]], label: str) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for name, labels in nodes.items():
        out.setdefault(labels[label], set()).add(name)
    return {value: frozenset(members) for value, members in out.items()}


def _missing(nodes: Mapping[str, Mapping[str, str]], label: str) -> list[str]:
    return sorted(name for name, labels in nodes.items() if label not in labels)


def _why_not(lower: dict[str, frozenset[str]], lower_label: str, upper: dict[str, frozenset[str]]) -> str | None:
    """Why ``upper``'s groups cannot sit above ``lower``'s, or None when they nest and differ."""
    parent = {name: value for value, members in upper.items() for name in members}
    for value, members in sorted(lower.items()):
        above = {parent[name] for name in members}
        if len(above) > 1:
            return f"does not hold {lower_label}={value} whole (its nodes carry {len(above)} values)"
    if len(upper) == len(lower):
        return f"groups the nodes exactly as {lower_label} does"
    return None


def _top_is_a_host(nodes: Mapping[str, Mapping[str, str]], label: str) -> str | None:
    """Why ``label`` cannot be the top level: one of its values is a node's host name. Kueue keys a top-level
    domain by its bare value and a node by its bare host name, in one map: the node is left out (kueue#14009)."""
    hosts = {labels[HOSTNAME]: name for name, labels in nodes.items()}
    for name, labels in sorted(nodes.items()):
        if labels[label] in hosts:
            return (f"its value {labels[label]} on {name} is the host name of {hosts[labels[label]]} "
                    "(as the top level, Kueue leaves that node out: kueue#14009)")
    return None


def fleet_levels(nodes: Mapping[str, Mapping[str, str]], named: Sequence[str], prefix: str) -> Levels:
    """The levels for ``nodes`` (name -> labels): ``named`` (highest first) then topolink's own, each kept where
    it exists on every node, nests over the level kept under it and differs from it; hostname last."""
    if not nodes:
        return Levels((), ())
    ours = sorted(own_levels(prefix), key=lambda label: -len(_groups(nodes, label)) if not _missing(nodes, label)
                  else 0)
    candidates = [*dict.fromkeys(label for label in (*named, *reversed(ours)) if label != HOSTNAME)]
    dropped: list[tuple[str, str]] = []
    present: list[str] = []
    for label in candidates:
        missing = _missing(nodes, label)
        if missing:
            dropped.append((label, f"missing on {len(missing)} of {len(nodes)} nodes (first: {missing[0]})"))
        else:
            present.append(label)
    host_missing = _missing(nodes, HOSTNAME)
    if host_missing:
        dropped.append((HOSTNAME, f"missing on {len(host_missing)} of {len(nodes)} nodes (first: {host_missing[0]})"))
        lower_label, lower = "the node name", {name: frozenset((name,)) for name in nodes}
    else:
        lower_label, lower = HOSTNAME, _groups(nodes, HOSTNAME)
    kept: list[str] = []
    for label in reversed(present):  # lowest first
        groups = _groups(nodes, label)
        why = _why_not(lower, lower_label, groups)
        if why is not None:
            dropped.append((label, why))
            continue
        kept.append(label)
        lower_label, lower = label, groups
    labels = [*reversed(kept), *(() if host_missing else (HOSTNAME,))]
    for label in labels[:-MAX_LEVELS] if len(labels) > MAX_LEVELS else ():
        dropped.append((label, f"above Kueue's {MAX_LEVELS} levels"))
    labels = labels[-MAX_LEVELS:]
    while not host_missing and len(labels) > 1 and (why := _top_is_a_host(nodes, labels[0])) is not None:
        dropped.append((labels.pop(0), why))
    return Levels(tuple(labels), tuple(dropped))
