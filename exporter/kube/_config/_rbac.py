"""The Kubernetes permissions behind every call :class:`~._api.KubeApi` makes, by use.

This one table is what the shipped RBAC (``daemonset/``) is checked against, and what the client's
requests are checked against (tests record the verbs and resources the real client sends). Discovery
(``/apis/<group>``) and ``/version`` need nothing here: the ``system:discovery`` ClusterRole grants them to
every authenticated user.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._api._api import NODE_FEATURE, RESOURCE_GROUP
from .._fleet._wanted import KINDS

# The RBAC verb each port method needs (apply is a server-side apply: PATCH).
VERBS: Mapping[str, str] = {
    "get_node": "get", "list_nodes": "list", "apply_node_labels": "patch",
    "get": "get", "list": "list", "create": "create", "apply": "patch", "delete": "delete", "watch": "watch",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Permission:
    group: str
    resource: str
    verbs: frozenset[str]
    namespaced: bool = False  # granted by a Role in the agent's namespace, not cluster-wide


def _p(group: str, resource: str, *verbs: str, namespaced: bool = False) -> Permission:
    return Permission(group=group, resource=resource, verbs=frozenset(verbs), namespaced=namespaced)


NODE_FEATURES = NODE_FEATURE.plural
CONTROLLER_KINDS = sorted({(k.group, k.plural) for k in KINDS.values() if k.kind != "ConfigMap"})
PERMISSIONS: Mapping[str, tuple[Permission, ...]] = {
    "node-labels": (_p("", "nodes", "get", "patch"),),
    "node-feature": (_p(NODE_FEATURE.group, NODE_FEATURES, "get", "create", "patch", namespaced=True),),
    # the node is read for the uid of the slices' ownerReference; the slices are watched because kubelet
    # deletes every node-local slice when it starts
    "resource-slices": (_p("", "nodes", "get"), _p(RESOURCE_GROUP, "resourceslices", "list", "watch", "create",
                                                   "patch", "delete")),
    # the node-condition sink reads its Node whole, applies its condition to nodes/status and, with the taint
    # on, replaces the Node's taints (a JSON patch: PATCH on nodes)
    "node-condition": (_p("", "nodes", "get"), _p("", "nodes/status", "patch")),
    "node-taint": (_p("", "nodes", "get", "patch"),),
    "device-taint-rules": (_p(RESOURCE_GROUP, "devicetaintrules", "list", "create", "patch", "delete"),),
    "prune": (_p("", "nodes", "get", "list", "patch"), _p("", "nodes/status", "patch"),
              _p(NODE_FEATURE.group, NODE_FEATURES, "list", "delete"),
              _p(RESOURCE_GROUP, "resourceslices", "list", "delete"),
              _p(RESOURCE_GROUP, "devicetaintrules", "list", "delete"),
              # every node's prune: the claim objects of `topolink cluster --apply` (_prune.CLUSTER_KINDS) and every
              # kind the fleet controller keeps (_prune_controller), its Slurm ConfigMap in its namespace
              *(_p(group, plural, "list", "delete") for group, plural in CONTROLLER_KINDS),
              _p("", "configmaps", "list", "delete", namespaced=True)),
    # the fleet controller (``topolink controller``): its informers list and watch Nodes and slices; each kind it
    # keeps is listed once and watched (its own, by label), read by name before a first write (whose is it?),
    # applied (a server-side apply that makes an object needs create as well as patch) and deleted; the Lease and
    # the Slurm ConfigMap in its own namespace. Pending pods explained: the pods and every claim watched (the
    # claims allocated anywhere hold devices), an Event on a pod applied in the pod's namespace (made: create; a
    # series updated: patch)
    "controller": (_p("", "nodes", "list", "watch"), _p(RESOURCE_GROUP, "resourceslices", "list", "watch"),
                   _p("", "pods", "list", "watch"), _p(RESOURCE_GROUP, "resourceclaims", "list", "watch"),
                   _p("events.k8s.io", "events", "create", "patch"),
                   *(_p(group, plural, "get", "list", "watch", "create", "patch", "delete")
                     for group, plural in CONTROLLER_KINDS),
                   _p("coordination.k8s.io", "leases", "get", "create", "patch", namespaced=True),
                   _p("", "configmaps", "get", "list", "watch", "create", "patch", "delete", namespaced=True)),
}


def needed(uses: Iterable[str], *, namespaced: bool) -> dict[tuple[str, str], frozenset[str]]:
    """(apiGroup, resource) -> verbs that ``uses`` need, cluster-wide or in the agent's namespace."""
    out: dict[tuple[str, str], frozenset[str]] = {}
    for use in uses:
        for p in PERMISSIONS[use]:
            if p.namespaced == namespaced:
                out[p.group, p.resource] = out.get((p.group, p.resource), frozenset()) | p.verbs
    return out


def policy_rules(uses: Iterable[str], *, namespaced: bool = False) -> list[dict[str, Any]]:
    """RBAC ``rules`` for a ClusterRole (or, ``namespaced``, a Role): one rule per resource, sorted."""
    return [{"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
            for (group, resource), verbs in sorted(needed(uses, namespaced=namespaced).items())]
