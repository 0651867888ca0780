"""``prune``: the uninstall path. Removes every label, NodeFeature, slice and taint rule we made, on one node
or the whole cluster, and the node condition and taint (``_prune_nodes``). Labels go through server-side apply
with an empty set, so only keys our field manager owns are removed; objects are found by the
``app.kubernetes.io/managed-by=topolink`` label. Pruning every node also removes the cluster's objects we made
(``CLUSTER_KINDS``: the DeviceClasses and ResourceClaimTemplates of ``topolink cluster --apply``), those with our
label whose fields our field manager wrote, never another's, and the fleet controller's (``_controller_objects``);
one node's prune leaves them, as other nodes may still be in their classes."""

from __future__ import annotations

from dataclasses import dataclass

from .._api._api import (
    MANAGED_BY,
    MANAGER,
    NODE_FEATURE,
    RESOURCE_GROUP,
    SLICE_VERSIONS,
    TAINT_RULE_VERSIONS,
    Kind,
    KubeApi,
    slice_kind,
    taint_rule_kind,
)
from .._desired._labels import catalogue
from .._sinks._label_sinks import NODE_NAME_LABEL
from .._sinks._slice_sink import NotServed, pick_version
from ._config import KubePublishConfig
from ._prune_controller import prune_controller_objects
from ._prune_nodes import prune_node_marks


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    labels: int = 0  # nodes whose labels were cleared
    node_features: int = 0
    slices: int = 0
    taint_rules: int = 0
    files: int = 0
    node_marks: int = 0  # nodes whose GPUTopologyDegraded condition or NoSchedule taint of ours was removed
    cluster_objects: tuple[tuple[str, int], ...] = ()  # (kind, removed) for each of CLUSTER_KINDS (all nodes only)
    not_served: tuple[str, ...] = ()  # kinds the server does not serve: nothing of them to prune


def prune(cfg: KubePublishConfig, node: str | None, api: KubeApi | None = None,
          controller_namespace: str = "topolink") -> PruneResult:
    """Errors propagate (:class:`~._errors.PublishError`): an uninstall that half-failed must say so. A kind
    the server does not serve (DeviceTaintRules behind a feature gate, NodeFeatures without NFD) has nothing
    to prune: it is named in ``not_served``, not an error. ``controller_namespace``: where the fleet controller
    keeps its Slurm ConfigMap (its Lease's namespace)."""
    files = 0
    if cfg.labels_via == "file" and cfg.features_file.exists():
        cfg.features_file.unlink()
        files = 1
    if api is None:
        from ._config import connect

        api = connect(cfg)
    nodes = [api.get_node(node)] if node else list(api.list_nodes())
    ours = catalogue(cfg.labels)
    cleared = 0
    for view in nodes:
        if view.owned & (ours | {k for k in view.owned if k.startswith(cfg.prefix + "/")}):
            api.apply_node_labels(view.name, {})
            cleared += 1
    marks = prune_node_marks(api, cfg.prefix, nodes)
    missing: list[str] = []
    features = 0
    if api.served_versions(NODE_FEATURE.group):
        for obj in api.list(NODE_FEATURE, MANAGED_BY, namespace=None):
            meta = obj.get("metadata", {})
            if node is None or meta.get("labels", {}).get(NODE_NAME_LABEL) == node:
                api.delete(NODE_FEATURE, meta["name"], meta.get("namespace"))
                features += 1
    else:
        missing.append("NodeFeatures")
    slices = rules = 0
    try:
        kind = slice_kind(pick_version(api, RESOURCE_GROUP, SLICE_VERSIONS, "resourceslices"))
        fields = {"spec.driver": cfg.driver} | ({"spec.nodeName": node} if node else {})
        for obj in api.list(kind, MANAGED_BY, fields=fields):
            api.delete(kind, obj["metadata"]["name"])
            slices += 1
    except NotServed:
        missing.append("ResourceSlices")
    try:
        kind = taint_rule_kind(pick_version(api, RESOURCE_GROUP, TAINT_RULE_VERSIONS, "devicetaintrules"))
        for obj in api.list(kind, MANAGED_BY):
            labels = obj.get("metadata", {}).get("labels", {})
            if node is None or labels.get(f"{cfg.prefix}/node") == node:
                api.delete(kind, obj["metadata"]["name"])
                rules += 1
    except NotServed:
        missing.append("DeviceTaintRules")
    removed = (*_prune_cluster_objects(api, missing),
               *prune_controller_objects(api, controller_namespace, missing)) if node is None else ()
    return PruneResult(labels=cleared, node_features=features, slices=slices, taint_rules=rules, files=files,
                       not_served=tuple(missing), node_marks=marks, cluster_objects=removed)


# The cluster-scoped or namespaced objects of ``topolink cluster --apply`` an uninstall removes beside the nodes'
# own: (kind, plural, versions preferred first, namespaced). The fleet controller's: ``_prune_controller``.
CLUSTER_KINDS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("DeviceClass", "deviceclasses", SLICE_VERSIONS, False),
    ("ResourceClaimTemplate", "resourceclaimtemplates", SLICE_VERSIONS, True),
)


def _ours(obj: dict[str, object]) -> bool:
    """Made by us: our managed-by label (the list's selector) and fields our field manager wrote."""
    meta = obj.get("metadata")
    fields = meta.get("managedFields") if isinstance(meta, dict) else None
    return isinstance(fields, list) and any(isinstance(f, dict) and f.get("manager") == MANAGER for f in fields)


def _prune_cluster_objects(api: KubeApi, missing: list[str]) -> tuple[tuple[str, int], ...]:
    out = []
    for name, plural, versions, namespaced in CLUSTER_KINDS:
        try:
            kind = Kind(RESOURCE_GROUP, pick_version(api, RESOURCE_GROUP, versions, plural), name, plural,
                        namespaced=namespaced)
        except NotServed:
            missing.append(f"{name}s")
            continue
        removed = 0
        for obj in api.list(kind, MANAGED_BY, namespace=None):
            if _ours(obj):
                api.delete(kind, obj["metadata"]["name"], obj["metadata"].get("namespace"))
                removed += 1
        out.append((f"{name}(s)", removed))
    return tuple(out)
