"""One reconcile: what the fleet wants against what the controller made, and the writes between them.

Ours is what carries the controller's label (``app.kubernetes.io/managed-by: topolink-controller``) and names its
field manager in ``managedFields``: only such an object is ever deleted. A wanted object is applied (server-side,
the controller's field manager, forced) only where the server's copy differs from it; an object of the same name
that another manager made (its managed-by label neither ours nor ``topolink``, the one-off ``topolink cluster
--apply``'s, which the controller adopts) is left alone, and said so.

What the controller made is read from an :class:`Observed` (the fleet controller's informers and their mutation
cache: no list each sync), told of each write; without one (``topolink cluster``'s tests, the benchmark) each sync
lists its kinds by the label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._api._api import Kind, KubeApi, Obj
from .._api._errors import NotFound
from .._fleet._wanted import KINDS, PART_KINDS, Key, key, kind_of

MANAGER = "topolink-controller"
MANAGED_BY = "app.kubernetes.io/managed-by"
ADOPTED = frozenset({"topolink", MANAGER})


def contains(actual: Any, wanted: Any) -> bool:
    """Whether ``actual`` (the server's copy, with its defaults) holds everything of ``wanted``."""
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and contains(actual[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(actual, list) and len(actual) == len(wanted) and all(
            contains(a, w) for a, w in zip(actual, wanted, strict=True))
    return bool(actual == wanted)


def ours(obj: Obj) -> Obj:
    """The wanted object as the controller writes it: its own managed-by label."""
    meta = dict(obj["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY: MANAGER}
    return {**obj, "metadata": meta}


def _made_by_us(obj: Obj) -> bool:
    return any(e.get("manager") == MANAGER for e in (obj.get("metadata") or {}).get("managedFields") or [])


class Observed(Protocol):
    def objects(self, kind: Kind, namespace: str | None) -> list[Obj] | None:
        """The controller's objects of ``kind`` (in ``namespace``), its writes included; None: not kept (list)."""
        ...

    def stored(self, kind: Kind, reply: Obj) -> None:
        """The server's reply to an apply."""
        ...

    def deleted(self, kind: Kind, obj: Obj) -> None:
        """An object deleted (or found gone)."""
        ...


@dataclass(slots=True)
class SyncResult:
    applied: list[Key] = field(default_factory=list)
    deleted: list[Key] = field(default_factory=list)
    unchanged: int = 0
    left_alone: list[str] = field(default_factory=list)  # objects of the same name another manager made


def served_parts(api: KubeApi, parts: Sequence[str]) -> dict[str, str]:
    """Each part -> '' when every kind it writes is served, else what is missing."""
    out = {}
    for part in parts:
        missing = [f"{k.plural}.{k.group}/{k.version}" for k in (KINDS[n] for n in PART_KINDS[part])
                   if k.plural not in api.served_resources(k.group, k.version)]
        out[part] = ", ".join(missing)
    return out


def _namespaces(kind: Kind, wanted: Mapping[Key, Obj], namespaces: Mapping[str, str]) -> Sequence[str | None]:
    """Where the kind's objects are looked for: cluster-wide, or the namespace the controller writes it in (and
    any a wanted object names): never every namespace, which its RBAC does not grant."""
    if not kind.namespaced:
        return [None]
    return sorted({namespaces[kind.plural], *(k[1] for k, o in wanted.items() if kind_of(o) == kind)})


def sync(api: KubeApi, wanted: Mapping[Key, Obj], parts: Sequence[str], namespaces: Mapping[str, str],
         *, leading: Callable[[], bool] = lambda: True, observed: Observed | None = None) -> SyncResult:
    """Write what differs for the kinds of ``parts`` (a namespaced kind in ``namespaces[plural]``);
    stop writing as soon as ``leading()`` is False. ``observed``: where what the controller made is read."""
    result = SyncResult()
    actual: dict[Key, Obj] = {}
    for part in parts:
        for name in PART_KINDS[part]:
            kind = KINDS[name]
            for ns in _namespaces(kind, wanted, namespaces):
                found = observed.objects(kind, ns) if observed is not None else None
                if found is None:
                    found = api.list(kind, {MANAGED_BY: MANAGER}, namespace=ns)
                for item in found:
                    obj = {"apiVersion": kind.api_version, "kind": kind.kind, **item}  # a list's items have neither
                    actual[key(obj)] = obj
    kinds = {KINDS[n] for p in parts for n in PART_KINDS[p]}
    for k, obj in sorted(wanted.items()):
        kind = kind_of(obj)
        if kind not in kinds:
            continue
        mine = ours(obj)
        if k in actual:
            if contains(actual[k], mine):
                result.unchanged += 1
                continue
        else:
            there = api.get(kind, obj["metadata"]["name"], obj["metadata"].get("namespace"))
            owner = ((there or {}).get("metadata", {}).get("labels") or {}).get(MANAGED_BY)
            if there is not None and owner not in ADOPTED:
                result.left_alone.append(f"{kind.kind} {'/'.join(k[1:]).lstrip('/')} (managed by {owner or 'no one'})")
                continue
        if not leading():
            return result
        reply = api.apply(kind, mine)
        if observed is not None:
            observed.stored(kind, reply)
        result.applied.append(k)
    for k, obj in sorted(actual.items()):
        if k not in wanted and _made_by_us(obj):
            if not leading():
                return result
            with suppress(NotFound):  # gone already
                api.delete(kind_of(obj), obj["metadata"]["name"], obj["metadata"].get("namespace"))
            if observed is not None:
                observed.deleted(kind_of(obj), obj)
            result.deleted.append(k)
    return result
