"""``topolink cluster --emit``: the schedulers' objects as text, and the read of the node labels they need.

Kubernetes objects come as one YAML stream (``kubectl apply -f -`` takes it), Slurm's entry as the
``topology.yaml`` it belongs in; comments above say which levels were kept and why any candidate was dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._cluster import _NODES, PAGE, PARTIAL, PageApi, pages
from ._levels import HOSTNAME, Levels, own_levels
from ._schedulers import kueue_objects, slurm_blocks, volcano_hypernodes

EMITS = ("kueue", "volcano", "slurm")


def read_node_labels(api: PageApi, *, prefix: str, named: Sequence[str],
                     limit: int = PAGE) -> dict[str, dict[str, str]]:
    """Every node topolink labelled with a GPU count: its labels of ours, the ``named`` ones and hostname."""
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


def emit_text(kind: str, nodes: dict[str, dict[str, str]], named: Sequence[str], prefix: str) -> str:
    """The text ``--emit KIND`` prints for ``nodes`` (name -> labels)."""
    if kind == "kueue":
        lines: list[str] = []
        docs: list[Any] = []
        for levels, topology, flavor in kueue_objects(nodes, named, prefix):
            lines += _notes(f"Topology {topology['metadata']['name']}", levels)
            docs += [topology, flavor]
        if not docs:
            return "# no GPU node carries topolink's labels\n"
        return "\n".join(lines) + "\n" + _stream(docs)
    if kind == "volcano":
        levels, hypernodes = volcano_hypernodes(nodes, named, prefix)
        notes = _notes("HyperNodes (tier 1 the lowest level above hostname)", levels)
        return "\n".join(notes) + "\n" + _stream(hypernodes)
    entry, alone = slurm_blocks(nodes, prefix)
    head = ["# topology.yaml (Slurm's block plugin): one block per NVLink domain of two nodes or more"]
    if alone:
        head.append(f"#   not in a block (alone in their NVLink domain): {','.join(alone)}")
    import yaml

    return "\n".join(head) + "\n" + yaml.safe_dump([entry], sort_keys=False)

