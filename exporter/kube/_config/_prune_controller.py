"""The fleet controller's objects an uninstall removes (``topolink prune --all-nodes``): every kind it keeps
(``_fleet._wanted.KINDS``: DeviceClasses, ResourceClaimTemplates, Kueue's Topologies and ResourceFlavors, KAI's
Topologies, Volcano's HyperNodes, and its Slurm ConfigMap in its namespace), found by its label
(``app.kubernetes.io/managed-by=topolink-controller``) and deleted only where its field manager
(``topolink-controller``) wrote fields: an object that carries the label but that it never wrote is another's, and
stays (the rule the controller itself deletes by). A kind the server does not serve has nothing to prune.
"""

from __future__ import annotations

from .._api._api import KubeApi, Obj
from .._api._errors import NotFound
from .._controller._sync import MANAGED_BY, MANAGER
from .._fleet._wanted import KINDS, SLURM_CONFIGMAP


def _made_by_controller(obj: Obj) -> bool:
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return any(isinstance(f, dict) and f.get("manager") == MANAGER for f in fields)


def prune_controller_objects(api: KubeApi, namespace: str, missing: list[str]) -> list[tuple[str, int]]:
    """(what, removed) for each kind the controller keeps that the server serves; the others named in
    ``missing``. The ConfigMap is looked for in ``namespace`` alone (the controller's), by name and label."""
    out = []
    for name, kind in KINDS.items():
        what = f"the fleet controller's {kind.kind}(s)" + (f" ({kind.group})" if kind.kind == "Topology" else "")
        if kind.plural not in api.served_resources(kind.group, kind.version):
            missing.append(f"the fleet controller's {kind.plural}.{kind.group or 'core'}/{kind.version}")
            continue
        found = (api.list(kind, {MANAGED_BY: MANAGER}, namespace=namespace, fields={"metadata.name": SLURM_CONFIGMAP})
                 if name == "ConfigMap" else api.list(kind, {MANAGED_BY: MANAGER}, namespace=None))
        removed = 0
        for obj in found:
            if _made_by_controller(obj):
                meta = obj["metadata"]
                try:
                    api.delete(kind, meta["name"], meta.get("namespace"))
                except NotFound:  # gone meanwhile: what was wanted
                    continue
                removed += 1
        out.append((what, removed))
    return out
