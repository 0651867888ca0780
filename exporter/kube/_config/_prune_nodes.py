"""``prune`` for what the node-condition sink left on Nodes: its ``NoSchedule`` taint (a taint left behind would
keep pods off the node after an uninstall) and its ``GPUTopologyDegraded`` condition. Only Nodes that carry a
label under our prefix are read (the agent's nodes), each once."""

from __future__ import annotations

from collections.abc import Iterable

from .._api._api import NodeView
from .._desired._node_condition import CONDITION, taint_key
from .._sinks._node_condition_sink import NodeStatusApi


def prune_node_marks(api: object, prefix: str, nodes: Iterable[NodeView]) -> int:
    """Nodes whose taint or condition of ours was removed; 0 with a client that has no Node status calls."""
    if not isinstance(api, NodeStatusApi):
        return 0
    key, cleared = taint_key(prefix), 0
    for view in nodes:
        if not any(label.startswith(prefix + "/") for label in view.labels):
            continue
        node = api.get_node_object(view.name)
        taints = (node.get("spec") or {}).get("taints") or []
        conditions = (node.get("status") or {}).get("conditions") or []
        changed = False
        if any(t.get("key") == key for t in taints):
            api.replace_node_taints(view.name, [t for t in taints if t.get("key") != key],
                                    node["metadata"]["resourceVersion"])
            changed = True
        if any(c.get("type") == CONDITION for c in conditions):
            api.clear_node_condition(view.name)
            changed = True
        cleared += changed
    return cleared
