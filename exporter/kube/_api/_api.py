"""The narrow port every applier talks to, and the kinds of objects we write.

Pure code and its tests need no server: a fake implements :class:`KubeApi`. The real one
(:mod:`._client`) is lightkube over HTTP. Objects cross the port as plain JSON dicts, the shape
``kubernetes-validate`` checks and the API server stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]
Objs = list[Obj]  # a name of its own: inside KubeApi, ``list`` is the method
MANAGER = "topolink"
MANAGED_BY = {"app.kubernetes.io/managed-by": MANAGER}


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCE_GROUP = "resource.k8s.io"
SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")  # preferred first
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
NODE_FEATURE = Kind("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature", "nodefeatures", namespaced=True)


def slice_kind(version: str) -> Kind:
    return Kind(RESOURCE_GROUP, version, "ResourceSlice", "resourceslices")


def taint_rule_kind(version: str) -> Kind:
    return Kind(RESOURCE_GROUP, version, "DeviceTaintRule", "devicetaintrules")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    name: str
    uid: str
    labels: Mapping[str, str]
    owned: frozenset[str]  # label keys whose managedFields name our field manager
    others: frozenset[str]  # label keys another field manager has applied or updated


class KubeApi(Protocol):
    """Every call the sinks and prune make. Errors are :class:`~._errors.PublishError` subclasses."""

    def served_versions(self, group: str) -> Sequence[str]: ...

    def served_resources(self, group: str, version: str) -> frozenset[str]:
        """The resources (plural names) ``group/version`` serves: a version can be served without all of its
        kinds (``devicetaintrules`` needs a feature gate that is off by default in 1.36)."""
        ...

    def server_minor(self) -> int: ...

    def get_node(self, name: str) -> NodeView: ...

    def list_nodes(self) -> Sequence[NodeView]: ...

    def apply_node_labels(self, name: str, labels: Mapping[str, str]) -> None: ...

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None: ...

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        """Objects matching every label and every field (a server-side ``fieldSelector``: only what this node
        needs crosses the network)."""
        ...

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str], *,
                       namespace: str | None = None) -> tuple[Objs, str]:
        """As :meth:`list` (a namespaced kind: in ``namespace``, default every namespace), with the list's
        resourceVersion: where a watch of the same selection starts."""
        ...

    def create(self, kind: Kind, obj: Obj) -> Obj: ...

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        """Server-side apply, field manager ``topolink``, forced: we own every field we send."""
        ...

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None: ...

    def on_answer(self, callback: Callable[[], None]) -> None:
        """``callback()`` each time the server answers a request after failing (the client's backoff resets),
        in the thread that made the request."""
        ...

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False, *,
              namespace: str | None = None) -> Iterator[tuple[str, Obj]]:
        """A namespaced kind: in ``namespace``, default every namespace.

        First ``("OPEN", {"timeoutSeconds": n})`` once the server accepted the watch (``n``: when the client asked
        the server to end it, if it did), then ``(type, object)`` for every change after
        ``resource_version`` (``ADDED``, ``MODIFIED``, ``DELETED``) and ``BOOKMARK`` events (asked for: their object
        carries only the resourceVersion reached, which keeps a quiet watch's resourceVersion recent). Ends when the
        server ends the stream (its timeout): the caller opens it again from the last resourceVersion. 410 Gone, as
        an HTTP status or as an ``ERROR`` event inside the stream, raises :class:`~._errors.Expired` (list again);
        any other failure another :class:`~._errors.PublishError`. ``initial`` (no ``resource_version``): a watch
        list, the current state as ``ADDED`` events, then a ``BOOKMARK`` annotated
        ``k8s.io/initial-events-end``, then changes: a list and a watch in one request that no resourceVersion
        can make too old (``sendInitialEvents``, on by default from Kubernetes 1.32; a server without it
        answers 4xx)."""
        ...


# kube-apiserver sends a watch that asked for bookmarks one as it opens, one every minute (its watch cache's
# ``bookmarkFrequency``) and one just before the timeout the client asked for (v1.36.2: at 0.01 s, then 60.1 s
# apart, and 1.5 s before a 150 s timeout). A store kept by a watch with nothing for longer than the interval may be
# out of date: passes list; a stream with nothing for the interval plus a margin is dead (a half-open connection, a
# proxy that stopped forwarding): it ends, and the watch resumes from where it stopped.
BOOKMARK_INTERVAL_S = 60.0
SILENT_S = BOOKMARK_INTERVAL_S + 15.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation of the bookmark that ends a watch list's state


def initial_events_end(obj: Obj) -> bool:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(INITIAL_EVENTS_END) == "true"


def resource_version(obj: Obj) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None
