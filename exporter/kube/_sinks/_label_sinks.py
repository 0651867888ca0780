"""Label sinks: the Node itself (server-side apply), an NFD ``NodeFeature``, or an NFD feature file.

Each pass: read what is there (one request), compute the desired labels from the snapshot and that,
plan, and send nothing when the plan is empty.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topology import Snapshot

from ..._core._files import UnsafeFile, read_regular, write_file
from ..._core._sink import PublishResult
from .._api._api import MANAGED_BY, NODE_FEATURE, KubeApi, NodeView, Obj
from .._api._errors import InvalidObject, NotFound, PublishError, retry_floor
from .._desired._compat import COMPAT
from .._desired._labels import LabelConfig, catalogue, desired_labels
from .._desired._names import check_labels, is_label_value, object_name
from ._adopt import Adopter

log = logging.getLogger(__name__)
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
FEATURE_FILE_LIMIT = 65536
NFD_FIX = ("install Node Feature Discovery (its CRDs and master), or publish on the Node instead "
           "(--labels-via node; labelsVia=node with the default overlay)")


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelPlan:
    apply: Mapping[str, str] | None  # every key we own after the write; None: send nothing
    remove: frozenset[str]  # ours, no longer produced (dropped from the applied set)
    skipped: frozenset[str]  # opt-in keys another component owns


def plan_node_labels(node: NodeView, desired: Mapping[str, str], cfg: LabelConfig, complete: bool) -> LabelPlan:
    """Server-side apply owns exactly the keys in the body: omitting a key we applied before deletes it,
    so the body is always the whole desired set, and a stale key counts only when we provably own it."""
    skipped = frozenset(k for k in desired if k in COMPAT and k in node.others and k not in node.owned)
    wanted = {k: v for k, v in desired.items() if k not in skipped}
    stale = frozenset(k for k in node.labels if k in node.owned and k in catalogue(cfg) and k not in wanted)
    remove = stale if complete else frozenset()
    if not complete:
        wanted |= {k: node.labels[k] for k in stale}
    changed = any(node.labels.get(k) != v for k, v in wanted.items())
    return LabelPlan(apply=wanted if changed or remove else None, remove=remove, skipped=skipped)


def _failed(sink: str, exc: PublishError) -> PublishResult:
    log.debug("%s: %s", sink, exc)  # the agent logs the failed publish, once
    return PublishResult(failed=1, detail=f"{type(exc).__name__}: {exc}", retry_after=retry_floor(exc))


class NodeLabelSink:
    name = "node-labels"

    def __init__(self, api: KubeApi, node: str, cfg: LabelConfig) -> None:
        self._api, self._node, self._cfg = api, node, cfg

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            node = self._api.get_node(self._node)
            desired = desired_labels(snapshot, self._cfg, node.labels)
            plan = plan_node_labels(node, desired, self._cfg, snapshot.complete)
            if plan.apply is None:
                return PublishResult(unchanged=len(desired))
            self._api.apply_node_labels(self._node, plan.apply)
            return PublishResult(written=1)
        except PublishError as exc:
            return _failed(self.name, exc)


def node_feature(node: str, namespace: str, labels: Mapping[str, str], owners: Sequence[Obj]) -> Obj:
    if not is_label_value(node):
        raise InvalidObject(f"node name {node!r} cannot be the value of {NODE_NAME_LABEL}")
    return {
        "apiVersion": NODE_FEATURE.api_version, "kind": NODE_FEATURE.kind,
        "metadata": {"name": object_name("topolink-features-for", node), "namespace": namespace,
                     "labels": {NODE_NAME_LABEL: node, **MANAGED_BY},
                     **({"ownerReferences": [dict(o) for o in owners]} if owners else {})},
        "spec": {"labels": dict(sorted(labels.items()))},
    }


class NodeFeatureSink:
    """NFD master turns ``spec.labels`` into Node labels; nfd-gc removes the object with its Node."""

    name = "node-feature"

    def __init__(self, api: KubeApi, node: str, namespace: str, cfg: LabelConfig,
                 owners: Sequence[Obj] = ()) -> None:
        self._api, self._node, self._ns, self._owners = api, node, namespace, tuple(owners)
        self._cfg = LabelConfig(prefix=cfg.prefix, compat=False)  # nvidia.com keys only through the Node
        self._adopter = Adopter(self.name)

    def _ours(self, have: Obj) -> bool:
        """Named for this node, and labelled for no other node."""
        return bool(((have.get("metadata") or {}).get("labels") or {}).get(NODE_NAME_LABEL, self._node) == self._node)

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            name = object_name("topolink-features-for", self._node)
            current = self._api.get(NODE_FEATURE, name, self._ns)
            observed: dict[str, Any] = dict((current or {}).get("spec", {}).get("labels") or {})
            labels = desired_labels(snapshot, self._cfg, observed)
            want = node_feature(self._node, self._ns, labels, self._owners)
            if current is None:  # the server's copy decides: someone else's that is gone is no reason to hold back
                self._adopter.forget(name)
                self._adopter.create(self._api, NODE_FEATURE, want, self._ours)
                return PublishResult(written=1)
            if observed == labels and _meta_same(current, want):
                return PublishResult(unchanged=len(labels))
            if not self._ours(current):
                if self._adopter.foreign(name):
                    return PublishResult(unchanged=0)
                raise self._adopter.disown(NODE_FEATURE, name)
            self._api.apply(NODE_FEATURE, want)
            return PublishResult(written=1)
        except NotFound as exc:
            return _failed(self.name, self._why_not_found(exc))
        except PublishError as exc:
            return _failed(self.name, exc)

    def _why_not_found(self, exc: NotFound) -> PublishError:
        """A 404 writing a NodeFeature: the CRD not served (NFD not installed; one more request, on failure only)
        said so with its fix, else the server's own answer (a namespace that is not there)."""
        try:
            served = self._api.served_versions(NODE_FEATURE.group)
        except PublishError:
            return exc
        if NODE_FEATURE.version in served:
            return exc
        return NotFound(f"the NodeFeature CRD ({NODE_FEATURE.group}/{NODE_FEATURE.version}) is not served "
                        f"(versions: {', '.join(served) or 'none'}): {NFD_FIX}")


