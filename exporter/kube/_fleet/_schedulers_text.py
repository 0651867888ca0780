"""``topolink cluster --emit``: the schedulers' objects as text, and the read of the node labels they need.

Kubernetes objects (Kueue's, KAI's, Volcano's) come as one YAML stream (``kubectl apply -f -`` takes it), Slurm's
entries as the ``topology.yaml`` they belong in; comments above say which levels were kept and why any candidate
was dropped, and which nodes were left out and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._cluster import _NODES, PAGE, PARTIAL, PageApi, pages
from ._levels import HOSTNAME, Levels, own_levels
from ._schedulers import KAI_VERSION, KUEUE_MINIMUM, KUEUE_VERSION, kai_topologies, kueue_plan, volcano_hypernodes
from ._slurm import slurm_topology

EMITS = ("kueue", "kai", "volcano", "slurm")


def read_node_labels(api: PageApi, *, prefix: str, named: Sequence[str],
                     limit: int = PAGE) -> dict[str, dict[str, str]]:
    """Every node topolink labelled with a GPU count: its labels of ours, the ``named`` ones (levels, and the
    label naming a node for Slurm) and hostname."""
    keep = {*named, HOSTNAME, *own_levels(prefix)}
    mark = prefix + "/"
    out: dict[str, dict[str, str]] = {}
    for nodes in pages(api, "/api/v1/nodes", {"labelSelector": f"{prefix}/gpu.count"}, _NODES, limit=limit,
                       accept=PARTIAL):
        for node in nodes:
            labels = {k: v for k, v in node.metadata.labels.items() if k.startswith(mark) or k in keep}
            if f"{prefix}/gpu.count" in labels:
                out[node.metadata.name] = labels
    return out


def _notes(what: str, levels: Levels) -> list[str]:
    lines = [f"# {what}: levels {', '.join(levels.labels) or '(none)'}"]
    lines += [f"#   dropped {label}: {why}" for label, why in levels.dropped]
    return lines


def _stream(docs: list[Any]) -> str:
    import yaml

    return "".join("---\n" + yaml.safe_dump(doc, sort_keys=False) for doc in docs)


def _kueue(nodes: dict[str, dict[str, str]], named: Sequence[str], prefix: str) -> str:
    made, left = kueue_plan(nodes, named, prefix)
    lines = [f"# Kueue {KUEUE_MINIMUM} or later ({KUEUE_VERSION}): a Topology and a ResourceFlavor per GPU product"]
    docs: list[Any] = []
    for levels, topology, flavor in made:
        lines += _notes(f"Topology {topology['metadata']['name']}", levels)
        docs += [topology, flavor]
    lines += [f"#   in no flavor: {name}: {why}" for name, why in left]
    if not docs:
        return "\n".join([*lines, "# no GPU node carries topolink's labels"]) + "\n"
    return "\n".join(lines) + "\n" + _stream(docs)


def _kai(nodes: dict[str, dict[str, str]], named: Sequence[str], prefix: str) -> str:
    made = kai_topologies(nodes, named, prefix)
    lines = [f"# KAI Scheduler ({KAI_VERSION}) Topology per GPU product, the levels of Kueue's; a workload names "
             "it in its kai.scheduler/topology annotation (docs/schedulers.md)"]
    for levels, topology, select in made:
        lines += _notes(f"Topology {topology['metadata']['name']} (nodes {select})", levels)
    if not made:
        return "\n".join([*lines, "# no GPU node carries topolink's labels"]) + "\n"
    return "\n".join(lines) + "\n" + _stream([topology for _, topology, _ in made])


def _slurm(nodes: dict[str, dict[str, str]], named: Sequence[str], prefix: str, node_label: str) -> str:
    import yaml

    plan = slurm_topology(nodes, named, prefix, node_label=node_label)
    head = ["# topology.yaml (Slurm's block plugin): one block per NVLink domain of two nodes or more; block_sizes "
            "the base block and its power-of-two multiples up to the largest domain"]
    if plan.levels is not None:
        head += _notes(f"{plan.entries[0]['topology']}-tree (topology/tree, for partitions that name it)",
                       plan.levels)
    if plan.alone:
        head.append("#   not in a block (a partition of block nodes never gives them to a job: put them in a "
                    "partition of their own):")
        head += [f"#     {name}: {why}" for name, why in plan.alone]
    return "\n".join(head) + "\n" + yaml.safe_dump(plan.entries, sort_keys=False)


def emit_text(kind: str, nodes: dict[str, dict[str, str]], named: Sequence[str], prefix: str, *,
              node_label: str = HOSTNAME) -> str:
    """The text ``--emit KIND`` prints for ``nodes`` (name -> labels); :class:`NoBlocks` for slurm where no
    NVLink domain holds two nodes."""
    if kind == "kueue":
        return _kueue(nodes, named, prefix)
    if kind == "kai":
        return _kai(nodes, named, prefix)
    if kind == "volcano":
        levels, hypernodes = volcano_hypernodes(nodes, named, prefix)
        notes = _notes("HyperNodes (tier 1 the lowest level above hostname)", levels)
        return "\n".join(notes) + "\n" + _stream(hypernodes)
    return _slurm(nodes, named, prefix, node_label)
