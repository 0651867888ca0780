"""``prune``: the uninstall path. Removes every label, NodeFeature, slice and taint rule we made, on one node
or the whole cluster. Labels go through server-side apply with an empty set, so only keys our field manager
owns are removed; objects are found by the ``app.kubernetes.io/managed-by=topolink`` label."""

from __future__ import annotations

from dataclasses import dataclass

from ._api import MANAGED_BY, NODE_FEATURE, SLICE_VERSIONS, TAINT_RULE_VERSIONS, KubeApi, slice_kind, taint_rule_kind
from ._config import KubePublishConfig
from ._label_sinks import NODE_NAME_LABEL
from ._labels import catalogue


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    labels: int = 0  # nodes whose labels were cleared
    node_features: int = 0
    slices: int = 0
    taint_rules: int = 0
    files: int = 0


def prune(cfg: KubePublishConfig, node: str | None, api: KubeApi | None = None) -> PruneResult:
    """Errors propagate (:class:`~._errors.PublishError`): an uninstall that half-failed must say so."""
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
    features = 0
    for obj in api.list(NODE_FEATURE, MANAGED_BY, namespace=None) if "nfd.k8s-sigs.io" in _groups(api) else []:
        meta = obj.get("metadata", {})
        if node is None or meta.get("labels", {}).get(NODE_NAME_LABEL) == node:
            api.delete(NODE_FEATURE, meta["name"], meta.get("namespace"))
            features += 1
    slices = rules = 0
    served = set(api.served_versions("resource.k8s.io"))
    for version in (v for v in SLICE_VERSIONS if v in served):
        for obj in api.list(slice_kind(version), MANAGED_BY):
            spec = obj.get("spec", {})
            if spec.get("driver") == cfg.driver and (node is None or spec.get("nodeName") == node):
                api.delete(slice_kind(version), obj["metadata"]["name"])
                slices += 1
        break  # every served version shows the same objects
    for version in (v for v in TAINT_RULE_VERSIONS if v in served):
        for obj in api.list(taint_rule_kind(version), MANAGED_BY):
            labels = obj.get("metadata", {}).get("labels", {})
            if node is None or labels.get(f"{cfg.prefix}/node") == node:
                api.delete(taint_rule_kind(version), obj["metadata"]["name"])
                rules += 1
        break
    return PruneResult(labels=cleared, node_features=features, slices=slices, taint_rules=rules, files=files)


def _groups(api: KubeApi) -> set[str]:
    return {"nfd.k8s-sigs.io"} if api.served_versions("nfd.k8s-sigs.io") else set()