def _meta_same(current: Obj, want: Obj) -> bool:
    have, need = current.get("metadata", {}), want["metadata"]
    labels_ok = all(have.get("labels", {}).get(k) == v for k, v in need["labels"].items())
    return labels_ok and have.get("ownerReferences", []) == need.get("ownerReferences", [])


MAX_FEATURE_FILE = 1 << 20  # a few hundred short lines at most; a bigger file is not ours


def read_feature_file(path: Path) -> dict[str, str]:
    """The file's ``key=value`` lines; nothing when it is not there. A FIFO, device or directory in its place
    is UnsafeFile (never read, never waited on)."""
    return parse_feature_file(_read_or_none(path) or "")


def parse_feature_file(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value or "true"
    return out


def _read_or_none(path: Path) -> str | None:
    try:
        return read_regular(str(path), MAX_FEATURE_FILE).decode(errors="replace")
    except FileNotFoundError:
        return None


def render_feature_file(labels: Mapping[str, str]) -> str:
    body = "# written by topolink; kept on exit so labels survive restarts\n"
    body += "".join(f"{k}={v}\n" for k, v in sorted(check_labels(labels).items()))
    if len(body.encode()) > FEATURE_FILE_LIMIT:
        raise InvalidObject(f"feature file of {len(body.encode())} bytes: nfd-worker ignores files over 64 KiB")
    return body


class FeatureFileSink:
    """nfd-worker's ``local`` source. Written atomically (dot-file, then rename) and never deleted on exit:
    deleting it would make the labels vanish on every restart."""

    name = "feature-file"

    def __init__(self, path: Path, cfg: LabelConfig) -> None:
        self._path = path
        self._cfg = LabelConfig(prefix=cfg.prefix, compat=False)

    def publish(self, snapshot: Snapshot) -> PublishResult:
        try:
            now = _read_or_none(self._path)
            observed = {k: v for k, v in parse_feature_file(now or "").items() if k in catalogue(self._cfg)}
            labels = desired_labels(snapshot, self._cfg, observed)
            body = render_feature_file(labels)
            if now == body:
                return PublishResult(unchanged=len(labels))
            self._path.parent.mkdir(parents=True, exist_ok=True)
            # replaced atomically, never over a non-regular file; durable: nfd-worker reads it after a reboot
            write_file(str(self._path), body.encode(), durable=True)
            return PublishResult(written=1)
        except PublishError as exc:
            return _failed(self.name, exc)
        except UnsafeFile as exc:
            return _failed(self.name, PublishError(str(exc)))
        except OSError as exc:
            return _failed(self.name, PublishError(f"{self._path}: {exc}"))
