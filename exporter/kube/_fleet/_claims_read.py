"""The fleet's claim classes: nodes grouped by their ``<prefix>/claim-class`` label, and each class's GPU
groups read from one member's ResourceSlices of our driver, for ``topolink cluster --groups`` and
``--format claims``.

One list of node labels (paginated, metadata only), then one list of slices per class, of its first member
that has any (of at most three), narrowed to the member by field selector (a server that ignores it, or a
saved list, sends more: the read filters itself). The member's groups are recomputed from its devices and must
hash to its label: where they do not (an agent of another version, a pool being rewritten, a node between its
label and its slice) the next member is read; where none of three does, the class is left out, and the reason
is said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..._core._claim_groups import claim_groups
from .._api._api import RESOURCE_GROUP
from .._desired._claim_places import places_from_devices
from .._desired._claims import ClaimClass
from .._desired._slices import devices_of
from ._cluster import _NODES, PAGE, PARTIAL, PageApi, _ListMeta, pages, slice_version


class _AnyList(msgspec.Struct, frozen=True):
    items: list[dict[str, Any]] = []
    metadata: _ListMeta = _ListMeta()


_ANY = msgspec.json.Decoder(_AnyList)
TRIES = 3  # members of a class asked for their slices before the class is left out


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRead:
    classes: tuple[ClaimClass, ...]  # most nodes first
    problems: tuple[str, ...]


def _pool_devices(items: Iterable[dict[str, Any]], node: str, driver: str) -> list[dict[str, Any]]:
    """The node's devices from its slices of the newest pool generation (older ones are ignored, as a
    scheduler ignores them)."""
    mine = [s for s in items if (s.get("spec") or {}).get("nodeName") == node
            and (s.get("spec") or {}).get("driver") == driver]
    if not mine:
        return []
    newest = max(int(((s["spec"].get("pool") or {}).get("generation")) or 0) for s in mine)
    return [d for s in mine if int((s["spec"].get("pool") or {}).get("generation") or 0) == newest
            for d in devices_of(s)]


def read_claim_classes(api: PageApi, *, prefix: str = "gpu.topology", driver: str = "gpu.topology",
                       limit: int = PAGE) -> ClaimRead:
    label = f"{prefix}/claim-class"
    members: dict[str, list[str]] = {}
    for nodes in pages(api, "/api/v1/nodes", {"labelSelector": label}, _NODES, limit=limit, accept=PARTIAL):
        for node in nodes:
            if value := node.metadata.labels.get(label):
                members.setdefault(value, []).append(node.metadata.name)
    version = slice_version(api)
    if version is None:
        return ClaimRead(classes=(), problems=("the server serves no ResourceSlices",) if members else ())
    path = f"/apis/{RESOURCE_GROUP}/{version}/resourceslices"

    def slices_of(node: str) -> list[dict[str, Any]]:
        selector = f"spec.nodeName={node},spec.driver={driver}"
        return [s for page in pages(api, path, {"fieldSelector": selector}, _ANY, limit=limit) for s in page]
    return claim_classes(members, slices_of, driver)


def claim_classes(members: Mapping[str, Iterable[str]], slices_of: Callable[[str], Iterable[dict[str, Any]]],
                  driver: str) -> ClaimRead:
    """The classes of ``members`` (class id -> its nodes), most nodes first, each class's groups from the
    slices of its first member (by name) whose slices make the class, of at most :data:`TRIES` (``slices_of(node)``: the
    node's slices, or more); the one rule of ``topolink cluster`` and the fleet controller (from its store)."""
    classes, problems = [], []
    for class_id, names in sorted(((c, sorted(n)) for c, n in members.items()), key=lambda kv: (-len(kv[1]), kv[0])):
        other: tuple[str, str] | None = None  # the first member whose slices make another class, and that class
        for node in names[:TRIES]:  # a member whose agent has not published its slices yet, or whose slices and
            if not (devices := _pool_devices(slices_of(node), node, driver)):  # label are not both written yet
                continue  # (its pool rewritten, its label moved first): the next one; never the class left out
            groups = claim_groups(places_from_devices(devices, driver))
            if groups.class_id == class_id:
                classes.append(ClaimClass(id=class_id, nodes=tuple(names), groups=groups))
                break
            other = other or (node, groups.class_id)
        else:
            problems.append(f"class {class_id}: the slices of node {other[0]} make class {other[1]} (an agent of "
                            "another version, or its pool being rewritten): left out" if other else
                            f"class {class_id}: none of nodes {', '.join(names[:TRIES])} has a ResourceSlice of "
                            f"{driver}: left out")
    return ClaimRead(classes=tuple(classes), problems=tuple(problems))
