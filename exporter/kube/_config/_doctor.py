"""``topolink doctor``'s cluster checks: what the agent's settings need from the cluster, each found missing with
the fix. The RuntimeClass the DaemonSet names, the NodeFeature CRD when labels go through NFD, and every
permission the sinks asked for (``_rbac.PERMISSIONS`` by use), asked of the server as the caller with a
SelfSubjectAccessReview each, so the answer is the server's own (RBAC and every other authorizer), not a reading
of roles. Pure but for the port's calls; nothing is written but the reviews, which the server does not store.
``Finding`` alone loads little: serve's preflight uses it on every node, the cluster checks only with a sink on."""

from __future__ import annotations

from dataclasses import dataclass

from .._api._api import NODE_FEATURE, Kind, KubeApi
from .._api._errors import PublishError
from ._config import KubePublishConfig

RUNTIME_CLASS = Kind("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses")
ACCESS_REVIEW = Kind("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews")
SUBJECT_REVIEW = Kind("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews")
OPERATOR = "docs/operator.md"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    ok: bool
    detail: str
    fix: str = ""


def uses(cfg: KubePublishConfig) -> list[str]:
    """The permission uses (``PERMISSIONS`` keys) the sinks ``cfg`` asks for need."""
    out = {"node": ["node-labels"], "nodefeature": ["node-feature"]}.get(cfg.labels_via, [])
    for on, use in ((cfg.resource_slices, "resource-slices"), (cfg.device_taint_rules, "device-taint-rules"),
                    (cfg.node_condition, "node-condition"), (cfg.node_taint, "node-taint")):
        if on:
            out.append(use)
    return out


def runtime_class(api: KubeApi, name: str) -> Finding:
    check = f"RuntimeClass {name}"
    try:
        found = api.get(RUNTIME_CLASS, name)
    except PublishError as exc:
        return Finding(check, False, f"cannot be read: {exc}", "run doctor with a kubeconfig that may get "
                       "runtimeclasses, or check by hand: kubectl get runtimeclass " + name)
    if found is None:
        return Finding(check, False, "not found: the DaemonSet's pods would never start (its events say so, "
                       "rollout status times out)", "install the GPU Operator or the NVIDIA container toolkit's "
                       f"RuntimeClass, or patch runtimeClassName in an overlay ({OPERATOR}, How the DaemonSet "
                       "reads the node)")
    return Finding(check, True, f"handler {found.get('handler', '?')}")


def node_feature_crd(api: KubeApi, cfg: KubePublishConfig) -> list[Finding]:
    from .._sinks._label_sinks import NFD_FIX

    if cfg.labels_via != "nodefeature":
        return []
    served = api.served_versions(NODE_FEATURE.group)
    check = f"NodeFeature CRD ({NODE_FEATURE.group}/{NODE_FEATURE.version})"
    if NODE_FEATURE.version in served:
        return [Finding(check, True, "served")]
    return [Finding(check, False, f"not served (versions: {', '.join(served) or 'none'}): labelsVia=nodefeature "
                    "writes nothing", NFD_FIX)]


def _allowed(api: KubeApi, group: str, resource: str, verb: str, *, namespace: str | None,
             account: str | None) -> bool:
    """The server's verdict for the caller (a SelfSubjectAccessReview) or, ``account`` ``NAMESPACE/NAME``, for
    that ServiceAccount (a SubjectAccessReview: the caller needs create on subjectaccessreviews)."""
    plural, _, sub = resource.partition("/")
    attributes = {"group": group, "resource": plural, "verb": verb} | ({"subresource": sub} if sub else {}) | (
        {"namespace": namespace} if namespace else {})
    spec: dict[str, object] = {"resourceAttributes": attributes}
    kind = ACCESS_REVIEW
    if account:
        ns, _, name = account.partition("/")
        kind, spec = SUBJECT_REVIEW, spec | {"user": f"system:serviceaccount:{ns}:{name}", "groups": [
            "system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]}
    review = api.create(kind, {"apiVersion": "authorization.k8s.io/v1", "kind": kind.kind, "metadata": {"name": ""},
                               "spec": spec})
    return bool((review.get("status") or {}).get("allowed"))


def permissions(api: KubeApi, cfg: KubePublishConfig, account: str | None = None) -> list[Finding]:
    from ._rbac import PERMISSIONS

    out = []
    for use in uses(cfg):
        missing = []
        for p in PERMISSIONS[use]:
            namespace = cfg.nfd_namespace if p.namespaced else None
            for verb in sorted(p.verbs):
                if not _allowed(api, p.group, p.resource, verb, namespace=namespace, account=account):
                    where = f" in namespace {namespace}" if namespace else ""
                    missing.append(f"{verb} {p.resource}{'.' + p.group if p.group else ''}{where}")
        if missing:
            out.append(Finding(f"RBAC for {use}{' of ' + account if account else ''}", False,
                               "missing: " + ", ".join(missing),
                               "apply the overlay's RBAC for this setting (daemonset/overlays/default, or nfd for "
                               f"labelsVia=nodefeature; {OPERATOR}, Least privilege)"))
        else:
            out.append(Finding(f"RBAC for {use}{' of ' + account if account else ''}", True, "allowed"))
    return out


def cluster_findings(api: KubeApi, cfg: KubePublishConfig, runtime: str, account: str | None = None) -> list[Finding]:
    return [runtime_class(api, runtime), *node_feature_crd(api, cfg), *permissions(api, cfg, account)]
